import Foundation
import Sesame

/// An app's Facebook configuration: its id, the Graph API version it is pinned to, where the
/// login dialog and the Graph API answer, and its client token.
///
/// ```swift
/// let facebook = FacebookProvider(appID: "1234567890", clientToken: "abc123")
/// // Against the emulator:
/// let local = FacebookProvider(appID: "1234567890", clientToken: "abc123",
///     dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL)
/// ```
///
/// A desktop app needs only the app id and, for device login, the client token. The app
/// secret is for server-side code only: Facebook says never to ship it in a desktop or mobile
/// app, because anything in the binary can be read. Nothing on the desktop path uses it; when
/// one is set, the Graph client signs its calls with `appsecret_proof` and token extension uses
/// `fb_exchange_token`.
public struct FacebookProvider: Sendable {
    /// The Graph API version Sesame is tested against, used when none is given: the newest in
    /// ``GraphAPIVersions/all``.
    public static let defaultGraphVersion = GraphAPIVersions.tested
    /// Facebook's login dialog origin.
    public static let facebookDialogBaseURL = URL(string: "https://www.facebook.com")!
    /// Facebook's Graph API origin.
    public static let facebookGraphBaseURL = URL(string: "https://graph.facebook.com")!

    /// The app id.
    public var appID: String
    /// The Graph API version every call uses unless it names its own, such as `v27.0`.
    public var graphVersion: String
    /// Where the login dialog is (`https://www.facebook.com`, or the emulator).
    public var dialogBaseURL: URL
    /// Where the Graph API is (`https://graph.facebook.com`, or the emulator).
    public var graphBaseURL: URL
    /// The app's client token (App Dashboard → Settings → Advanced), needed for device login.
    /// It identifies the app and is meant to be embedded; it is not the app secret.
    public var clientToken: String?
    /// A Facebook Login for Business configuration (App Dashboard → Facebook Login for Business →
    /// Configurations): when set, the login dialog and device login send `config_id` and no
    /// `scope`, because the configuration decides the token type, the assets and the permissions
    /// the person is asked for. After such a login Sesame reads `debug_token`'s `granular_scopes`
    /// (`AccessToken.granularScopes`).
    public var loginConfigurationID: String?
    /// The app secret, for server-side use only. Never set this in a desktop app.
    public var appSecret: FacebookAppSecret?
    /// The mapping from Graph errors to `AuthError`.
    public var taxonomy: FacebookErrorTaxonomy
    /// Host names the dialog and Graph URLs may reach over plain `http`: the user's explicit,
    /// by-name opt-in. Empty by default: `https` only, except to loopback addresses (the
    /// emulator), as `EndpointSecurity` rules.
    public var allowedInsecureHosts: Set<String>

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - appID: the app id.
    ///   - graphVersion: the pinned Graph API version, `v` then digits (`v27.0`).
    ///   - clientToken: the client token, for device login.
    ///   - dialogBaseURL: the login dialog origin.
    ///   - graphBaseURL: the Graph API origin.
    ///   - appSecret: server-side code only; see ``FacebookAppSecret``.
    ///   - taxonomy: the mapping from Graph errors to `AuthError`; Facebook's own table by default.
    ///   - allowedInsecureHosts: hosts the dialog and Graph URLs may reach over plain `http`
    ///     although they are not loopback addresses; see ``allowedInsecureHosts``.
    public init(
        appID: String, graphVersion: String = FacebookProvider.defaultGraphVersion, clientToken: String? = nil,
        dialogBaseURL: URL = FacebookProvider.facebookDialogBaseURL,
        graphBaseURL: URL = FacebookProvider.facebookGraphBaseURL, appSecret: FacebookAppSecret? = nil,
        taxonomy: FacebookErrorTaxonomy = FacebookErrorTaxonomy(), allowedInsecureHosts: Set<String> = []
    ) {
        self.allowedInsecureHosts = allowedInsecureHosts
        self.appID = appID
        self.graphVersion = graphVersion
        self.clientToken = clientToken
        self.dialogBaseURL = dialogBaseURL
        self.graphBaseURL = graphBaseURL
        self.appSecret = appSecret
        self.taxonomy = taxonomy
    }

    // MARK: Identity

    /// The provider id logins are stored under: `facebook`.
    public var id: ProviderID { .facebook }
    /// "Facebook".
    public var displayName: String { "Facebook" }
    /// How Graph API answers are classified.
    public var errorTaxonomy: any ErrorTaxonomy { taxonomy }

    // MARK: Addresses

    /// Whether `version` looks like a Graph API version (`v2`, `v27.0`).
    public static func isValidVersion(_ version: String) -> Bool {
        // `v`, digits, and at most one `.` between digits; bytes, since it runs on every call.
        let bytes = version.utf8
        guard bytes.count >= 2, bytes.count <= 8, bytes.first == UInt8(ascii: "v") else { return false }
        var dots = 0
        var previousWasDigit = false
        for byte in bytes.dropFirst() {
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                previousWasDigit = true
            } else if byte == UInt8(ascii: "."), previousWasDigit, dots == 0 {
                dots += 1
                previousWasDigit = false
            } else {
                return false
            }
        }
        return previousWasDigit
    }

    /// The version to use: `override` when given, else ``graphVersion``.
    ///
    /// - Throws: `AuthError` (`ErrorCategory.invalid`) when it is not a version.
    public func version(_ override: String? = nil) throws -> String {
        let version = override ?? graphVersion
        guard Self.isValidVersion(version) else {
            throw AuthError(
                category: .invalid,
                message: "'\(version)' is not a Graph API version; write it as 'v' and a number, such as "
                    + "'\(GraphAPIVersions.tested)'.",
                provider: .facebook)
        }
        return version
    }

    /// The URL of a Graph path (`me`, `/me/feed`) at `version` (the pinned one when `nil`),
    /// with `query` appended.
    ///
    /// - Throws: `AuthError` (`invalid`) for a bad version or path, or a Graph origin that is
    ///   plain `http` to a host that is neither loopback nor in ``allowedInsecureHosts``.
    public func graphURL(_ path: String, version: String? = nil, query: [(String, String)] = []) throws -> URL {
        try checkGraphOrigin()
        let text = OAuth.appendingQuery(query, toText: try graphPathText(path, version: version))
        guard let url = URL(string: text) else { throw Self.invalidGraphPath(path) }
        return url
    }

    /// Refuses a Graph origin that is plain `http` to a host that is neither loopback nor in
    /// ``allowedInsecureHosts``.
    func checkGraphOrigin() throws(AuthError) {
        try EndpointSecurity.check(
            graphBaseURL, role: "The Graph API URL", provider: .facebook, allowingInsecureHosts: allowedInsecureHosts)
    }

    /// `…/{version}/{path}` as text, without the origin check ``graphURL(_:version:query:)`` makes.
    func graphPathText(_ path: String, version: String?) throws -> String {
        try graphPathText(path, version: version, base: graphBaseText)
    }

    /// The same on `base`, ``graphBaseText`` worked out before (a client whose provider cannot
    /// change keeps it rather than writing the URL out again for every call).
    func graphPathText(_ path: String, version: String?, base: String) throws -> String {
        let version = try self.version(version)
        let path = path.utf8.drop { $0 == UInt8(ascii: "/") }
        // Bytes into one buffer: appending to a String costs a capacity and uniqueness check each.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(base.utf8.count + version.utf8.count + path.count + 2)
        bytes.append(contentsOf: base.utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(contentsOf: version.utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(contentsOf: path)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The Graph origin as text, without a trailing `/`.
    var graphBaseText: String { Self.trimmedBase(graphBaseURL) }

    static func invalidGraphPath(_ path: String) -> AuthError {
        AuthError(
            category: .invalid, message: "The Graph path '\(path)' does not make a valid URL.", provider: .facebook)
    }

    /// A call's URL, with its parameters, did not parse. The text is not quoted: it holds the
    /// configured origin, which may carry a user name and password.
    static let unparsableGraphCall = AuthError(
        category: .invalid,
        message: "A Graph call's path and parameters do not make a valid URL; check the path for characters a URL "
            + "cannot hold.",
        provider: .facebook)

    /// The login dialog, `…/{version}/dialog/oauth`.
    ///
    /// - Throws: `AuthError` (`invalid`) for a bad version, or a dialog origin that is plain
    ///   `http` to a host that is neither loopback nor in ``allowedInsecureHosts``.
    public func dialogURL(version: String? = nil) throws -> URL {
        try EndpointSecurity.check(
            dialogBaseURL, role: "The login dialog URL", provider: .facebook,
            allowingInsecureHosts: allowedInsecureHosts)
        return URL(string: "\(Self.trimmedBase(dialogBaseURL))/\(try self.version(version))/dialog/oauth")!
    }

    /// `url` as text without a trailing `/`.
    private static func trimmedBase(_ url: URL) -> String {
        let text = url.absoluteString
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// The token endpoint, `…/{version}/oauth/access_token` on the Graph origin.
    public func tokenURL(version: String? = nil) throws -> URL { try graphURL("oauth/access_token", version: version) }

    /// Facebook as the core's OAuth 2.0 description, for its engine (`OAuth2Provider`): the login
    /// dialog and `oauth/access_token` at the pinned version, comma-separated scopes,
    /// `return_scopes=true`, and `config_id` for a Login for Business configuration. Device login,
    /// extension, logout and the Graph API stay Facebook's own.
    ///
    /// - Throws: `AuthError` (`invalid`) as ``dialogURL(version:)`` and ``tokenURL(version:)`` do.
    var oauth2Description: OAuth2Description {
        get throws {
            OAuth2Description(
                id: id, displayName: displayName,
                endpoints: OAuth2Endpoints(authorization: try dialogURL(), token: try tokenURL()),
                authorizationParameters: [("return_scopes", "true")]
                    + (loginConfigurationID.map { [("config_id", $0)] } ?? []),
                refreshTokensRotate: false, scopeSeparator: ",")
        }
    }

    /// The client access token, `{app-id}|{client-token}`, when a client token is set.
    public var clientAccessToken: String? { clientToken.map { "\(appID)|\($0)" } }

    /// `appsecret_proof` for `accessToken`: lowercase hex HMAC-SHA256 of the token under the app
    /// secret; `nil` without a secret.
    public func appSecretProof(for accessToken: String) -> String? {
        appSecret.map { $0.proof(for: accessToken) }
    }

    /// Whether `url` is on the Graph origin (scheme, host and port), so it may be sent a token.
    func isGraphOrigin(_ url: URL) -> Bool {
        url.scheme?.lowercased() == graphBaseURL.scheme?.lowercased()
            && url.host?.lowercased() == graphBaseURL.host?.lowercased() && url.port == graphBaseURL.port
    }
}

/// An app secret: the core's `ClientSecret`, kept out of every description.
///
/// Facebook: "the App Secret or an App Access token should never be included in any code" that
/// runs on people's machines. Use this only in code that runs on your own server.
public typealias FacebookAppSecret = ClientSecret

extension ClientSecret {
    /// Facebook's `appsecret_proof` for `accessToken`, with this secret as the app secret:
    /// lowercase hex HMAC-SHA256 of the token.
    public func proof(for accessToken: String) -> String {
        Crypto.hmacSHA256(key: Data(value.utf8), data: Data(accessToken.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

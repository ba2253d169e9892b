import Foundation
import Sesame

/// Reading what Facebook says about a new token, as the SDK did after a login: the answer's
/// `expires_in`/`expires_at` and `data_access_expiration_time`, then `GET me?fields=id,permissions`
/// for the user id and the granted and declined permissions.
struct FacebookTokenReader: Sendable {
    var provider: FacebookProvider
    var transport: any HTTPTransport
    var now: @Sendable () -> Date

    /// The token from a token answer (`oauth/access_token`, `device/login_status`): the core's
    /// reading of RFC 6749's fields, Facebook's dates (``applyingDates(of:to:issued:)``), then the
    /// user id and permissions `me` gives and, where they matter, the granular scopes.
    func token(fromAnswer json: JSONValue?, for request: LoginRequest) async throws -> AccessToken {
        guard let answer = OAuthTokenResponse(json: json) else {
            throw AuthError.unreadableLoginAnswer("token answer (it has no access_token)", provider: .facebook)
        }
        let issued = now()
        var token = AccessToken(answer, for: request, now: issued)
        token.permissions = PermissionSet()  // `me` says which, not the request
        Self.applyingDates(of: json, to: &token, issued: issued)
        return try await withGranularScopes(try await completed(token, for: request))
    }

    /// Sets `token`'s expiry from a Facebook token answer's `expires_at` (0: never), else its
    /// `expires_in`, and its data-access expiry from `data_access_expiration_time`; a field the
    /// answer lacks leaves the token's date as it was.
    static func applyingDates(of answer: JSONValue?, to token: inout AccessToken, issued: Date) {
        if let at = answer?["expires_at"]?.lenientInt {
            token.expirationDate = at > 0 ? Date(timeIntervalSince1970: TimeInterval(at)) : nil
        } else if let seconds = answer?["expires_in"]?.lenientInt {
            token.expirationDate = seconds > 0 ? issued.addingTimeInterval(TimeInterval(seconds)) : nil
        }
        if let at = answer?["data_access_expiration_time"]?.lenientInt, at > 0 {
            token.dataAccessExpirationDate = Date(timeIntervalSince1970: TimeInterval(at))
        }
    }

    /// Permissions Facebook grants per object (a Page, an ad account, a business), whose objects
    /// only `debug_token` lists.
    static func isGrantedPerObject(_ permission: String) -> Bool {
        ["pages_", "ads_", "business_", "instagram_", "whatsapp_", "catalog_", "leads_", "commerce_"].contains {
            permission.hasPrefix($0)
        }
    }

    /// `token` with `debug_token`'s `granular_scopes`, after a business login (a configuration)
    /// or one that granted a permission Facebook grants per object. Best effort: the login has
    /// succeeded, so a `debug_token` that fails leaves the token as it was.
    func withGranularScopes(_ token: AccessToken) async throws -> AccessToken {
        guard provider.loginConfigurationID != nil || token.permissions.granted.contains(where: Self.isGrantedPerObject)
        else { return token }
        var token = token
        do {
            let info = try await FacebookHTTP.debugToken(token.tokenString, provider: provider, transport: transport)
            if info.isValid { token.granularScopes = info.granularScopes }
        } catch is CancellationError {
            throw CancellationError()
        } catch {}
        return token
    }

    /// `token` with its user id and permissions read from `me?fields=id,permissions`.
    ///
    /// - Throws: `AuthError` when Facebook refuses the token, and for a re-request
    ///   that came back for another person (the SDK's `ReauthorizeFailedReasonWrongUser`).
    func completed(_ token: AccessToken, for request: LoginRequest?) async throws -> AccessToken {
        var token = token
        let me = try await FacebookHTTP.send(
            .get, "me", parameters: [("fields", "id,permissions")], token: token.tokenString, provider: provider,
            transport: transport)
        token.userID = me["id"]?.stringValue
        if let permissions = me["permissions"] { token.permissions = PermissionSet(graphPermissions: permissions) }
        if let expected = request?.currentToken?.userID, let actual = token.userID, expected != actual {
            throw AuthError(
                category: .retry,
                message: "The permission request was answered by a different Facebook account than the one this "
                    + "session belongs to, so its token was not used. Ask the person to log in as themselves.",
                loginFailedReason: LoginFailedReason(rawValue: "wrongUser"), recoveryTactic: .showMessage,
                provider: .facebook)
        }
        return token
    }
}

extension PermissionSet {
    /// Reads Graph's permission list, `{"data": [{"permission": "email", "status": "granted"}]}`
    /// (or the bare array): `granted` is granted; `declined` and `expired` count as declined.
    public init(graphPermissions json: JSONValue) {
        var granted: [String] = []
        var declined: [String] = []
        for entry in (json["data"] ?? json).arrayValue ?? [] {
            guard let name = entry["permission"]?.stringValue else { continue }
            switch entry["status"]?.stringValue {
            case "granted": granted.append(name)
            case "declined", "expired": declined.append(name)
            default: break
            }
        }
        self.init(granted: granted, declined: declined)
    }
}

/// Small Graph calls for the login flows and the session, with errors classified.
enum FacebookHTTP {
    /// `debug_token` on `token`, checked with the app token when a secret is configured, else
    /// with the token itself.
    ///
    /// Graph takes `input_token` only in the query of a `GET` (its reference documents no other
    /// form, and the method override that once carried it in a `POST` body is a legacy form new
    /// apps cannot use since Graph API v27.0). So the token is in this one URL: Sesame never logs
    /// or shows a URL's query, and every error from the call has the token redacted.
    static func debugToken(
        _ token: String, provider: FacebookProvider, transport: any HTTPTransport
    ) async throws -> TokenIntrospection {
        let checker = provider.appSecret.map { "\(provider.appID)|\($0.value)" } ?? token
        let json: JSONValue
        do {
            json = try await send(
                .get, "debug_token", parameters: [("input_token", token)], token: checker, provider: provider,
                transport: transport)
        } catch let error as AuthError {
            throw error.redacting([token])
        }
        return TokenIntrospection(debugTokenData: json["data"] ?? .null)
    }

    static func send(
        _ method: HTTPMethod, _ path: String, parameters: [(String, String)] = [], token: String?,
        provider: FacebookProvider, transport: any HTTPTransport
    ) async throws -> JSONValue {
        // GraphClient's one exchange (proof, form or query, headers, classification), with a
        // fixed token and a fresh governor, which never waits; the answer as it came.
        let client = GraphClient(provider: provider, transport: transport, accessToken: token)
        let response = try await client.exchange(
            method, try client.graphTarget(path, version: nil), parameters: parameters)
        return JSONValue(parsing: response.body) ?? .null
    }
}

/// Facebook's login dialog for `BrowserLoginFlow`: the core's engine (`OAuth2Provider`) on
/// Facebook's description (`FacebookProvider.oauth2Description`: the versioned `dialog/oauth`
/// and `oauth/access_token`, comma-separated scopes, `return_scopes=true`, PKCE S256 and no
/// secret), with Facebook's hooks: `auth_type=rerequest` when asking again, `default_audience` for
/// publish permissions, and the answer read by Facebook's own rules (`me`, `debug_token`).
///
/// ```swift
/// let login = BrowserLoginFlow(
///     dialect: FacebookBrowserDialect(provider: facebook, transport: transport),
///     receiver: LoopbackRedirectReceiver(), opener: SystemBrowserOpener(), transport: transport)
/// ```
///
/// Facebook restricts desktop redirect URIs; the loopback redirect works where the app's
/// settings allow it (and always against the emulator). Device login is the default otherwise.
public struct FacebookBrowserDialect: BrowserLoginDialect {
    let reader: FacebookTokenReader

    /// Creates a dialect; `transport` reads the user id and permissions after the exchange.
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        reader = FacebookTokenReader(provider: provider, transport: transport, now: now)
    }

    public var provider: ProviderID { .facebook }
    public var errorTaxonomy: any ErrorTaxonomy { reader.provider.taxonomy }

    /// The engine's browser dialect for Facebook's description.
    private func engine() throws -> any BrowserLoginDialect {
        let facebook = reader.provider
        let engine = try OAuth2Provider(
            try facebook.oauth2Description, clientID: facebook.appID, transport: reader.transport,
            allowingInsecureHosts: facebook.allowedInsecureHosts, now: reader.now)
        guard let dialect = engine.browserDialect else { preconditionFailure("Facebook's description has a dialog") }
        return dialect
    }

    public func authorizationURL(for request: LoginRequest, redirectURI: URL, state: String, pkce: PKCE) throws -> URL {
        var request = request
        if request.isRerequest { request.options.authorizationParameters["auth_type"] = "rerequest" }
        if let audience = request.defaultAudience.facebookValue {
            request.options.authorizationParameters["default_audience"] = audience
        }
        // A Login for Business configuration (the description's `config_id`) replaces the scope list.
        if reader.provider.loginConfigurationID != nil { request.permissions = [] }
        return try engine().authorizationURL(for: request, redirectURI: redirectURI, state: state, pkce: pkce)
    }

    public func tokenRequest(
        code: String, redirectURI: URL, pkce: PKCE, for request: LoginRequest
    ) throws -> HTTPRequest {
        try engine().tokenRequest(code: code, redirectURI: redirectURI, pkce: pkce, for: request)
    }

    public func token(from response: HTTPResponse, for request: LoginRequest) async throws -> AccessToken {
        try await reader.token(fromAnswer: response.json, for: request)
    }
}

/// Facebook Login for Devices for `DeviceLoginFlow`: `POST device/login` and
/// `POST device/login_status` with the client access token (`{app-id}|{client-token}`).
///
/// Poll answers are read by subcode: 1349174 pending, 1349172 slow down (the interval doubles,
/// as the SDK did), 1349152 expired, 1349173 declined (the person's choice:
/// `ErrorCategory.userCancelled`). The error-shaped pending answers carry
/// `error_user_msg`, which is never shown: they are not errors.
public struct FacebookDeviceDialect: DeviceLoginDialect {
    let reader: FacebookTokenReader
    private var facebook: FacebookProvider { reader.provider }

    /// Creates a dialect for `provider`, whose ``FacebookProvider/clientToken`` is required;
    /// `transport` reads the user id and permissions after approval.
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        reader = FacebookTokenReader(provider: provider, transport: transport, now: now)
    }

    public var provider: ProviderID { .facebook }
    public var errorTaxonomy: any ErrorTaxonomy { facebook.taxonomy }

    /// Device login subcodes.
    public enum Subcode {
        /// The person has not finished yet.
        public static let pending = 1_349_174
        /// Polling too often.
        public static let slowDown = 1_349_172
        /// The code expired.
        public static let expired = 1_349_152
        /// The person declined.
        public static let declined = 1_349_173
    }

    private func clientAccessToken() throws -> String {
        guard let token = facebook.clientAccessToken else {
            throw AuthError(
                category: .invalid,
                message: "Facebook device login needs the app's client token (App Dashboard → Settings → Advanced → "
                    + "Client token); set FacebookProvider.clientToken.",
                recoveryTactic: .showMessage, provider: .facebook)
        }
        return token
    }

    private func form(_ path: String, _ items: [(String, String)]) throws -> HTTPRequest {
        HTTPRequest(
            method: .post, url: try facebook.graphURL(path),
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(FormEncoding.encode(items).utf8))
    }

    public func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        var items = [("access_token", try clientAccessToken())]
        if let configuration = facebook.loginConfigurationID {
            items.append(("config_id", configuration))
        } else if !request.permissions.isEmpty {
            items.append(("scope", request.permissions.map(\.name).joined(separator: ",")))
        }
        return try form("device/login", items)
    }

    public func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        try RFC8628DeviceDialect.readAuthorization(response.json, deviceCodeField: "code", provider: .facebook)
    }

    public func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest {
        try form(
            "device/login_status",
            [("access_token", try clientAccessToken()), ("code", context.authorization.deviceCode)])
    }

    public func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        if response.isSuccess {
            guard OAuthTokenResponse(json: response.json) != nil else { return .unrecognized }
            return .authorized(try await reader.token(fromAnswer: response.json, for: context.request))
        }
        let body = GraphErrorBody(response.body)
        switch body.subcode {
        case Subcode.pending: return .pending
        case Subcode.slowDown: return .slowDown(interval: context.interval * 2)
        case Subcode.expired: return .expired
        case Subcode.declined:
            return .denied(
                .facebook(
                    error: "access_denied", errorDescription: body.message, errorReason: "user_denied",
                    errorCode: body.code))
        default: return .unrecognized
        }
    }
}

/// A login with a token the person already has (from the Graph API Explorer, say), checked
/// with Facebook before it is stored: `debug_token` must call it valid and for this app, then
/// `me?fields=id,permissions` gives the user id and permissions.
///
/// The token is read by `readToken`, which should take it from standard input or the
/// environment, never from the command line (argv is visible to every user in `ps`).
public struct ExistingTokenLogin: LoginUI {
    let reader: FacebookTokenReader
    /// Supplies the token.
    public var readToken: @Sendable () async throws -> String

    /// Creates a login for `provider`'s app, whose checks `transport` sends.
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, now: @escaping @Sendable () -> Date = { Date() },
        readToken: @escaping @Sendable () async throws -> String
    ) {
        reader = FacebookTokenReader(provider: provider, transport: transport, now: now)
        self.readToken = readToken
    }

    /// Reads one line from standard input on its own thread (the token is not echoed by Sesame;
    /// pipe it in or type it).
    ///
    /// - Throws: `AuthError` (`LoginFailedReason.userCancelled`) when standard input ends before
    ///   a line.
    public static func standardInputLine() async throws -> String {
        try await onOwnThread {
            guard let line = readLine(strippingNewline: true) else {
                throw AuthError(
                    category: .userCancelled, message: "No token was given on standard input.",
                    loginFailedReason: .userCancelled, provider: .facebook)
            }
            return line
        }
    }

    private func rejected(_ why: String, underlying: AuthError? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "The access token you supplied was not accepted: \(why). Get a new user token for this app and "
                + "try again.",
            shouldNotifyUser: true, userMessage: "The access token you supplied was not accepted: \(why).",
            code: underlying?.code, subcode: underlying?.subcode, httpStatus: underlying?.httpStatus,
            loginFailedReason: .invalidSuppliedToken, recoveryTactic: .showMessage, provider: .facebook,
            underlyingError: underlying)
    }

    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        let text = try await readToken().trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, !text.contains(where: { $0.isWhitespace }) else {
            throw rejected("it is empty or has spaces in it")
        }
        let info: TokenIntrospection
        do {
            info = try await FacebookHTTP.debugToken(text, provider: reader.provider, transport: reader.transport)
        } catch let error as AuthError where error.category != .retry && error.category != .server {
            throw rejected("Facebook refused it (\(error.message))", underlying: error)
        }
        guard info.isValid else {
            throw rejected(info.errorMessage.flatMap(GraphErrorBody.text) ?? "debug_token says it is not valid")
        }
        guard info.appID == reader.provider.appID else {
            throw rejected("it belongs to another app (\(info.appID ?? "unknown"))")
        }
        guard info.type == nil || info.type == "USER" else {
            throw rejected("it is not a user access token")
        }
        var token = AccessToken(
            tokenString: text, provider: .facebook, appID: reader.provider.appID, userID: info.userID,
            permissions: PermissionSet(granted: info.scopes), expirationDate: info.expirationDate,
            refreshDate: info.issuedAt ?? reader.now())
        token.dataAccessExpirationDate = info.dataAccessExpirationDate
        token.granularScopes = info.granularScopes
        return try await reader.completed(token, for: nil)
    }
}

/// What `debug_token` says about a token.
public struct TokenIntrospection: Sendable, Hashable {
    /// Whether Facebook accepts the token now.
    public var isValid: Bool
    /// The app it was issued to.
    public var appID: String?
    /// `USER`, `APP`, `PAGE`.
    public var type: String?
    /// The person.
    public var userID: String?
    /// When it expires; `nil` for never (`expires_at: 0`).
    public var expirationDate: Date?
    /// When the app loses access to the person's data.
    public var dataAccessExpirationDate: Date?
    /// When it was issued (long-lived tokens only).
    public var issuedAt: Date?
    /// The granted scopes.
    public var scopes: [String]
    /// The objects scopes were granted for (`granular_scopes`), as a business login grants them.
    public var granularScopes: [FacebookGranularScope]
    /// Facebook's error for an invalid token.
    public var errorCode: Int?
    /// Facebook's error subcode for an invalid token.
    public var errorSubcode: Int?
    /// Facebook's message for an invalid token.
    public var errorMessage: String?

    /// Reads `debug_token`'s `data` object.
    public init(debugTokenData data: JSONValue) {
        func date(_ name: String) -> Date? {
            data[name]?.lenientInt.flatMap { $0 > 0 ? Date(timeIntervalSince1970: TimeInterval($0)) : nil }
        }
        isValid = data["is_valid"]?.boolValue ?? false
        appID = data["app_id"]?.stringValue
        type = data["type"]?.stringValue
        userID = data["user_id"]?.stringValue
        expirationDate = date("expires_at")
        dataAccessExpirationDate = date("data_access_expires_at")
        issuedAt = date("issued_at")
        scopes = data["scopes"]?.arrayValue?.compactMap(\.stringValue) ?? []
        granularScopes = data["granular_scopes"]?.arrayValue?.compactMap(FacebookGranularScope.init(json:)) ?? []
        errorCode = data["error"]?["code"]?.lenientInt
        errorSubcode = data["error"]?["subcode"]?.lenientInt
        errorMessage = data["error"]?["message"]?.stringValue
    }
}

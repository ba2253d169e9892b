import Foundation
import Sesame

/// The device login of an OpenID provider (RFC 8628): the engine's, asking for the login's scopes
/// (or the configured ones) with `openid` first, the ID token checked when one comes.
public struct OIDCDeviceDialect: DeviceLoginDialect {
    /// The provider.
    public var oidc: OIDCProvider
    private var engine: any DeviceLoginDialect

    /// Creates a dialect.
    ///
    /// - Throws: `AuthError` when the provider advertises no device endpoint.
    public init(oidc: OIDCProvider) throws {
        guard let engine = oidc.engine.deviceDialect else {
            throw OIDCConfigurationError.unsupported(
                "device login", endpoint: "device_authorization_endpoint", provider: oidc.id)
        }
        self.oidc = oidc
        self.engine = engine
    }

    public var provider: ProviderID { oidc.id }
    public var errorTaxonomy: any ErrorTaxonomy { oidc.taxonomy }
    public func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        try engine.startRequest(for: request)
    }
    public func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        try engine.authorization(from: response, for: request)
    }
    public func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest { try engine.pollRequest(context) }
    public func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        try await engine.readPoll(response, context: context)
    }
}

/// A browser login with an OpenID provider: the engine's authorization code grant with PKCE
/// through the core's `BrowserLoginFlow`, with a new `nonce` per login, `openid` first among the
/// scopes, the redirect's `iss` checked (RFC 9207) and the ID token validated before the token is
/// accepted.
public struct OIDCBrowserLogin: LoginUI {
    /// The provider.
    public var oidc: OIDCProvider
    /// Where the redirect comes back (a `LoopbackRedirectReceiver` on the desktop).
    public var receiver: any RedirectReceiver
    /// What shows the person the sign-in page.
    public var opener: any BrowserOpener
    /// What sends the requests.
    public var transport: any HTTPTransport

    /// Creates a login.
    public init(
        oidc: OIDCProvider, receiver: any RedirectReceiver, opener: any BrowserOpener, transport: any HTTPTransport
    ) {
        self.oidc = oidc
        self.receiver = receiver
        self.opener = opener
        self.transport = transport
    }

    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        // An OpenID provider always has an authorization endpoint.
        let dialect = oidc.engine.browserDialect(nonce: try Crypto.randomURLSafeString(byteCount: 24))!
        return try await BrowserLoginFlow(dialect: dialect, receiver: receiver, opener: opener, transport: transport)
            .logIn(request)
    }
}

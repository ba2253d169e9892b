import Foundation

/// How one provider runs a browser login: where to send the person and how to exchange the
/// code. ``OAuth2BrowserDialect`` is plain RFC 6749 with PKCE; a provider with its own
/// parameters (Facebook's `auth_type=rerequest`, say) supplies its own.
public protocol BrowserLoginDialect: Sendable {
    /// The provider.
    var provider: ProviderID { get }
    /// How the provider's errors are read.
    var errorTaxonomy: any ErrorTaxonomy { get }

    /// The authorization URL for `request`, carrying `redirectURI`, `state` and the PKCE
    /// challenge (S256).
    func authorizationURL(for request: LoginRequest, redirectURI: URL, state: String, pkce: PKCE) throws -> URL

    /// The request that exchanges `code` for a token (with the PKCE verifier).
    func tokenRequest(code: String, redirectURI: URL, pkce: PKCE, for request: LoginRequest) throws -> HTTPRequest

    /// The token in a successful (2xx) token answer.
    ///
    /// - Throws: ``AuthError`` when the answer has no usable token. Failed answers never get
    ///   here: the flow classifies them with ``errorTaxonomy``.
    func token(from response: HTTPResponse, for request: LoginRequest) async throws -> AccessToken

    /// What the redirect's `iss` must be (RFC 9207), when the provider has an issuer
    /// identifier; `nil` (the default) checks nothing.
    var authorizationResponseIssuer: AuthorizationResponseIssuer? { get }
}

extension BrowserLoginDialect {
    public var authorizationResponseIssuer: AuthorizationResponseIssuer? { nil }
}

/// A browser login by RFC 6749's authorization code grant with PKCE (RFC 7636), as any
/// standard OAuth 2.0 provider runs it.
public struct OAuth2BrowserDialect: BrowserLoginDialect {
    public var provider: ProviderID
    public var errorTaxonomy: any ErrorTaxonomy
    /// Where the person is sent.
    public var authorizationEndpoint: URL
    /// Where the code is exchanged.
    public var tokenEndpoint: URL
    /// The app's client id.
    public var clientID: String
    /// How the client authenticates the code exchange: `none` for a desktop app, normally.
    public var clientAuthentication: ClientAuthentication
    /// How scopes are joined: a space per RFC 6749; Facebook uses a comma.
    public var scopeSeparator: String
    /// Added to every authorization URL, in order.
    public var extraAuthorizationParameters: [(String, String)]
    /// The wall clock, for expiry dates.
    public var now: @Sendable () -> Date

    /// Creates a dialect.
    public init(
        provider: ProviderID, errorTaxonomy: any ErrorTaxonomy, authorizationEndpoint: URL, tokenEndpoint: URL,
        clientID: String, clientAuthentication: ClientAuthentication = .none, scopeSeparator: String = " ",
        extraAuthorizationParameters: [(String, String)] = [], now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.errorTaxonomy = errorTaxonomy
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.scopeSeparator = scopeSeparator
        self.extraAuthorizationParameters = extraAuthorizationParameters
        self.now = now
    }

    public func authorizationURL(for request: LoginRequest, redirectURI: URL, state: String, pkce: PKCE) -> URL {
        OAuth.authorizationURL(
            endpoint: authorizationEndpoint, clientID: clientID, redirectURI: redirectURI,
            scopes: request.permissions.map(\.name), state: state, pkce: pkce, scopeSeparator: scopeSeparator,
            extraParameters: extraAuthorizationParameters)
    }

    public func tokenRequest(
        code: String, redirectURI: URL, pkce: PKCE, for request: LoginRequest
    ) throws -> HTTPRequest {
        try clientAuthentication.formRequest(
            tokenEndpoint,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI.absoluteString),
                ("code_verifier", pkce.verifier),
            ], clientID: clientID)
    }

    public func token(from response: HTTPResponse, for request: LoginRequest) throws -> AccessToken {
        guard let answer = OAuthTokenResponse(json: response.json) else {
            throw AuthError.unreadableLoginAnswer("token answer (it has no access_token)", provider: provider)
        }
        return AccessToken(answer, for: request, now: now())
    }
}

/// A login in the system browser with a loopback redirect (RFC 8252): PKCE S256, a random
/// `state`, the code exchanged through the transport.
///
/// ```swift
/// let login = BrowserLoginFlow(
///     dialect: OAuth2BrowserDialect(provider: "example", errorTaxonomy: taxonomy,
///         authorizationEndpoint: authorize, tokenEndpoint: token, clientID: "my-app"),
///     receiver: LoopbackRedirectReceiver(), opener: SystemBrowserOpener(), transport: transport)
/// try await session.open(permissions: [.read("email")], allowLoginUI: true, loginUI: login)
/// ```
///
/// The person declining is ``ErrorCategory/userCancelled`` (through the provider's
/// ``ErrorTaxonomy/classifyLoginError(_:)``); a redirect with the wrong `state` is refused; no
/// answer in time is ``AuthError/loginTimedOut(after:provider:)``.
public struct BrowserLoginFlow: LoginUI {
    /// The provider's side of the flow.
    public var dialect: any BrowserLoginDialect
    /// Where the redirect comes back.
    public var receiver: any RedirectReceiver
    /// What shows the person the authorization page.
    public var opener: any BrowserOpener
    /// What sends the token request.
    public var transport: any HTTPTransport

    /// Creates a flow.
    public init(
        dialect: any BrowserLoginDialect, receiver: any RedirectReceiver, opener: any BrowserOpener,
        transport: any HTTPTransport
    ) {
        self.dialect = dialect
        self.receiver = receiver
        self.opener = opener
        self.transport = transport
    }

    /// - Throws: ``AuthError`` for a denied, forged, timed-out or failed login
    ///   (``AuthError/loginFailedReason`` says which); `CancellationError` when the task is
    ///   cancelled.
    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        let state = try OAuth.makeState()
        let pkce = try PKCE.generate()
        let dialect = dialect
        let opener = opener
        let transport = transport
        return try await receiver.receiveRedirect(
            expectedState: state, expectedIssuer: dialect.authorizationResponseIssuer, provider: dialect.provider,
            open: { redirectURI in
                let url = try dialect.authorizationURL(for: request, redirectURI: redirectURI, state: state, pkce: pkce)
                try await opener.open(url)
            },
            complete: { outcome, redirectURI in
                switch outcome {
                case .error(let error):
                    throw dialect.errorTaxonomy.classifyLoginError(error)
                case .code(let code):
                    let exchange = try dialect.tokenRequest(
                        code: code, redirectURI: redirectURI, pkce: pkce, for: request)
                    let response = try await LoginHTTP.send(
                        exchange, through: transport, taxonomy: dialect.errorTaxonomy)
                    guard response.isSuccess else {
                        var error = dialect.errorTaxonomy.classify(response)
                        if error.loginFailedReason == nil { error.loginFailedReason = .codeExchangeFailed }
                        throw error
                    }
                    return try await dialect.token(from: response, for: request)
                }
            })
    }
}

/// Sending for the login flows and providers: transport failures become classified errors.
package enum LoginHTTP {
    package static func send(
        _ request: HTTPRequest, through transport: any HTTPTransport, taxonomy: any ErrorTaxonomy
    ) async throws -> HTTPResponse {
        do {
            return try await transport.send(request)
        } catch let error as TransportError {
            throw taxonomy.classify(error)
        }
    }
}

extension OAuth2BrowserDialect: CustomReflectable {
    /// Every field but the client's credential.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "provider": provider, "authorizationEndpoint": authorizationEndpoint, "tokenEndpoint": tokenEndpoint,
                "clientID": clientID, "clientAuthentication": clientAuthentication.method.rawValue,
                "scopeSeparator": scopeSeparator,
            ])
    }
}

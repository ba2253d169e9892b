import Foundation
import Sesame

/// The browser login of an OpenID provider: the authorization code grant with PKCE S256, a
/// fresh `nonce`, and the ID token checked before the token is accepted.
///
/// One dialect serves one login, because it carries that login's nonce; ``OIDCBrowserLogin``
/// makes a new one each time.
public struct OIDCBrowserDialect: BrowserLoginDialect {
    /// The provider.
    public var oidc: OIDCProvider
    /// The nonce this login sends and the ID token must carry back.
    public var nonce: String

    /// Creates a dialect for one login.
    public init(oidc: OIDCProvider, nonce: String) {
        self.oidc = oidc
        self.nonce = nonce
    }

    public var provider: ProviderID { oidc.id }
    public var errorTaxonomy: any ErrorTaxonomy { oidc.taxonomy }

    public func authorizationURL(for request: LoginRequest, redirectURI: URL, state: String, pkce: PKCE) -> URL {
        OAuth.authorizationURL(
            endpoint: oidc.endpoints.authorizationEndpoint, clientID: oidc.configuration.clientID,
            redirectURI: redirectURI, scopes: oidc.scopes(for: request), state: state, pkce: pkce,
            extraParameters: [("nonce", nonce)] + oidc.configuration.extraAuthorizationParameters)
    }

    public func tokenRequest(
        code: String, redirectURI: URL, pkce: PKCE, for request: LoginRequest
    ) throws -> HTTPRequest {
        try oidc.formRequest(
            oidc.endpoints.tokenEndpoint,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI.absoluteString),
                ("code_verifier", pkce.verifier),
            ])
    }

    public func token(from response: HTTPResponse, for request: LoginRequest) async throws -> AccessToken {
        try await oidc.acceptToken(response, for: request, nonce: nonce, requireIDToken: true)
    }

    /// RFC 9207: the redirect's `iss`, when present, must be the issuer; when discovery says
    /// `authorization_response_iss_parameter_supported`, it must be present.
    public var authorizationResponseIssuer: AuthorizationResponseIssuer? {
        AuthorizationResponseIssuer(
            issuer: oidc.endpoints.issuer, required: oidc.endpoints.authorizationResponseIssParameterSupported)
    }
}

/// The device login of an OpenID provider (RFC 8628), with the ID token checked when one comes.
public struct OIDCDeviceDialect: DeviceLoginDialect {
    /// The provider.
    public var oidc: OIDCProvider
    private var standard: RFC8628DeviceDialect

    /// Creates a dialect.
    ///
    /// - Throws: `AuthError` when the provider advertises no device endpoint.
    public init(oidc: OIDCProvider) throws {
        guard let endpoint = oidc.endpoints.deviceAuthorizationEndpoint else {
            throw OIDCConfigurationError.unsupported(
                "device login", endpoint: "device_authorization_endpoint", provider: oidc.id)
        }
        self.oidc = oidc
        self.standard = RFC8628DeviceDialect(
            provider: oidc.id, errorTaxonomy: oidc.taxonomy, deviceAuthorizationEndpoint: endpoint,
            tokenEndpoint: oidc.endpoints.tokenEndpoint, clientID: oidc.configuration.clientID,
            clientAuthentication: oidc.clientAuthentication, now: oidc.now)
    }

    public var provider: ProviderID { oidc.id }
    public var errorTaxonomy: any ErrorTaxonomy { oidc.taxonomy }

    public func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        var scoped = request
        scoped.permissions = oidc.scopes(for: request).map { Permission.read($0) }
        return try standard.startRequest(for: scoped)
    }

    public func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        try standard.authorization(from: response, for: request)
    }

    public func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest {
        try standard.pollRequest(context)
    }

    public func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        // `error` first: a 2xx answer may carry `authorization_pending` (GitHub's does).
        if response.isSuccess, OAuthErrorResponse(json: response.json) == nil {
            return .authorized(
                try await oidc.acceptToken(response, for: context.request, nonce: nil, requireIDToken: false))
        }
        return standard.readPoll(response, context: context)
    }
}

/// A browser login with an OpenID provider: a new nonce per login, the core's
/// `BrowserLoginFlow` underneath.
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
        let dialect = OIDCBrowserDialect(oidc: oidc, nonce: try Crypto.randomURLSafeString(byteCount: 24))
        return try await BrowserLoginFlow(dialect: dialect, receiver: receiver, opener: opener, transport: transport)
            .logIn(request)
    }
}

extension OIDCProvider {
    /// The `sub` the userinfo endpoint answers for `token`; `nil` without the endpoint or an
    /// answer that names one (the login then goes on without a user id, as before).
    func userInfoSubject(_ token: AccessToken) async -> String? {
        guard let endpoint = endpoints.userinfoEndpoint,
            let response = try? await LoginHTTP.send(
                HTTPRequest(
                    method: .get, url: endpoint,
                    headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]),
                through: transport, taxonomy: taxonomy),
            response.isSuccess, let subject = response.json?["sub"]?.stringValue, !subject.isEmpty
        else { return nil }
        return subject
    }

    /// The token in a successful token answer, its ID token checked.
    ///
    /// - Throws: `AuthError` for an answer without an access token, a missing ID token
    ///   when one is required, or one that fails a check (naming the check).
    func acceptToken(
        _ response: HTTPResponse, for request: LoginRequest, nonce: String?, requireIDToken: Bool,
        previous: AccessToken? = nil
    ) async throws -> AccessToken {
        guard let answer = OAuthTokenResponse(json: response.json) else {
            throw AuthError.unreadableLoginAnswer("token answer (it has no access_token)", provider: id)
        }
        var token = AccessToken(answer, for: request, now: now())
        if let idToken = answer.idToken {
            do {
                let claims = try await idTokenValidator().validate(idToken, nonce: nonce)
                if let previousSubject = previous?.userID, previousSubject != claims.subject {
                    throw IDTokenError(check: .malformed, detail: "a refreshed ID token names another subject")
                }
                token.userID = claims.subject
            } catch let error as IDTokenError {
                throw error.authError(provider: id)
            }
        } else if requireIDToken, scopes(for: request).contains("openid") {
            throw AuthError.unreadableLoginAnswer(
                "token answer (it has no id_token although the openid scope was asked for)", provider: id)
        } else if let previous {
            token.idToken = previous.idToken
            token.userID = previous.userID
        } else {
            // A login answered without an ID token (django-oauth-toolkit's device grant): who it
            // is comes from userinfo, whose `sub` is always there (Core §5.3.2).
            token.userID = await userInfoSubject(token)
        }
        if token.refreshToken == nil {
            // RFC 6749 §6: a refresh answer without a refresh token leaves the old one (and its expiry) in use.
            token.refreshToken = previous?.refreshToken
            token.refreshTokenExpirationDate = previous?.refreshTokenExpirationDate
        }
        return token
    }
}

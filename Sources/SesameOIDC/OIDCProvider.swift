import Foundation
import Sesame

extension ProviderID {
    /// A generic OpenID Connect provider. Several issuers side by side use their own ids
    /// (`work`, `gitlab`) through ``OIDCConfiguration/providerID``.
    public static let oidc: ProviderID = "oidc"
}

/// The endpoints of an OpenID provider: read from its discovery document or given one by one.
public struct OIDCEndpoints: Sendable, Hashable {
    /// `issuer`: what ID tokens' `iss` must equal.
    public var issuer: String
    /// Where the person is sent to sign in.
    public var authorizationEndpoint: URL
    /// Where codes, refresh tokens and device codes are exchanged.
    public var tokenEndpoint: URL
    /// The ID tokens' signing keys.
    public var jwksURI: URL?
    /// The person's claims, with an access token.
    public var userinfoEndpoint: URL?
    /// RFC 7009 revocation, when the provider has it.
    public var revocationEndpoint: URL?
    /// RFC 8628 device authorization, when the provider has it.
    public var deviceAuthorizationEndpoint: URL?
    /// Scopes the provider says it supports, when it says.
    public var scopesSupported: [String]?
    /// Whether every authorization response carries `iss` (RFC 9207
    /// `authorization_response_iss_parameter_supported`); a response without it is then refused.
    public var authorizationResponseIssParameterSupported: Bool
    /// `token_endpoint_auth_methods_supported`, when the provider says; `nil` means
    /// `client_secret_basic` only (OpenID Connect Discovery §3).
    public var tokenEndpointAuthMethodsSupported: [String]?

    /// Creates endpoints.
    public init(
        issuer: String, authorizationEndpoint: URL, tokenEndpoint: URL, jwksURI: URL? = nil,
        userinfoEndpoint: URL? = nil, revocationEndpoint: URL? = nil, deviceAuthorizationEndpoint: URL? = nil,
        scopesSupported: [String]? = nil, authorizationResponseIssParameterSupported: Bool = false,
        tokenEndpointAuthMethodsSupported: [String]? = nil
    ) {
        self.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
        self.userinfoEndpoint = userinfoEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.scopesSupported = scopesSupported
        self.authorizationResponseIssParameterSupported = authorizationResponseIssParameterSupported
    }

    /// These endpoints as a discovery document (OpenID Connect Discovery 1.0 §3): what
    /// ``init(discoveryDocument:provider:)`` reads back as the same endpoints. For keeping a
    /// discovered provider's endpoints (the `sesame` command does, for a day, so that using a
    /// login needs no network).
    public var discoveryDocument: JSONValue {
        var members: [String: JSONValue] = [
            "issuer": .string(issuer), "authorization_endpoint": .string(authorizationEndpoint.absoluteString),
            "token_endpoint": .string(tokenEndpoint.absoluteString),
            "authorization_response_iss_parameter_supported": .bool(authorizationResponseIssParameterSupported),
        ]
        let optional: [(String, URL?)] = [
            ("jwks_uri", jwksURI), ("userinfo_endpoint", userinfoEndpoint), ("revocation_endpoint", revocationEndpoint),
            ("device_authorization_endpoint", deviceAuthorizationEndpoint),
        ]
        for case (let name, let url?) in optional { members[name] = .string(url.absoluteString) }
        if let scopesSupported { members["scopes_supported"] = .array(scopesSupported.map { .string($0) }) }
        if let tokenEndpointAuthMethodsSupported {
            members["token_endpoint_auth_methods_supported"] = .array(
                tokenEndpointAuthMethodsSupported.map { .string($0) })
        }
        return .object(members)
    }

    /// Reads a discovery document (OpenID Connect Discovery 1.0 §3).
    ///
    /// - Throws: `AuthError` naming the missing or unusable member.
    public init(discoveryDocument json: JSONValue?, provider: ProviderID) throws {
        func url(_ name: String, required: Bool) throws -> URL? {
            guard let text = json?[name]?.stringValue else {
                if required { throw OIDCConfigurationError.discovery("it has no \(name)", provider: provider) }
                return nil
            }
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["https", "http"].contains(scheme)
            else {
                throw OIDCConfigurationError.discovery(
                    "its \(name) '\(text)' is not an http(s) URL", provider: provider)
            }
            return url
        }
        guard let issuer = json?["issuer"]?.stringValue, !issuer.isEmpty else {
            throw OIDCConfigurationError.discovery("it has no issuer", provider: provider)
        }
        self.init(
            issuer: issuer, authorizationEndpoint: try url("authorization_endpoint", required: true)!,
            tokenEndpoint: try url("token_endpoint", required: true)!, jwksURI: try url("jwks_uri", required: false),
            userinfoEndpoint: try url("userinfo_endpoint", required: false),
            revocationEndpoint: try url("revocation_endpoint", required: false),
            deviceAuthorizationEndpoint: try url("device_authorization_endpoint", required: false),
            scopesSupported: json?["scopes_supported"]?.arrayValue?.compactMap(\.stringValue),
            authorizationResponseIssParameterSupported:
                json?["authorization_response_iss_parameter_supported"]?.boolValue ?? false,
            tokenEndpointAuthMethodsSupported: json?["token_endpoint_auth_methods_supported"]?.arrayValue?.compactMap(
                \.stringValue))
    }

    /// Where the discovery document of `issuer` is: `issuer/.well-known/openid-configuration`,
    /// with one trailing slash of the issuer left out (Discovery §4.1); `nil` when `issuer` is not
    /// a URL with a host.
    public static func discoveryURL(issuer: String) -> URL? {
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        guard let url = URL(string: trimmed + "/.well-known/openid-configuration"), url.host != nil else { return nil }
        return url
    }

    /// Fetches `issuer/.well-known/openid-configuration` and checks that its `issuer` is `issuer`
    /// exactly (Discovery §4.3), so one provider cannot speak for another.
    ///
    /// The issuer and every endpoint must be `https`, or plain `http` to a loopback address or to
    /// a host in `allowingInsecureHosts` (`EndpointSecurity`).
    ///
    /// - Throws: `AuthError` when the document cannot be fetched or read, names another issuer, or
    ///   has an endpoint that is not https; `CancellationError` when the task is cancelled.
    public static func discover(
        issuer: String, transport: any HTTPTransport, provider: ProviderID = .oidc,
        allowingInsecureHosts: Set<String> = []
    ) async throws -> OIDCEndpoints {
        guard let url = discoveryURL(issuer: issuer) else {
            throw OIDCConfigurationError.discovery("the issuer '\(issuer)' is not a URL", provider: provider)
        }
        try EndpointSecurity.check(
            url, role: "The OpenID issuer", provider: provider, allowingInsecureHosts: allowingInsecureHosts)
        let taxonomy = OIDCErrorTaxonomy.openID(provider: provider)
        let response = try await LoginHTTP.send(
            HTTPRequest(url: url, headers: ["Accept": "application/json"]), through: transport, taxonomy: taxonomy)
        // A 4xx is a wrong issuer (the site root, a path left out) far more often than anything the
        // body could say: name the address that failed. A 5xx or 429 is the provider's trouble.
        if (400..<500).contains(response.status), response.status != 429 {
            throw OIDCConfigurationError.discovery(
                "\(url.absoluteString) answered HTTP \(response.status), so '\(issuer)' is not the issuer (the issuer is "
                    + "the address before /.well-known/openid-configuration)", provider: provider)
        }
        guard response.isSuccess else { throw taxonomy.classify(response) }
        var endpoints = try OIDCEndpoints(discoveryDocument: response.json, provider: provider)
        // A multi-tenant Microsoft authority answers a template; ID tokens are checked against it.
        guard endpoints.issuer == issuer || IDTokenValidator.issuerTemplate(endpoints.issuer, matches: issuer) else {
            throw OIDCConfigurationError.discovery(
                "its issuer is '\(endpoints.issuer)', not '\(issuer)' as configured", provider: provider)
        }
        if endpoints.revocationEndpoint == nil {
            let metadata = await authorizationServerMetadata(issuer: issuer, transport: transport)
            endpoints.revocationEndpoint = metadata?.url("revocation_endpoint")
            if endpoints.deviceAuthorizationEndpoint == nil {
                endpoints.deviceAuthorizationEndpoint = metadata?.url("device_authorization_endpoint")
            }
        }
        try endpoints.checkSecurity(provider: provider, allowingInsecureHosts: allowingInsecureHosts)
        return endpoints
    }

    /// The issuer's OAuth 2.0 authorization server metadata (RFC 8414), read for what its OpenID
    /// discovery document leaves out: some issuers list their revocation endpoint only there
    /// (django-oauth-toolkit does). Asked at `host/.well-known/oauth-authorization-server/path`
    /// (RFC 8414 §3.1), then, for an issuer with a path, at `issuer/.well-known/...` as many
    /// deployments serve it; only a document naming `issuer` exactly counts (§3.3). `nil` when
    /// neither answers with one: the OpenID document is then all there is.
    static func authorizationServerMetadata(issuer: String, transport: any HTTPTransport) async -> JSONValue? {
        guard let components = URLComponents(string: issuer), let host = components.host else { return nil }
        var root = components
        root.path = ""
        root.query = nil
        let path = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        let wellKnown = "/.well-known/oauth-authorization-server"
        var candidates = [(root.string ?? "") + wellKnown + path]
        if !path.isEmpty { candidates.append((root.string ?? "") + path + wellKnown) }
        for candidate in candidates {
            guard let url = URL(string: candidate), url.host == host,
                let response = try? await transport.send(
                    HTTPRequest(url: url, headers: ["Accept": "application/json"])),
                response.isSuccess, let document = response.json, document["issuer"]?.stringValue == issuer
            else { continue }
            return document
        }
        return nil
    }

    /// Checks every endpoint with `EndpointSecurity`: `https`, or plain `http` only to a loopback
    /// address or a host in `allowingInsecureHosts`.
    ///
    /// - Throws: `AuthError` (`invalid`) naming the first endpoint refused.
    public func checkSecurity(provider: ProviderID, allowingInsecureHosts: Set<String> = []) throws {
        let named: [(String, URL?)] = [
            ("authorization endpoint", authorizationEndpoint), ("token endpoint", tokenEndpoint),
            ("JWKS URI", jwksURI), ("userinfo endpoint", userinfoEndpoint),
            ("revocation endpoint", revocationEndpoint), ("device authorization endpoint", deviceAuthorizationEndpoint),
        ]
        for case (let name, let url?) in named {
            try EndpointSecurity.check(
                url, role: "The OpenID provider's \(name)", provider: provider,
                allowingInsecureHosts: allowingInsecureHosts)
        }
    }
}

extension JSONValue {
    /// The member `name` as an http(s) URL; `nil` when it is missing or not one.
    fileprivate func url(_ name: String) -> URL? {
        guard let text = self[name]?.stringValue, let url = URL(string: text),
            let scheme = url.scheme?.lowercased(), ["https", "http"].contains(scheme)
        else { return nil }
        return url
    }
}

/// A configuration problem: a discovery document that cannot be used, a flow the provider lacks.
public enum OIDCConfigurationError {
    /// The discovery document at the issuer is missing or wrong.
    public static func discovery(_ detail: String, provider: ProviderID) -> AuthError {
        AuthError(
            category: .invalid,
            message: "The OpenID discovery document of '\(provider)' cannot be used: \(detail). Check the issuer URL.",
            recoveryTactic: .showMessage, provider: provider)
    }

    /// The provider does not advertise an endpoint a feature needs.
    public static func unsupported(_ feature: String, endpoint: String, provider: ProviderID) -> AuthError {
        AuthError(
            category: .invalid,
            message: "'\(provider)' does not support \(feature): its configuration has no \(endpoint).",
            recoveryTactic: .showMessage, provider: provider)
    }
}

/// How a client proves who it is at the token, device authorization and revocation endpoints:
/// the core's `ClientAuthenticationMethod`, under the name OpenID code has used.
public typealias OIDCClientAuthMethod = ClientAuthenticationMethod

/// How to reach an OpenID provider as one client.
public struct OIDCConfiguration: Sendable {
    /// The id the provider is known by here (`oidc`, or a name such as `work`).
    public var providerID: ProviderID
    /// A human name.
    public var displayName: String
    /// The issuer URL; endpoints are discovered from it unless ``endpoints`` is set.
    public var issuer: String
    /// Explicit endpoints, for providers without discovery.
    public var endpoints: OIDCEndpoints?
    /// The client id.
    public var clientID: String
    /// The client secret, for confidential clients and providers that give desktop clients one
    /// (Google's "Desktop app" clients do).
    public var clientSecret: ClientSecret?
    /// The client's private key, for `private_key_jwt`: when set, and ``clientAuthMethod`` is
    /// `nil` or `private_key_jwt`, every token-endpoint request carries an assertion it signs
    /// instead of a secret.
    public var clientAssertionSigner: ClientAssertionSigner?
    /// How to authenticate the client; `nil` chooses from discovery
    /// (`ClientAuthenticationMethod.chosen(hasSecret:supported:)`).
    public var clientAuthMethod: OIDCClientAuthMethod?
    /// Scopes asked for when a login names none; `openid` is always added.
    public var scopes: [String]
    /// Added to every authorization URL, in order (`prompt`, `login_hint`, `acr_values`...).
    public var extraAuthorizationParameters: [(String, String)]
    /// How far clocks may disagree when checking ID tokens, in seconds.
    public var clockLeeway: TimeInterval
    /// Host names the issuer and its endpoints may use over plain `http`: the user's explicit,
    /// by-name opt-in. Empty by default: `https` only, except to loopback addresses, as
    /// `EndpointSecurity` rules (RFC 9700).
    public var allowedInsecureHosts: Set<String>

    /// Creates a configuration.
    public init(
        providerID: ProviderID = .oidc, displayName: String? = nil, issuer: String, endpoints: OIDCEndpoints? = nil,
        clientID: String, clientSecret: ClientSecret? = nil, scopes: [String] = ["openid", "profile", "email"],
        extraAuthorizationParameters: [(String, String)] = [], clockLeeway: TimeInterval = 60,
        allowedInsecureHosts: Set<String> = []
    ) {
        self.allowedInsecureHosts = allowedInsecureHosts
        self.providerID = providerID
        self.displayName = displayName ?? (providerID == .oidc ? "OpenID Connect" : providerID.rawValue)
        self.issuer = issuer
        self.endpoints = endpoints
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientAuthMethod = nil
        self.clientAssertionSigner = nil
        self.scopes = scopes
        self.extraAuthorizationParameters = extraAuthorizationParameters
        self.clockLeeway = clockLeeway
    }
}

/// An OpenID Connect provider: one issuer, one client, run by the core's generic OAuth 2.0
/// engine (``engine``, an `OAuth2Provider` described from the discovery document) with what
/// OpenID adds: the ID token checked on every token answer, the nonce, RFC 9207's `iss`, the
/// issuer on the stored login, userinfo.
///
/// ```swift
/// let provider = try await OIDCProvider.discover(
///     OIDCConfiguration(issuer: "https://accounts.example.com", clientID: "desktop-app"),
///     transport: CurlTransport())
/// let session = OIDCSession(provider: provider, transport: transport, store: store, loginUI: ...)
/// ```
///
/// Discovery happens once, in ``discover(_:transport:now:)``; the JWKS is fetched on the first
/// ID token and kept in ``keys``.
public struct OIDCProvider: Sendable {
    /// The configuration.
    public let configuration: OIDCConfiguration
    /// The endpoints in use.
    public let endpoints: OIDCEndpoints
    /// The error mapping.
    public let taxonomy: OIDCErrorTaxonomy
    /// The issuer's signing keys, shared by every copy of this provider.
    public let keys: JWKSCache?
    /// The wall clock.
    public let now: @Sendable () -> Date
    /// The generic OAuth 2.0 engine on this issuer's endpoints: logins, refresh, revocation and
    /// userinfo's account, every token answer checked as OpenID says (its `checkToken` hook).
    public private(set) var engine: OAuth2Provider

    /// A provider with known endpoints.
    ///
    /// - Throws: `AuthError` (`invalid`) for an endpoint that is not `https` (`EndpointSecurity`)
    ///   or an empty client id.
    public init(
        configuration: OIDCConfiguration, endpoints: OIDCEndpoints, transport: any HTTPTransport,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.configuration = configuration
        self.endpoints = endpoints
        self.now = now
        var taxonomy = OIDCErrorTaxonomy.openID(provider: configuration.providerID, now: now)
        taxonomy.clientAuthenticationMethod = Self.clientAuthMethod(configuration, endpoints)
        self.taxonomy = taxonomy
        self.keys = endpoints.jwksURI.map { JWKSCache(url: $0, transport: transport, taxonomy: taxonomy, now: now) }
        var described = OAuth2Description(
            id: configuration.providerID, displayName: configuration.displayName,
            endpoints: OAuth2Endpoints(
                authorization: endpoints.authorizationEndpoint, token: endpoints.tokenEndpoint,
                deviceAuthorization: endpoints.deviceAuthorizationEndpoint, revocation: endpoints.revocationEndpoint,
                identity: endpoints.userinfoEndpoint),
            clientAuthenticationMethod: Self.clientAuthMethod(configuration, endpoints),
            authorizationParameters: configuration.extraAuthorizationParameters,
            defaultScopes: configuration.scopes, identity: .identityRequest(),
            errorRows: OAuth2ErrorTaxonomy.openIDTable)
        described.requiredScopes = ["openid"]
        described.refreshRepeatsScopes = true
        described.authorizationResponseIssuer = AuthorizationResponseIssuer(
            issuer: endpoints.issuer, required: endpoints.authorizationResponseIssParameterSupported)
        engine = try OAuth2Provider(
            described, clientID: configuration.clientID,
            clientAuthentication: Self.authentication(configuration, endpoints),
            transport: transport, allowingInsecureHosts: configuration.allowedInsecureHosts, now: now)
        engine.taxonomy = taxonomy
        engine.checkToken = { [self] issued in
            // A token the person supplied has no answer to check; OpenID logins never take one.
            guard let answer = issued.answer else { return issued.token }
            return try await checkToken(issued.token, answer: answer, nonce: issued.nonce, renewed: issued.renewing)
        }
    }

    /// A provider whose endpoints come from ``OIDCConfiguration/endpoints`` or else from discovery.
    ///
    /// - Throws: `AuthError` when the document cannot be fetched or read, names another issuer, or
    ///   has an endpoint that is not https; `CancellationError` when the task is cancelled.
    public static func discover(
        _ configuration: OIDCConfiguration, transport: any HTTPTransport,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> OIDCProvider {
        let endpoints =
            if let explicit = configuration.endpoints {
                explicit
            } else {
                try await OIDCEndpoints.discover(
                    issuer: configuration.issuer, transport: transport, provider: configuration.providerID,
                    allowingInsecureHosts: configuration.allowedInsecureHosts)
            }
        try endpoints.checkSecurity(
            provider: configuration.providerID, allowingInsecureHosts: configuration.allowedInsecureHosts)
        return try OIDCProvider(configuration: configuration, endpoints: endpoints, transport: transport, now: now)
    }

    // MARK: Identity

    /// The provider id logins are stored under (`oidc`, or a configured name).
    public var id: ProviderID { configuration.providerID }
    /// A human name for the issuer.
    public var displayName: String { configuration.displayName }
    /// The login flows the issuer offers: the browser, and device login when it publishes a
    /// device authorization endpoint.
    public var supportedLoginFlows: Set<LoginFlowKind> { engine.described.supportedLoginFlows }
    /// How the issuer's answers are classified.
    public var errorTaxonomy: any ErrorTaxonomy { taxonomy }

    /// The validator for ID tokens from this issuer to this client.
    ///
    /// - Throws: `AuthError` when the provider has no JWKS.
    public func idTokenValidator() throws -> IDTokenValidator {
        guard let keys else {
            throw OIDCConfigurationError.unsupported("ID token checks", endpoint: "jwks_uri", provider: id)
        }
        return IDTokenValidator(
            issuer: endpoints.issuer, clientID: configuration.clientID, keys: keys, leeway: configuration.clockLeeway,
            now: now)
    }

    /// How this client authenticates: the configured method, or the one chosen from discovery.
    public var clientAuthMethod: OIDCClientAuthMethod { Self.clientAuthMethod(configuration, endpoints) }

    /// The configured method; else `private_key_jwt` with a key, else the one chosen from
    /// discovery for the secret, if any.
    static func clientAuthMethod(_ configuration: OIDCConfiguration, _ endpoints: OIDCEndpoints) -> OIDCClientAuthMethod
    {
        if let method = configuration.clientAuthMethod { return method }
        if configuration.clientAssertionSigner != nil { return .privateKeyJWT }
        return OIDCClientAuthMethod.chosen(
            hasSecret: configuration.clientSecret != nil, supported: endpoints.tokenEndpointAuthMethodsSupported)
    }

    /// How this client authenticates every request to the token endpoint and its siblings.
    public var clientAuthentication: ClientAuthentication { engine.clientAuthentication }

    /// The configured method with its credential: the signed assertion for `private_key_jwt`.
    static func authentication(_ configuration: OIDCConfiguration, _ endpoints: OIDCEndpoints) -> ClientAuthentication {
        let method = clientAuthMethod(configuration, endpoints)
        if method == .privateKeyJWT, let signer = configuration.clientAssertionSigner { return .privateKeyJWT(signer) }
        return ClientAuthentication(method, secret: configuration.clientSecret)
    }

    /// What OpenID adds to every token answer the engine reads: its ID token validated (signature,
    /// `iss`, `aud`, `exp`, the browser login's `nonce`, the same subject on a refresh), and
    /// required from a browser login; a refresh answered without one keeps the login's; a device
    /// login without one (django-oauth-toolkit's) takes its subject from userinfo, whose `sub` is
    /// always there (Core §5.3.2).
    ///
    /// - Throws: `AuthError` for a missing ID token or one that fails a check (naming the check).
    func checkToken(
        _ token: AccessToken, answer: OAuthTokenResponse, nonce: String?, renewed previous: AccessToken?
    ) async throws -> AccessToken {
        var token = token
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
        } else if nonce != nil {
            throw AuthError.unreadableLoginAnswer(
                "token answer (it has no id_token although the openid scope was asked for)", provider: id)
        } else if let previous {
            token.idToken = previous.idToken
            token.userID = previous.userID
        } else {
            token.userID = try? await engine.account(of: token)?.id
        }
        return token
    }
}

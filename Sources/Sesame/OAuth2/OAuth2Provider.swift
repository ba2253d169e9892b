import Foundation

/// The generic OAuth 2.0 provider: one ``OAuth2Description`` and one client. Device login
/// (RFC 8628), the browser with PKCE (RFC 7636, RFC 8252), renewal by the refresh grant
/// (RFC 6749 §6) under the core's single-flight ``Session``, revocation (RFC 7009) and the
/// account's identity all come from the description; every request to the token endpoint and its
/// siblings goes through one ``ClientAuthentication``.
///
/// ```swift
/// let provider = try OAuth2Provider(dropbox, clientID: "my-app", transport: CurlTransport())
/// let session = OAuth2Session(provider: provider, store: store,
///     loginUI: provider.login(BrowserLoginFlow(dialect: provider.browserDialect!, receiver: receiver,
///                                              opener: SystemBrowserOpener(), transport: provider.transport)))
/// try await session.open(allowLoginUI: true)
/// ```
///
/// Creating one checks its endpoints (`https`, or plain `http` to loopback addresses and hosts
/// the user named) and has no other effect.
public struct OAuth2Provider: Sendable {
    /// What the provider is.
    public let described: OAuth2Description
    /// The client id, which logins are stored under as their app id.
    public let clientID: String
    /// How the client authenticates at the token endpoint, for every grant and revocation.
    public let clientAuthentication: ClientAuthentication
    /// What sends the requests; a session may send through its own.
    public var transport: any HTTPTransport
    /// How the provider's errors are classified: its rows, then the base rows. A provider that
    /// names itself otherwise in messages, or knows more of its client, sets its own.
    public var taxonomy: OAuth2ErrorTaxonomy
    /// The wall clock, for expiry dates.
    public let now: @Sendable () -> Date
    /// The provider's one hook on every token before it is used: each successful answer of the
    /// token endpoint (the code, device and refresh grants) and a token the person supplies
    /// (``OAuth2TokenLogin``). OpenID Connect validates the ID token here; GitHub reads whose token
    /// it is and its scopes with `GET /user`. `nil`: the token is used as read. An `AuthError` it
    /// throws for a refresh answer that rotated the refresh token keeps the new refresh token
    /// (``RenewalKeepingRotation``).
    public var checkToken: (@Sendable (IssuedToken) async throws -> AccessToken)?

    /// Creates the provider.
    ///
    /// - Parameters:
    ///   - described: the provider's description.
    ///   - clientID: the registered client id.
    ///   - clientAuthentication: how the client authenticates; by default the description's
    ///     method with `clientSecret`, or `none` without one.
    ///   - clientSecret: the client secret, when the client has one.
    ///   - transport: what sends the requests.
    ///   - allowingInsecureHosts: hosts plain `http` is allowed to besides loopback addresses.
    ///   - now: the wall clock.
    /// - Throws: `AuthError` (`invalid`) for an endpoint that is not `https` or an empty client id.
    public init(
        _ described: OAuth2Description, clientID: String, clientSecret: ClientSecret? = nil,
        clientAuthentication: ClientAuthentication? = nil, transport: any HTTPTransport,
        allowingInsecureHosts: Set<String> = [], now: @escaping @Sendable () -> Date = { Date() }
    ) throws(AuthError) {
        for (name, url) in described.endpoints.named {
            try EndpointSecurity.check(
                url, role: "\(described.displayName)'s \(name)", provider: described.id,
                allowingInsecureHosts: allowingInsecureHosts)
        }
        guard !clientID.isEmpty else {
            throw AuthError(
                category: .invalid, message: "The \(described.displayName) client id is empty.", provider: described.id)
        }
        self.init(
            trusted: described, clientID: clientID,
            clientAuthentication: clientAuthentication ?? described.clientAuthentication(secret: clientSecret),
            transport: transport, now: now)
    }

    /// The provider without the checks, for a provider module that checked its endpoints when its
    /// host was named (GitHub's) and may hold no client id yet (a login with an existing token).
    package init(
        trusted described: OAuth2Description, clientID: String, clientAuthentication: ClientAuthentication,
        transport: any HTTPTransport, now: @escaping @Sendable () -> Date
    ) {
        self.described = described
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.transport = transport
        self.taxonomy = OAuth2ErrorTaxonomy(described, now: now)
        self.now = now
    }

    /// The provider id logins are stored under.
    public var id: ProviderID { described.id }

    /// What classifies the provider's errors: the description's ``OAuth2Description/classifier``,
    /// else ``taxonomy``.
    public var errorTaxonomy: any ErrorTaxonomy { described.classifier ?? taxonomy }

    /// The browser login (authorization code with PKCE), when the provider has an authorization
    /// endpoint; the account is read from the token answer when the description says so.
    public var browserDialect: (any BrowserLoginDialect)? { browserDialect(nonce: nil) }

    /// The browser login sending `nonce` (OpenID Connect) first among the authorization parameters
    /// and handing it to ``checkToken``; one dialect serves one login.
    public func browserDialect(nonce: String?) -> (any BrowserLoginDialect)? {
        described.endpoints.authorization.map { endpoint in
            OAuth2EngineBrowserDialect(
                engine: self, nonce: nonce,
                standard: OAuth2BrowserDialect(
                    provider: id, errorTaxonomy: errorTaxonomy, authorizationEndpoint: endpoint,
                    tokenEndpoint: described.endpoints.token, clientID: clientID,
                    clientAuthentication: clientAuthentication, scopeSeparator: described.scopeSeparator,
                    extraAuthorizationParameters: (nonce.map { [("nonce", $0)] } ?? [])
                        + described.authorizationParameters,
                    now: now))
        }
    }

    /// The device login (RFC 8628), when the provider has a device authorization endpoint.
    public var deviceDialect: (any DeviceLoginDialect)? {
        described.endpoints.deviceAuthorization.map { endpoint in
            OAuth2EngineDeviceDialect(
                engine: self,
                standard: RFC8628DeviceDialect(
                    provider: id, errorTaxonomy: errorTaxonomy, deviceAuthorizationEndpoint: endpoint,
                    tokenEndpoint: described.endpoints.token, clientID: clientID,
                    clientAuthentication: described.deviceLoginIsPublic ? .none : clientAuthentication,
                    scopeSeparator: described.scopeSeparator, now: now))
        }
    }

    /// `flow`, followed by the identity request when the description reads the account that way,
    /// so that the stored login carries the account's id.
    public func login(_ flow: any LoginUI) -> OAuth2Login { OAuth2Login(flow: flow, provider: self) }

    /// The refresh grant as the core's renewer: the core decides when, under its lock, once for
    /// every waiter.
    public var renewer: TokenRenewer { .refreshToken(maximumLeeway: 60) { [self] in try await refresh($0) } }

    /// The refresh token grant (RFC 6749 §6). An answer without a refresh token keeps the one
    /// sent and its expiry (a provider that does not rotate, such as Dropbox; RFC 6749 §6 allows
    /// any provider to); a rotated one replaces it. The answer goes through ``checkToken``.
    /// Nothing is saved here.
    ///
    /// - Throws: `AuthError`: a refused refresh token (`invalid_grant`) is
    ///   `authenticationReopenSession`, which the core records on the login.
    public func refresh(_ current: AccessToken) async throws -> AccessToken {
        guard let refreshToken = current.refreshToken else {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "This \(described.displayName) login has no refresh token. Log in again.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: id)
        }
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if described.refreshRepeatsScopes, !current.permissions.granted.isEmpty {
            form.append(("scope", current.permissions.granted.sorted().joined(separator: described.scopeSeparator)))
        }
        let response = try await send(
            clientAuthentication.formRequest(described.endpoints.token, form, clientID: clientID))
        let answer = try tokenAnswer(response, what: "refresh answer")
        let request = LoginRequest(
            provider: id, appID: current.appID, permissions: current.permissions.granted.sorted().map { .read($0) },
            currentToken: current)
        var renewed = AccessToken(answer, for: request, now: now())
        if renewed.refreshToken == nil {
            renewed.refreshToken = refreshToken
            renewed.refreshTokenExpirationDate = current.refreshTokenExpirationDate
        }
        guard let checkToken else { return renewed }
        do {
            return try await checkToken(IssuedToken(renewed, answer: answer, request: request, renewing: current))
        } catch let error as AuthError {
            // The provider has rotated the refresh token already: keep the new one (it came from the
            // token endpoint itself), use nothing else of the answer, and say what was wrong.
            guard let rotated = answer.refreshToken, rotated != refreshToken else { throw error }
            var kept = current
            kept.refreshToken = rotated
            kept.refreshTokenExpirationDate = renewed.refreshTokenExpirationDate
            throw RenewalKeepingRotation(kept: kept, error: error)
        }
    }

    /// Who `token` belongs to, by the identity request; `nil` when the description reads the
    /// account some other way.
    ///
    /// - Throws: `AuthError`: a refused token is `authenticationReopenSession`.
    public func account(of token: AccessToken) async throws -> OAuth2Account? {
        guard described.identity.source == .identityRequest, let url = described.endpoints.identity else { return nil }
        let response = try await send(
            HTTPRequest(
                method: described.identity.method, url: url,
                headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]))
        guard response.isSuccess, !described.errors.isFailure(response.json) else {
            throw errorTaxonomy.classify(response)
        }
        guard let account = OAuth2Account(response.json, reading: described.identity) else {
            throw AuthError.unreadableLoginAnswer("identity answer (it has no account id)", provider: id)
        }
        return account
    }

    /// Revokes the login's refresh token, then its access token (RFC 7009); `false` when the
    /// provider has no revocation endpoint. An access token refused as `invalid_token` (HTTP 400)
    /// after its refresh token was revoked is gone, as asked: Google ends it with its grant
    /// (https://developers.google.com/identity/protocols/oauth2/native-app#tokenrevoke).
    ///
    /// - Throws: `AuthError` when the provider refuses or cannot be reached.
    @discardableResult
    public func revoke(_ token: AccessToken) async throws -> Bool {
        guard let endpoint = described.endpoints.revocation else { return false }
        if described.revokesWithBearer {
            let response = try await send(
                HTTPRequest(method: .post, url: endpoint, headers: ["Authorization": "Bearer \(token.tokenString)"]))
            guard response.isSuccess else { throw errorTaxonomy.classify(response) }
            return true
        }
        let tokens = [token.refreshToken.map { ($0, "refresh_token") }, (token.tokenString, "access_token")]
        for case let (value, hint)? in tokens {
            let response = try await send(
                clientAuthentication.formRequest(
                    endpoint, [("token", value), ("token_type_hint", hint)], clientID: clientID,
                    tokenEndpoint: described.endpoints.token))
            if hint == "access_token", token.refreshToken != nil, response.status == 400,
                response.json?["error"]?.stringValue == "invalid_token"
            {
                continue
            }
            // RFC 7009 §2.2: 200 whether or not the token was valid.
            guard response.isSuccess else { throw errorTaxonomy.classify(response) }
        }
        return true
    }

    /// The answer of a token request, or its classified error: an answer with an error code is one
    /// whatever its status (GitHub refuses a refresh with HTTP 200 and `bad_refresh_token`).
    func tokenAnswer(_ response: HTTPResponse, what: String, at path: [String] = []) throws -> OAuthTokenResponse {
        guard response.isSuccess, !described.errors.isFailure(response.json),
            described.errors.code(in: response.json) == nil
        else { throw errorTaxonomy.classify(response) }
        guard let answer = OAuthTokenResponse(json: path.isEmpty ? response.json : response.json?[path: path]) else {
            throw AuthError.unreadableLoginAnswer("\(what) (it has no access_token)", provider: id)
        }
        return answer
    }

    /// `request` as the provider is asked it: its scopes, or the default ones when it names none,
    /// after the required ones. The token is read for the request as it was.
    func asking(_ request: LoginRequest) -> LoginRequest {
        var asking = request
        let asked = request.permissions.isEmpty ? described.defaultScopes : request.permissions.map(\.name)
        asking.permissions = (described.requiredScopes + asked.filter { !described.requiredScopes.contains($0) })
            .map { .read($0) }
        return asking
    }

    /// `token` with the account id the token answer carries, when the description reads it there.
    func identified(_ token: AccessToken, answer: JSONValue?) -> AccessToken {
        guard described.identity.source == .tokenAnswer,
            let account = OAuth2Account(answer, reading: described.identity)
        else { return token }
        var token = token
        token.userID = account.id
        return token
    }

    private func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await LoginHTTP.send(request, through: transport, taxonomy: errorTaxonomy)
    }
}

/// The account a login belongs to, as the provider says.
public struct OAuth2Account: Sendable, Hashable {
    /// The stable id, kept as the token's user id.
    public var id: String
    /// The login name or e-mail, when the provider gives one.
    public var login: String?
    /// The display name, when the provider gives one.
    public var name: String?

    /// Creates an account.
    public init(id: String, login: String? = nil, name: String? = nil) {
        self.id = id
        self.login = login
        self.name = name
    }

    /// The account in `json` at the fields `identity` names; `nil` without an id.
    public init?(_ json: JSONValue?, reading identity: OAuth2Identity) {
        guard let id = json?[path: identity.id]?.identityText, !id.isEmpty else { return nil }
        self.init(
            id: id, login: identity.login.flatMap { json?[path: $0]?.identityText },
            name: identity.name.flatMap { json?[path: $0]?.identityText })
    }
}

/// A login through one of the engine's flows that then makes sure the token says whose it is: by
/// the identity request when the description reads the account that way.
public struct OAuth2Login: LoginUI {
    /// The flow (browser, device, pasted redirect).
    public var flow: any LoginUI
    /// The provider.
    public var provider: OAuth2Provider

    /// - Throws: the flow's `AuthError`; `AuthError` when the identity request refuses the token.
    public func logIn(_ request: LoginRequest) async throws -> AccessToken { try await logInIdentified(request).token }

    /// Runs the login and says who it is: the token (its user id set) and the account, when known.
    ///
    /// - Throws: the flow's `AuthError`; `AuthError` when the identity request refuses the token.
    public func logInIdentified(_ request: LoginRequest) async throws -> (token: AccessToken, account: OAuth2Account?) {
        var request = request
        if request.permissions.isEmpty { request.permissions = provider.described.defaultScopes.map { .read($0) } }
        var token = try await flow.logIn(request)
        guard let account = try await provider.account(of: token) else {
            return (token, token.userID.map { OAuth2Account(id: $0) })
        }
        token.userID = account.id
        return (token, account)
    }
}

/// A login with a token the person already has, checked before it is stored: the text must look
/// like a token (no spaces, ASCII, at most 1,024 characters), the provider must accept it (the
/// identity request and the provider's ``OAuth2Provider/checkToken``), and it must not
/// lack a scope the login asks for, when the provider says which it has.
///
/// `readToken` should take the token from standard input or the environment, never from the
/// command line (argv is visible to every user in `ps`).
public struct OAuth2TokenLogin: LoginUI {
    /// The provider.
    public var provider: OAuth2Provider
    /// Supplies the token.
    public var readToken: @Sendable () async throws -> String

    /// Creates a login.
    public init(provider: OAuth2Provider, readToken: @escaping @Sendable () async throws -> String) {
        self.provider = provider
        self.readToken = readToken
    }

    public func logIn(_ request: LoginRequest) async throws -> AccessToken { try await logInIdentified(request).token }

    /// Checks the token and says who it is for: the token (its user id set) and the account, when known.
    ///
    /// - Throws: `AuthError` (``LoginFailedReason/invalidSuppliedToken``) for a token that is
    ///   malformed, refused or lacks a scope; the provider's error when it cannot be asked.
    public func logInIdentified(_ request: LoginRequest) async throws -> (token: AccessToken, account: OAuth2Account?) {
        let text = try await readToken().trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.count <= 1024, text.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw rejected("it is empty, too long, or has spaces or non-ASCII characters in it")
        }
        var token = AccessToken(
            tokenString: text, provider: provider.id, appID: request.appID, refreshDate: provider.now())
        let account: OAuth2Account?
        do {
            account = try await provider.account(of: token)
            token.userID = account?.id
            if let checkToken = provider.checkToken {
                token = try await checkToken(IssuedToken(token, answer: nil, request: request))
            }
        } catch let error as AuthError where ![.retry, .server, .throttling].contains(error.category) {
            throw rejected(
                "\(provider.described.displayName) refused it (HTTP \(error.httpStatus.map(String.init) ?? "?"))",
                underlying: error)
        }
        let missing = token.permissions.declined.sorted()
        guard missing.isEmpty else {
            throw rejected("it lacks the scope\(missing.count == 1 ? "" : "s") \(missing.joined(separator: ", "))")
        }
        return (token, account ?? token.userID.map { OAuth2Account(id: $0) })
    }

    private func rejected(_ why: String, underlying: AuthError? = nil) -> AuthError {
        let name = provider.described.displayName
        return AuthError(
            category: .invalid,
            message: "The \(name) token you supplied was not accepted: \(why). "
                + (provider.described.newTokenAdvice ?? "Get a new token from \(name) and try again."),
            shouldNotifyUser: true, userMessage: "The \(name) token you supplied was not accepted: \(why).",
            httpStatus: underlying?.httpStatus, loginFailedReason: .invalidSuppliedToken,
            recoveryTactic: .showMessage, provider: provider.id, underlyingError: underlying)
    }
}

/// One account's session with an ``OAuth2Provider``: the core ``Session`` with the refresh grant
/// as its renewer, and logging out with revocation.
public struct OAuth2Session: ProviderSession {
    /// The provider.
    public let provider: OAuth2Provider
    /// The core session.
    public let session: Session
    /// How the person logs in, when a login is allowed.
    public let loginUI: (any LoginUI)?

    /// Creates a session; nothing is read or written until it is used.
    ///
    /// - Parameters:
    ///   - provider: the provider.
    ///   - store: where the login is kept.
    ///   - account: the name the login is stored under.
    ///   - loginUI: how the person logs in; without one the session opens only from the store.
    ///   - refreshLocking: how renewals are kept apart from other processes'.
    ///   - issuer: the issuer the login is stored under and valid at, for a provider with one
    ///     (OpenID Connect).
    ///   - renewer: how the login is renewed; the provider's refresh grant (``OAuth2Provider/renewer``)
    ///     by default.
    ///   - appID: the app id the login is stored under; the client id by default (GitHub stores
    ///     under the host name, so that a login is only sent to its host).
    public init(
        provider: OAuth2Provider, store: any CredentialStore, account: String = "default",
        loginUI: (any LoginUI)? = nil, refreshLocking: RefreshLocking = .none, issuer: String? = nil,
        renewer: TokenRenewer? = nil, appID: String? = nil
    ) {
        self.provider = provider
        self.loginUI = loginUI
        session = Session(
            provider: provider.id, issuer: issuer, appID: appID ?? provider.clientID, account: account, store: store,
            refreshLocking: refreshLocking, renewer: renewer ?? provider.renewer, now: provider.now)
    }

    /// Logs out: with `revoke`, first revokes the tokens at the provider; then deletes the stored
    /// login. The tokens revoked are the stored login's, read again first: another process may have
    /// renewed it (and rotated its refresh token) since this session read it. A revocation that
    /// fails still deletes the login here, and its error is thrown after.
    ///
    /// - Returns: whether the tokens were revoked.
    /// - Throws: `CredentialStoreError` when the login cannot be removed; then the revocation's
    ///   `AuthError`.
    @discardableResult
    public func logOut(revoke: Bool) async throws -> Bool {
        var failure: (any Error)?
        var revoked = false
        if revoke, let token = await session.tokenToRevoke() {
            do { revoked = try await provider.revoke(token) } catch { failure = error }
        }
        try await session.closeAndClearTokenInformation()
        if let failure { throw failure }
        return revoked
    }
}

/// The engine's browser dialect: the standard one, reading the account from the token answer.
struct OAuth2EngineBrowserDialect: BrowserLoginDialect {
    var engine: OAuth2Provider
    var nonce: String?
    var standard: OAuth2BrowserDialect

    var provider: ProviderID { engine.id }
    var errorTaxonomy: any ErrorTaxonomy { engine.errorTaxonomy }
    var authorizationResponseIssuer: AuthorizationResponseIssuer? { engine.described.authorizationResponseIssuer }
    func authorizationURL(for request: LoginRequest, redirectURI: URL, state: String, pkce: PKCE) -> URL {
        let url = standard.authorizationURL(
            for: engine.asking(request), redirectURI: redirectURI, state: state, pkce: pkce)
        // Slack asks a person's own scopes with user_scope.
        guard engine.described.scopeParameter != "scope",
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        components.queryItems = components.queryItems?.map {
            $0.name == "scope" ? URLQueryItem(name: engine.described.scopeParameter, value: $0.value) : $0
        }
        return components.url ?? url
    }
    func tokenRequest(code: String, redirectURI: URL, pkce: PKCE, for request: LoginRequest) throws -> HTTPRequest {
        try standard.tokenRequest(code: code, redirectURI: redirectURI, pkce: pkce, for: request)
    }
    func token(from response: HTTPResponse, for request: LoginRequest) async throws -> AccessToken {
        let answer = try engine.tokenAnswer(response, what: "token answer", at: engine.described.tokenAnswerPath)
        let token = engine.identified(AccessToken(answer, for: request, now: engine.now()), answer: answer.raw)
        return try await engine.checkToken?(IssuedToken(token, answer: answer, request: request, nonce: nonce)) ?? token
    }
}

/// The engine's device dialect: the standard one, reading the account from the token answer.
struct OAuth2EngineDeviceDialect: DeviceLoginDialect {
    var engine: OAuth2Provider
    var standard: RFC8628DeviceDialect

    var provider: ProviderID { engine.id }
    var errorTaxonomy: any ErrorTaxonomy { engine.errorTaxonomy }
    func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        try standard.startRequest(for: engine.asking(request))
    }
    func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        try standard.authorization(from: response, for: request)
    }
    func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest { try standard.pollRequest(context) }
    func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        let read = standard.readPoll(response, context: context)
        guard case .authorized(let token) = read, let answer = OAuthTokenResponse(json: response.json) else {
            return read
        }
        let identified = engine.identified(token, answer: response.json)
        return .authorized(
            try await engine.checkToken?(IssuedToken(identified, answer: answer, request: context.request))
                ?? identified)
    }
}

/// A token on its way to being used, as ``OAuth2Provider/checkToken`` sees it.
public struct IssuedToken: Sendable {
    /// The token as read from the answer, or as the person supplied it.
    public var token: AccessToken
    /// The token endpoint's answer (the ID token is in it); `nil` for a token the person supplied.
    public var answer: OAuthTokenResponse?
    /// The login request; for a refresh, one for the renewed login's scopes.
    public var request: LoginRequest
    /// The nonce the browser login sent, for OpenID Connect's ID token.
    public var nonce: String?
    /// For a refresh, the login it renews.
    public var renewing: AccessToken?

    /// Creates the token as the hook sees it.
    public init(
        _ token: AccessToken, answer: OAuthTokenResponse?, request: LoginRequest, nonce: String? = nil,
        renewing: AccessToken? = nil
    ) {
        self.token = token
        self.answer = answer
        self.request = request
        self.nonce = nonce
        self.renewing = renewing
    }
}

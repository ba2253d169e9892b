import Foundation

/// How a request carries a session's token: `Authorization: Bearer` (``bearer``, RFC 6750 §2.1)
/// unless the provider puts it elsewhere or adds a proof made from it.
///
/// ```swift
/// // Facebook's Graph API also wants `appsecret_proof`, made from the token, in the query.
/// let graph = RequestAuthorization { request, token in
///     var request = request
///     request.url = OAuth.appendingQuery([("appsecret_proof", proof(token))], to: request.url)
///     request.headers["Authorization"] = "Bearer \(token.tokenString)"
///     return request
/// }
/// ```
public struct RequestAuthorization: Sendable {
    /// The request to send, made from the one given and the token to send with it. Called again
    /// with the new token when a refused token was renewed.
    public var authorize: @Sendable (HTTPRequest, AccessToken) throws -> HTTPRequest

    /// Creates an authorization.
    public init(_ authorize: @escaping @Sendable (HTTPRequest, AccessToken) throws -> HTTPRequest) {
        self.authorize = authorize
    }

    /// The token in an `Authorization: Bearer` header, replacing any `Authorization` field.
    public static let bearer = RequestAuthorization { request, token in
        var request = request
        request.headers["Authorization"] = "Bearer \(token.tokenString)"
        return request
    }
}

extension Session {
    /// Sends `request` with the session's token, through `transport`: the one call for every
    /// provider's API client and for an app's own requests.
    ///
    /// ```swift
    /// let request = HTTPRequest(url: URL(string: "https://api.example.com/v1/me")!)
    /// let response = try await session.send(request, through: transport, taxonomy: provider.taxonomy)
    /// ```
    ///
    /// See ``send(_:taxonomy:authorization:allowLoginUI:loginUI:exchange:)`` for what happens when
    /// the token is refused or not enough; a failure below HTTP is thrown as the `taxonomy`
    /// classifies it (``ErrorTaxonomy/classify(_:)-(TransportError)``).
    ///
    /// - Returns: the resource's answer, whatever its status, unless it refused the token or asked
    ///   for more.
    /// - Throws: ``AuthError`` as the other method says, or for a failure below HTTP; the store's
    ///   and the lock's errors; `CancellationError`.
    public nonisolated func send(
        _ request: HTTPRequest, through transport: any HTTPTransport, taxonomy: any ErrorTaxonomy,
        authorization: RequestAuthorization = .bearer, allowLoginUI: Bool = false, loginUI: (any LoginUI)? = nil
    ) async throws -> HTTPResponse {
        try await send(
            request, taxonomy: taxonomy, authorization: authorization, allowLoginUI: allowLoginUI, loginUI: loginUI
        ) { try await LoginHTTP.send($0, through: transport, taxonomy: taxonomy) }
    }

    /// Sends `request` with the session's token through `exchange` (a provider's client that
    /// paces its calls, say), renewing a refused token once and stepping up once when the resource
    /// asks for more. Never more than that: at most three exchanges, one renewal and one
    /// re-authorization per call.
    ///
    /// In order:
    /// 1. The token is the session's valid one (``validToken()``: renewed first when it is due);
    ///    `authorization` puts it on the request.
    /// 2. An answer whose `WWW-Authenticate` challenge says the token is not enough
    ///    (``StepUpRequirement``: `insufficient_scope`, `insufficient_user_authentication`) is a
    ///    ``ErrorCategory/permissions`` error that names what is needed
    ///    (``AuthError/stepUpNeeded(_:httpStatus:provider:)``). With `allowLoginUI` and a
    ///    `loginUI`, the person is asked once (``requestPermissions(_:options:loginUI:)``) for the
    ///    union of the scopes the login has and the ones needed, with `acr_values` and `max_age`
    ///    as authorization parameters; the new login is saved, and the request is sent again.
    ///    Otherwise, or when the resource still asks after that, the error is thrown.
    /// 3. An answer that `taxonomy` classifies as ``ErrorCategory/authenticationReopenSession``
    ///    (a 401 `invalid_token`, GitHub's bad credentials, Facebook's 190) is a refusal of the
    ///    token. It is renewed once through the core's one renewal path (``renewRefused(_:)``:
    ///    locked, single-flight, a newer login another process saved is used instead) and the
    ///    request is sent once more with the new token. A token that cannot be renewed is recorded
    ///    as refused on the login (``recordRefusal(of:)``) and the refusal is thrown. A renewal
    ///    the provider refuses marks the login as needing a login, as renewals always do, and its
    ///    error is thrown.
    /// 4. A refusal of the renewed token marks the stored login as needing a login (it is kept,
    ///    never deleted), closes the session, and is thrown.
    ///
    /// A refusal that the provider's table says ends the session (``AuthError/closesSession``,
    /// Facebook's 190) is not renewed with the provider: only a newer login that another process
    /// saved is used; without one, the session closes and clears its login as the table says
    /// (``handle(_:)``) and the refusal is thrown.
    ///
    /// The session must be open. Errors thrown here never contain the token.
    ///
    /// - Parameters:
    ///   - request: the request, without the token.
    ///   - taxonomy: how the provider's answers are read.
    ///   - authorization: how the token goes on the request (``RequestAuthorization/bearer``).
    ///   - allowLoginUI: whether the person may be asked to grant more (step-up).
    ///   - loginUI: how the person is asked; without one there is no step-up.
    ///   - exchange: sends one request and returns its answer, whatever the status.
    /// - Returns: the answer, whatever its status, unless it refused the token or asked for more.
    /// - Throws: ``AuthError``: the refusal, the renewal's, the step-up's or the login's, or one
    ///   saying the session is not open; what `exchange` throws; the store's and the lock's errors.
    public nonisolated func send(
        _ request: HTTPRequest, taxonomy: any ErrorTaxonomy, authorization: RequestAuthorization = .bearer,
        allowLoginUI: Bool = false, loginUI: (any LoginUI)? = nil,
        exchange: (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        var token = try await validToken()
        var renewed = false
        var steppedUp = false
        while true {
            let response = try await exchange(try authorization.authorize(request, token))
            if response.isSuccess { return response }
            let secrets = [token.tokenString] + (token.refreshToken.map { [$0] } ?? [])
            if let requirement = StepUpRequirement(response) {
                let error = AuthError.stepUpNeeded(requirement, httpStatus: response.status, provider: key.provider)
                    .redacting(secrets)
                guard !steppedUp, allowLoginUI, let loginUI else { throw error }
                steppedUp = true
                token = try await stepUp(from: token, to: requirement, loginUI: loginUI)
                continue
            }
            let refusal = taxonomy.classify(response).redacting(secrets)
            guard refusal.category == .authenticationReopenSession else { return response }
            if renewed {
                try await endLogin(refused: token, refusal)
                throw refusal.adding(
                    "The renewed token was refused too, so the login to '\(key.provider)' needs a new login.")
            }
            renewed = true
            token = try await renew(refused: token, refusal)
        }
    }

    /// The token to send after `refused` was refused once: renewed, or another process's newer one.
    private nonisolated func renew(refused: AccessToken, _ refusal: AuthError) async throws -> AccessToken {
        let next: AccessToken
        if refusal.closesSession {
            // The provider says the login is over: only a login saved meanwhile elsewhere is used.
            next = try await renewToken(isDue: { $0.tokenString == refused.tokenString }, renew: { _ in nil }).token
            guard next.tokenString != refused.tokenString else {
                await handle(refusal)
                throw refusal
            }
        } else {
            next = try await renewRefused(refused)
            guard next.tokenString != refused.tokenString else {
                try await recordRefusal(of: refused)
                throw refusal.adding(
                    "The token cannot be renewed, so the login to '\(key.provider)' is recorded as expired and needs "
                        + "a new login.")
            }
        }
        return next
    }

    /// After the renewed token was refused too: the login cannot be used. A refusal that ends the
    /// session clears it as the provider's table says; any other marks it as needing a login, kept.
    private nonisolated func endLogin(refused: AccessToken, _ refusal: AuthError) async throws {
        guard !refusal.closesSession else {
            await handle(refusal)
            return
        }
        let (key, store) = (self.key, self.store)
        try await refreshLocking.withLock(for: key) {
            try await store.withRenewalClaim(for: key) { claim in
                // Only the refused login: one saved meanwhile (a new login) is left alone.
                guard var stored = claim.stored, stored.token.tokenString == refused.tokenString, !stored.needsLogin
                else { return }
                stored.needsLogin = true
                _ = try await store.save(stored, fencedBy: claim)
            }
        }
        await closeUnusable(refusal)
    }

    /// Asks the person once for what `requirement` says is missing, on top of what the login has;
    /// the new login is saved by ``requestPermissions(_:options:loginUI:)``.
    private nonisolated func stepUp(
        from token: AccessToken, to requirement: StepUpRequirement, loginUI: any LoginUI
    ) async throws -> AccessToken {
        let current = await self.token ?? token
        let scopes = current.permissions.granted.union(requirement.scopes).sorted()
        var options = LoginRequest.Options()
        options.authorizationParameters = requirement.authorizationParameters
        _ = try await requestPermissions(scopes.map(Permission.read), options: options, loginUI: loginUI)
        return try await validToken()
    }
}

extension AuthError {
    /// This error with `sentence` after its message.
    fileprivate func adding(_ sentence: String) -> AuthError {
        var error = self
        error.message += error.message.hasSuffix(".") ? " \(sentence)" : ". \(sentence)"
        return error
    }
}

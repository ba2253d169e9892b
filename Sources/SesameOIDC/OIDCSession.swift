import Foundation
import Sesame

/// One account's session with an OpenID provider: login, refresh with rotation, userinfo,
/// logout with revocation, on top of the core `Session` state machine.
///
/// ```swift
/// let session = OIDCSession(provider: provider, transport: transport, store: store,
///     loginUI: OIDCBrowserLogin(oidc: provider, receiver: LoopbackRedirectReceiver(),
///                               opener: SystemBrowserOpener(), transport: transport))
/// try await session.open(scopes: ["openid", "email"], allowLoginUI: true)
/// let claims = try await session.userInfo()
/// ```
///
/// The login is stored under the issuer it came from (`CredentialKey.issuer`), so it is never
/// presented to, or refreshed at, another issuer with the same client id. The token's whole
/// lifecycle is the core `Session`'s: this type supplies only the refresh token grant, as a
/// `TokenRenewer`. An expired access token with a working refresh token opens the session
/// without UI (it is refreshed first); concurrent callers in this process share one refresh and,
/// with ``Configuration/refreshLocking``, so do processes; the rotated refresh token is saved
/// once before it is used. A refresh refused with `invalid_grant` keeps the stored login, marks
/// it as needing a login, and closes the session, unless another process had already rotated
/// it, whose login is then used.
///
/// Creating a session has no side effects (no lock file unless the ``Configuration`` asks).
public final class OIDCSession: ProviderSession {
    /// The provider.
    public let provider: OIDCProvider
    /// The state machine and the token.
    public let session: Session
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in.
    public let loginUI: (any LoginUI)?
    /// Refresh and locking settings.
    public let configuration: Configuration

    /// The tunable parts of a session.
    public struct Configuration: Sendable {
        /// How refreshes are kept apart from other processes using the same store:
        /// `RefreshLocking.none` by default; desktop apps pass a lock file per credential
        /// (`RefreshLocking.directory(RefreshLock.defaultDirectory())`).
        public var refreshLocking: RefreshLocking
        /// The most a token is refreshed before its expiry: a quarter of its lifetime, at most
        /// this (one minute by default).
        public var refreshLeeway: Duration

        /// Creates a configuration; see each property for its default.
        public init(refreshLocking: RefreshLocking = .none, refreshLeeway: Duration = .seconds(60)) {
            self.refreshLocking = refreshLocking
            self.refreshLeeway = refreshLeeway
        }
    }

    /// Creates a session. Nothing is written or shown until the session is used.
    ///
    /// - Parameters:
    ///   - provider: the issuer and client.
    ///   - transport: what sends requests (`CurlTransport` on the desktop).
    ///   - store: where the token is kept (the keyring on the desktop).
    ///   - account: the name the token is stored under.
    ///   - loginUI: how the person logs in; without one the session opens only from the store.
    ///   - configuration: refresh and locking settings (``Configuration``).
    public init(
        provider: OIDCProvider, transport: any HTTPTransport, store: any CredentialStore, account: String = "default",
        loginUI: (any LoginUI)? = nil, configuration: Configuration = Configuration()
    ) {
        self.provider = provider
        self.transport = transport
        self.loginUI = loginUI
        self.configuration = configuration
        let refresh = OIDCRefreshGrant(provider: provider, transport: transport)
        self.session = Session(
            provider: provider.id, issuer: provider.endpoints.issuer, appID: provider.configuration.clientID,
            account: account, store: store, refreshLocking: configuration.refreshLocking,
            renewer: .refreshToken(maximumLeeway: configuration.refreshLeeway.inSeconds) {
                try await refresh.send($0)
            }, now: provider.now)
    }

    /// Opens the session: from a usable stored login without UI (refreshed first when its access
    /// token expired), or by a login when allowed.
    ///
    /// A login stored before Sesame recorded issuers is taken over when its ID token names this
    /// issuer; one that does not is left alone (`sesame status` shows it).
    ///
    /// - Throws: `AuthError` for a login or refresh that failed; `CredentialStoreError` when the
    ///   store cannot be read or written.
    @discardableResult
    public func open(permissions: [Permission] = [], allowLoginUI: Bool) async throws -> SessionState {
        if await !session.state.isOpen {
            try await OIDCLegacyLogins.claim(for: session, issuer: provider.endpoints.issuer)
        }
        return try await session.open(permissions: permissions, allowLoginUI: allowLoginUI, loginUI: loginUI)
    }

    /// Refreshes the token now, because the provider refused it before its expiry, unless it was
    /// refreshed meanwhile (here or in another process), in which case that token is returned.
    ///
    /// - Throws: `AuthError` when the issuer refuses the refresh; `CredentialStoreError` when the
    ///   store cannot be read or written.
    @discardableResult
    public func refresh() async throws -> AccessToken {
        guard let current = await session.token else { return try await validToken() }
        return try await session.renewRefused(current)
    }

    /// The person's claims from the userinfo endpoint. A refused token is refreshed once and
    /// the call made again.
    ///
    /// - Throws: `AuthError` when there is no usable token or the userinfo endpoint refuses it.
    public func userInfo() async throws -> JSONValue {
        guard let endpoint = provider.endpoints.userinfoEndpoint else {
            throw OIDCConfigurationError.unsupported("userinfo", endpoint: "userinfo_endpoint", provider: provider.id)
        }
        var token = try await validToken()
        for attempt in 0..<2 {
            let response = try await send(
                HTTPRequest(
                    method: .get, url: endpoint,
                    headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]))
            if response.isSuccess {
                guard let json = response.json, json.objectValue != nil else {
                    throw AuthError(
                        category: .server, message: "The userinfo answer of '\(provider.id)' is not a JSON object.",
                        httpStatus: response.status, provider: provider.id)
                }
                if let subject = json["sub"]?.stringValue, let expected = token.userID, subject != expected {
                    throw AuthError(
                        category: .invalid,
                        message: "The userinfo answer of '\(provider.id)' names another subject than the ID token; "
                            + "it was refused (OpenID Connect Core §5.3.2).", provider: provider.id)
                }
                return json
            }
            let error = provider.taxonomy.classify(response)
            guard attempt == 0, error.category == .authenticationReopenSession, token.refreshToken != nil else {
                throw error
            }
            token = try await refresh()
        }
        throw AuthError(category: .providerOther, message: "unreachable", provider: provider.id)
    }

    /// Logs out: with `revoke`, first revokes the refresh and access tokens (RFC 7009) when the
    /// provider has a revocation endpoint; then closes the session and deletes the stored token.
    ///
    /// When revocation fails (no network, say), the token is deleted here all the same and the
    /// error is thrown, so the app can tell the person the grant may still be active.
    ///
    /// - Throws: `AuthError` when the revocation failed (the token is cleared here all the same);
    ///   `CredentialStoreError` when it cannot be removed from the store.
    public func logout(revoke: Bool = true) async throws {
        let token = await session.token
        var failure: (any Error)?
        if revoke, let token, let endpoint = provider.endpoints.revocationEndpoint {
            do {
                if let refresh = token.refreshToken {
                    try await revokeToken(refresh, hint: "refresh_token", endpoint: endpoint)
                }
                try await revokeToken(token.tokenString, hint: "access_token", endpoint: endpoint)
            } catch {
                failure = error
            }
        }
        try await session.closeAndClearTokenInformation()
        try await OIDCLegacyLogins.remove(for: session, issuer: provider.endpoints.issuer)
        if let failure { throw failure }
    }

    private func revokeToken(_ value: String, hint: String, endpoint: URL) async throws {
        let response = try await send(
            try provider.formRequest(endpoint, [("token", value), ("token_type_hint", hint)]))
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        guard response.isSuccess else { throw provider.taxonomy.classify(response) }
    }

    private func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await LoginHTTP.send(request, through: transport, taxonomy: provider.taxonomy)
    }
}

/// The refresh token grant (RFC 6749 §6) of one issuer and client: the hook the core's renewal
/// calls. Nothing is saved here.
struct OIDCRefreshGrant: Sendable {
    var provider: OIDCProvider
    var transport: any HTTPTransport

    func send(_ current: AccessToken) async throws -> AccessToken {
        guard let refreshToken = current.refreshToken else {
            // The core asks only when `canRenew` said yes; this is for a caller that did not.
            throw AuthError(
                category: .authenticationReopenSession,
                message: "The login to '\(provider.id)' has no refresh token to renew it with. Log in again.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: provider.id)
        }
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if !current.permissions.granted.isEmpty {
            form.append(("scope", current.permissions.granted.sorted().joined(separator: " ")))
        }
        let response = try await LoginHTTP.send(
            try provider.formRequest(provider.endpoints.tokenEndpoint, form), through: transport,
            taxonomy: provider.taxonomy)
        guard response.isSuccess else { throw provider.taxonomy.classify(response) }
        let request = LoginRequest(
            provider: provider.id, appID: provider.configuration.clientID,
            permissions: current.permissions.granted.sorted().map { Permission.read($0) })
        do {
            return try await provider.acceptToken(
                response, for: request, nonce: nil, requireIDToken: false, previous: current)
        } catch let error as AuthError {
            // The issuer has rotated the refresh token already: keep the new one (it came from the
            // token endpoint itself, over the same channel as every token), use nothing else of
            // the answer, and say what was wrong.
            guard let answer = OAuthTokenResponse(json: response.json), let rotated = answer.refreshToken,
                rotated != refreshToken
            else { throw error }
            var kept = current
            kept.refreshToken = rotated
            kept.refreshTokenExpirationDate = answer.refreshTokenExpiresIn.flatMap {
                $0 > 0 ? provider.now().addingTimeInterval(TimeInterval($0)) : nil
            }
            throw RenewalKeepingRotation(kept: kept, error: error)
        }
    }
}

/// OpenID logins stored before Sesame recorded the issuer in a login's key (provider, client
/// id and account only).
package enum OIDCLegacyLogins {
    /// Moves the login stored without an issuer under `session`'s key, when its ID token says it
    /// came from `issuer`: saved under the new key first, then the old entry removed. A login
    /// whose ID token names another issuer, or has none, is left where it is, never used.
    package static func claim(for session: Session, issuer: String) async throws {
        let key = session.key
        let legacyKey = CredentialKey(provider: key.provider, appID: key.appID, account: key.account)
        guard key.issuer != nil, try await session.store.load(key) == nil,
            var legacy = try await session.store.load(legacyKey), self.issuer(of: legacy.token) == issuer
        else { return }
        legacy.key = key
        try await session.store.save(legacy)
        try await session.store.delete(legacyKey)
    }

    /// Removes the login stored without an issuer under `session`'s names, unless its ID token
    /// says it came from another issuer than `issuer` (then it is that issuer's to remove).
    package static func remove(for session: Session, issuer: String) async throws {
        let key = session.key
        guard key.issuer != nil else { return }
        let legacyKey = CredentialKey(provider: key.provider, appID: key.appID, account: key.account)
        guard let legacy = try await session.store.load(legacyKey) else { return }
        if let recorded = self.issuer(of: legacy.token), recorded != issuer { return }
        try await session.store.delete(legacyKey)
    }

    /// The issuer the token's ID token names, read for this check only (it was validated when
    /// it was received).
    package static func issuer(of token: AccessToken) -> String? {
        token.idToken.flatMap { try? JSONWebToken(compact: $0).claims["iss"]?.stringValue }
    }
}

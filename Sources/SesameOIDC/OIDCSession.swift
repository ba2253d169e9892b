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
/// lifecycle is the core `Session`'s, renewed by the engine's refresh grant
/// (`OAuth2Provider.refresh(_:)`, the ID token checked), and a login with no person
/// (``OIDCMachineLogin``) by making its grant again. An expired access token with a working refresh token opens the session
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
    public var session: Session { oauth2.session }
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in.
    public var loginUI: (any LoginUI)? { oauth2.loginUI }
    /// Refresh and locking settings.
    public let configuration: Configuration
    /// The engine's session, sending through ``transport``: refresh and revocation.
    private let oauth2: OAuth2Session

    /// The tunable parts of a session.
    public struct Configuration: Sendable {
        /// How refreshes are kept apart from other processes using the same store:
        /// `RefreshLocking.none` by default; desktop apps pass a lock file per credential
        /// (`RefreshLocking.directory(RefreshLock.defaultDirectory())`).
        public var refreshLocking: RefreshLocking
        /// The most a token is refreshed before its expiry: a quarter of its lifetime, at most
        /// this (one minute by default).
        public var refreshLeeway: Duration
        /// Where a token exchange's subject token source reads its variables when it renews a
        /// login (GitHub Actions'); empty by default: the library reads no environment itself.
        public var environment: [String: String]

        /// Creates a configuration; see each property for its default.
        public init(
            refreshLocking: RefreshLocking = .none, refreshLeeway: Duration = .seconds(60),
            environment: [String: String] = [:]
        ) {
            self.refreshLocking = refreshLocking
            self.refreshLeeway = refreshLeeway
            self.environment = environment
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
        self.configuration = configuration
        var engine = provider.engine
        engine.transport = transport
        oauth2 = OAuth2Session(
            provider: engine, store: store, account: account, loginUI: loginUI,
            refreshLocking: configuration.refreshLocking, issuer: provider.endpoints.issuer,
            renewer: TokenRenewer.refreshToken(maximumLeeway: configuration.refreshLeeway.inSeconds) { [engine] in
                try await engine.refresh($0)
            }.renewingMachineLogins { current, grant in
                try await OIDCMachineLogin(
                    oidc: provider, grant: grant, transport: transport, environment: configuration.environment
                ).renew(current)
            })
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

    /// The person's claims from the userinfo endpoint, through the core's authorized request
    /// (`Session.send`): a refused token is refreshed once and the call made again.
    ///
    /// - Throws: `AuthError` when there is no usable token or the userinfo endpoint refuses it.
    public func userInfo() async throws -> JSONValue {
        guard let endpoint = provider.endpoints.userinfoEndpoint else {
            throw OIDCConfigurationError.unsupported("userinfo", endpoint: "userinfo_endpoint", provider: provider.id)
        }
        let response = try await session.send(
            HTTPRequest(method: .get, url: endpoint, headers: ["Accept": "application/json"]), through: transport,
            taxonomy: provider.taxonomy)
        guard response.isSuccess else { throw provider.taxonomy.classify(response) }
        guard let json = response.json, json.objectValue != nil else {
            throw AuthError(
                category: .server, message: "The userinfo answer of '\(provider.id)' is not a JSON object.",
                httpStatus: response.status, provider: provider.id)
        }
        if let subject = json["sub"]?.stringValue, let expected = await session.token?.userID, subject != expected {
            throw AuthError(
                category: .invalid,
                message: "The userinfo answer of '\(provider.id)' names another subject than the ID token; "
                    + "it was refused (OpenID Connect Core §5.3.2).", provider: provider.id)
        }
        return json
    }

    /// Logs out as the engine's `OAuth2Session.logOut(revoke:)` does: with `revoke`, first revokes
    /// the stored login's refresh and access tokens (RFC 7009) when the provider has a revocation
    /// endpoint; then closes the session and deletes the stored token, and a login stored before
    /// Sesame recorded issuers that came from this issuer.
    ///
    /// When revocation fails (no network, say), the token is deleted here all the same and the
    /// error is thrown, so the app can tell the person the grant may still be active.
    ///
    /// - Returns: whether the tokens were revoked (not when the issuer lists no revocation endpoint).
    /// - Throws: `AuthError` when the revocation failed (the token is cleared here all the same);
    ///   `CredentialStoreError` when it cannot be removed from the store.
    @discardableResult
    public func logout(revoke: Bool = true) async throws -> Bool {
        let revoked: Bool
        do {
            revoked = try await oauth2.logOut(revoke: revoke)
        } catch let failure where !(failure is CredentialStoreError) {
            try await OIDCLegacyLogins.remove(for: session, issuer: provider.endpoints.issuer)
            throw failure
        }
        try await OIDCLegacyLogins.remove(for: session, issuer: provider.endpoints.issuer)
        return revoked
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

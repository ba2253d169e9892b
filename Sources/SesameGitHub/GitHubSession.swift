import Foundation
import Sesame

/// One GitHub login on one host: the core `Session`, GitHub's refresh hook, and a REST client.
///
/// The login is stored under provider `github`, app id = the host name
/// (``GitHubProvider/credentialAppID``), account = `account`. Expiring user tokens (GitHub
/// Apps) are refreshed through the core's one renewal path (`Session.renewToken(isDue:renew:)`:
/// the cross-process lock, the store read again, one save), with
/// ``GitHubProvider/refresh(_:transport:)`` as the hook: concurrent callers and processes share
/// one refresh, and the new token is saved before it is used. Tokens without an expiry (OAuth apps,
/// classic personal tokens) are used as they are.
public struct GitHubSession: Sendable {
    /// The host and app.
    public let provider: GitHubProvider
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// The core session.
    public let session: Session
    /// How a login is shown, when one is allowed.
    public let loginUI: (any LoginUI)?
    /// How long before expiry a token is refreshed.
    public var refreshLeeway: Duration

    /// Creates a session for `account` on `provider`'s host, kept in `store`.
    ///
    /// - Parameters:
    ///   - provider: the host and app.
    ///   - transport: what sends the requests.
    ///   - store: where the login is kept.
    ///   - account: the account name the login is kept under.
    ///   - loginUI: how a login is shown, when one is allowed; `nil` for none.
    ///   - refreshLeeway: how long before expiry a token is refreshed.
    ///   - refreshLocking: the cross-process refresh lock; none by default (the desktop adapter
    ///     passes a lock directory).
    public init(
        provider: GitHubProvider, transport: any HTTPTransport, store: any CredentialStore,
        account: String = "default", loginUI: (any LoginUI)? = nil, refreshLeeway: Duration = .seconds(300),
        refreshLocking: RefreshLocking = .none
    ) {
        self.provider = provider
        self.transport = transport
        self.loginUI = loginUI
        self.refreshLeeway = refreshLeeway
        self.session = Session(
            provider: .github, appID: provider.credentialAppID, account: account, store: store,
            refreshLocking: refreshLocking, now: provider.now)
    }

    /// Where the token is kept.
    public var key: CredentialKey { session.key }
    /// The current state.
    public var state: SessionState { get async { await session.state } }
    /// The current token, if any.
    public var token: AccessToken? { get async { await session.token } }

    /// Opens the session: from a stored token without UI, or by a login when allowed.
    ///
    /// A stored token that has expired but has a refresh token (an expiring user token of a
    /// GitHub App, eight hours old) is refreshed and saved first, so it opens without UI too. A
    /// refresh token GitHub refuses marks the stored login as needing a login (it is kept), and
    /// the login UI runs when allowed.
    @discardableResult
    /// - Throws: `AuthError` for a login or refresh that failed; `CredentialStoreError` when the
    ///   store cannot be read or written.
    public func open(scopes: [String] = [], allowLoginUI: Bool) async throws -> SessionState {
        if await !session.state.isOpen { try await refreshExpiredStoredToken() }
        return try await session.open(
            permissions: scopes.map { Permission.read($0) }, allowLoginUI: allowLoginUI, loginUI: loginUI)
    }

    /// Until the core's refresh path refreshes an expired stored token on open, GitHub does it
    /// here, with the same hook.
    private func refreshExpiredStoredToken() async throws {
        guard var stored = try await session.store.load(key), !stored.needsLogin, stored.token.refreshToken != nil,
            stored.token.isExpired(at: provider.now(), leeway: Double(refreshLeeway.components.seconds))
        else { return }
        do {
            let refreshed = try await provider.refresh(stored.token, transport: transport)
            try await session.store.save(StoredCredential(key: key, token: refreshed, savedAt: provider.now()))
        } catch let error as AuthError where error.category == .authenticationReopenSession {
            stored.needsLogin = true
            try await session.store.save(stored)
        }
    }

    /// A token valid for at least ``refreshLeeway``, refreshed first when needed.
    ///
    /// - Throws: `AuthError` when there is no usable token or its refresh failed;
    ///   `CredentialStoreError` when the store cannot be read or written.
    public func validToken() async throws -> AccessToken {
        try await session.freshToken(leeway: refreshLeeway, refresh: refreshHook)
    }

    /// Refreshes the token now (a token with no expiry or no refresh token is returned as it is).
    @discardableResult
    /// - Throws: `AuthError` when GitHub refuses the refresh; `CredentialStoreError` when the store
    ///   cannot be read or written.
    public func refresh() async throws -> AccessToken {
        try await session.renewToken(
            isDue: { $0.expirationDate != nil && $0.refreshToken != nil }, renew: refreshHook
        ).token
    }

    /// GitHub's refresh, as the core's renewal path calls it.
    public var refreshHook: @Sendable (AccessToken) async throws -> AccessToken? {
        { [provider, transport] current in try await provider.refresh(current, transport: transport) }
    }

    /// A REST client that uses this session's valid token. A token GitHub refuses (401) is
    /// refreshed once, when it can be, and the call made again.
    public func client(
        policy: RecoveryPolicy? = RecoveryPolicy(), governor: GitHubRateLimitGovernor? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) -> GitHubClient {
        let session = self
        return GitHubClient(
            github: provider, transport: transport, policy: policy, governor: governor, clock: clock,
            renew: {
                let before = await session.token
                guard before?.refreshToken != nil else { return nil }
                let after = try await session.refresh()
                return after.tokenString == before?.tokenString ? nil : after.tokenString
            },
            token: { try await session.validToken().tokenString })
    }

    /// Closes the session and deletes the stored token (GitHub keeps the grant; revoke it in
    /// GitHub's settings).
    ///
    /// - Throws: `CredentialStoreError` when the stored token cannot be removed.
    public func logOut() async throws { try await session.closeAndClearTokenInformation() }
}

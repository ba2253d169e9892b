import Foundation
import Sesame

/// One GitHub login on one host: the engine's `OAuth2Session` and a REST client.
///
/// ```swift
/// let session = GitHubSession(provider: github, transport: CurlTransport(), store: keyring,
///     loginUI: GitHubSession.deviceLogin(provider: github, transport: transport, presenter: codeDialog))
/// try await session.open(scopes: ["repo"], allowLoginUI: true)
/// let me = try await session.client().get("user")
/// ```
///
/// The login is stored under provider `github`, app id = the host name
/// (``GitHubProvider/credentialAppID``), account = `account`, so it is only ever sent to its
/// host. Expiring user tokens (GitHub Apps) are renewed by the engine's session with its refresh
/// grant (``GitHubProvider/oauth2(transport:)``): an expired token whose
/// refresh token still works opens the session without UI; concurrent callers and processes
/// share one refresh; the new token is saved before it is used. Tokens without an expiry (OAuth
/// apps, classic personal tokens) are used as they are.
public struct GitHubSession: ProviderSession {
    /// The host and app.
    public let provider: GitHubProvider
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// The engine's session, storing the login under the host name. `oauth2.logOut(revoke: false)`
    /// logs out (GitHub keeps the grant; revoke it in GitHub's settings).
    public let oauth2: OAuth2Session
    /// The core session.
    public var session: Session { oauth2.session }
    /// How a login is shown, when one is allowed.
    public var loginUI: (any LoginUI)? { oauth2.loginUI }

    /// Creates a session for `account` on `provider`'s host, kept in `store`.
    ///
    /// - Parameters:
    ///   - provider: the host and app.
    ///   - transport: what sends the requests.
    ///   - store: where the login is kept.
    ///   - account: the account name the login is kept under.
    ///   - loginUI: how a login is shown, when one is allowed; `nil` for none.
    ///   - refreshLeeway: the most a token is refreshed before its expiry (five minutes).
    ///   - refreshLocking: the cross-process refresh lock; none by default (the desktop adapter
    ///     passes a lock directory).
    public init(
        provider: GitHubProvider, transport: any HTTPTransport, store: any CredentialStore,
        account: String = "default", loginUI: (any LoginUI)? = nil, refreshLeeway: Duration = .seconds(300),
        refreshLocking: RefreshLocking = .none
    ) {
        self.provider = provider
        self.transport = transport
        let engine = provider.oauth2(transport: transport)
        var renewer = engine.renewer
        renewer.maximumLeeway = refreshLeeway.inSeconds
        oauth2 = OAuth2Session(
            provider: engine, store: store, account: account, loginUI: loginUI, refreshLocking: refreshLocking,
            renewer: renewer, appID: provider.credentialAppID)
    }

    /// GitHub's device flow on the core's engine, with the code shown by `presenter` (a GUI app's
    /// dialog, or `TerminalLoginPresenter` from SesameDesktop on a terminal); polling waits on `clock`.
    public static func deviceLogin(
        provider: GitHubProvider, transport: any HTTPTransport, presenter: any DeviceCodePresenter,
        clock: any Clock<Duration> = ContinuousClock()
    ) -> OAuth2Login {
        let engine = provider.oauth2(transport: transport)
        // GitHub's description always has its device endpoint.
        return engine.login(
            DeviceLoginFlow(dialect: engine.deviceDialect!, presenter: presenter, transport: transport, clock: clock))
    }

    /// Refreshes the token now, because GitHub refused it before its expiry, unless it was
    /// refreshed meanwhile (here or in another process); a token that cannot be refreshed is
    /// returned as it is.
    ///
    /// - Throws: `AuthError` when GitHub refuses the refresh; `CredentialStoreError` when the store
    ///   cannot be read or written.
    @discardableResult
    public func refresh() async throws -> AccessToken {
        guard let current = await session.token else { return try await validToken() }
        return try await session.renewRefused(current)
    }

    /// A REST client that uses this session's valid token. A token GitHub refuses (401) is
    /// refreshed once, when it can be, and the call made again (the core's authorized request).
    public func client(
        policy: RecoveryPolicy? = RecoveryPolicy(), governor: GitHubRateLimitGovernor? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) -> GitHubClient {
        GitHubClient(
            github: provider, transport: transport, session: session, policy: policy, governor: governor, clock: clock)
    }
}

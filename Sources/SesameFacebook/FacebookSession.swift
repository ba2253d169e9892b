import Foundation
import Sesame
import Synchronization

/// A person's Facebook session in an app: FBSession brought to Linux.
///
/// ```swift
/// let session = FacebookSession(provider: facebook, transport: CurlTransport(), store: keyring)
/// Task { for await change in await session.stateChanges() { render(change) } }   // sessionStateChanged:
/// try await session.openActiveSession(readPermissions: ["email"], allowLoginUI: true)
/// let me = try await session.graph.get("me", parameters: ["fields": "id,name"])
/// try await session.logout(revoke: true)
/// ```
///
/// The state machine is the core `Session`'s (`created`, `createdTokenLoaded`,
/// `opening`, `open`, `openTokenExtended`, `closedLoginFailed`, `closed`); this type adds what
/// Facebook needs: its login flows (device login by default), permission requests with
/// `auth_type=rerequest`, token extension, `debug_token`, server-side logout, and a Graph
/// client whose errors close the session when Facebook says the token is no longer good.
///
/// Token refresh is single-flight twice over: concurrent calls in this process wait on one
/// refresh (`Session.freshToken(leeway:refresh:)`), and a lock file beside the
/// per-user state (`RefreshLock`) keeps two processes from refreshing the same token at
/// once; the second one finds the first one's token in the store and uses it. The refreshed
/// token is saved before it is used.
public final class FacebookSession: Sendable {
    /// The app.
    public let provider: FacebookProvider
    /// The state machine and the token.
    public let session: Session
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in (and grants more permissions).
    public let loginUI: (any LoginUI)?
    /// The cross-process refresh lock; `nil` disables it (one process only).
    public let refreshLock: RefreshLock?
    /// A token that expires within this many seconds is refreshed before use.
    public let refreshLeeway: TimeInterval
    /// Token extension: only for tokens older than this (the SDK's 24 hours)...
    public let extensionAge: TimeInterval
    /// ... and at most once in this long (the SDK's one hour).
    public let extensionRetryInterval: TimeInterval
    /// Recovers from Graph errors in ``graph``; `nil` leaves them to the caller.
    public let recovery: FacebookRecoveryProcessor?
    /// Paces ``graph``'s calls by the usage headers.
    public let governor: GraphUsageGovernor
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let lifecycle = Mutex(Lifecycle())

    private struct Lifecycle {
        var lastExtensionAttempt: Date?
        var lastExtension: TokenExtensionOutcome?
    }

    /// Creates a session.
    ///
    /// - Parameters:
    ///   - provider: the app.
    ///   - transport: what sends requests (`CurlTransport` on the desktop).
    ///   - store: where the token is kept (the keyring on the desktop).
    ///   - account: the name the token is stored under.
    ///   - loginUI: how the person logs in; Facebook device login with the code shown on
    ///     standard error when `nil`.
    ///   - refreshLock: the cross-process lock; by default a file in
    ///     `RefreshLock.defaultDirectory(environment:)`.
    ///   - refreshLeeway: a token that expires within this many seconds is refreshed before
    ///     use (five minutes by default).
    ///   - extensionAge: token extension is tried only for tokens older than this many seconds
    ///     (the SDK's 24 hours by default).
    ///   - extensionRetryInterval: token extension is tried at most once in this many seconds
    ///     (the SDK's one hour by default).
    ///   - recoveryDelegate: when given, ``graph`` recovers from errors through a
    ///     ``FacebookRecoveryProcessor`` with this delegate and `recoveryPolicy`.
    ///   - recoveryPolicy: how often and how long that recovery retries; unused without a
    ///     `recoveryDelegate`.
    ///   - governor: paces ``graph``'s calls by Facebook's usage headers.
    ///   - clock: what waits (back-off, pacing, device polling) are measured on.
    ///   - now: the wall clock.
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, store: any CredentialStore,
        account: String = "default", loginUI: (any LoginUI)? = nil, refreshLock: RefreshLock?? = nil,
        refreshLeeway: TimeInterval = 300, extensionAge: TimeInterval = 86_400,
        extensionRetryInterval: TimeInterval = 3_600, recoveryDelegate: (any FacebookRecoveryDelegate)? = nil,
        recoveryPolicy: RecoveryPolicy = RecoveryPolicy(), governor: GraphUsageGovernor = GraphUsageGovernor(),
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.transport = transport
        let session = Session(provider: .facebook, appID: provider.appID, account: account, store: store, now: now)
        self.session = session
        self.loginUI =
            loginUI
            ?? DeviceLoginFlow(
                dialect: FacebookDeviceDialect(provider: provider, transport: transport, now: now),
                presenter: TerminalDeviceCodePresenter(providerName: "Facebook"), transport: transport, clock: clock)
        self.refreshLock = refreshLock ?? RefreshLock(key: session.key)
        self.refreshLeeway = refreshLeeway
        self.extensionAge = extensionAge
        self.extensionRetryInterval = extensionRetryInterval
        self.recovery = recoveryDelegate.map {
            FacebookRecoveryProcessor(
                delegate: $0, session: session, policy: recoveryPolicy, taxonomy: provider.taxonomy, clock: clock)
        }
        self.governor = governor
        self.clock = clock
        self.now = now
    }

    /// The Graph API client bound to this session's token.
    public var graph: GraphClient {
        GraphClient(
            provider: provider, transport: transport, credential: .session(self), version: nil, recovery: recovery,
            governor: governor, clock: clock)
    }

    /// Where the token is kept.
    public var key: CredentialKey { session.key }
    /// The current state.
    public var state: SessionState { get async { await session.state } }
    /// The current token, if any.
    public var token: AccessToken? { get async { await session.token } }

    /// Every state change from now on (the seed's `sessionStateChanged:state:error:`).
    public func stateChanges() async -> AsyncStream<SessionStateChange> { await session.stateChanges() }

    // MARK: Opening and closing

    /// Opens the session, as `FBSession openActiveSessionWithReadPermissions:allowLoginUI:` did.
    ///
    /// A valid cached token for this app opens it with no UI (`createdTokenLoaded` → `open`).
    /// With no cached token and `allowLoginUI` false it stays `created` (check with
    /// ``state``). Otherwise the person logs in (``loginUI``) and it becomes `open`, or
    /// `closedLoginFailed` with the classified error, which is also thrown. An open session
    /// whose token is due for extension is extended afterwards, as the SDK did.
    @discardableResult
    public func openActiveSession(readPermissions: [String] = [], allowLoginUI: Bool) async throws -> SessionState {
        let state = try await session.open(
            permissions: readPermissions.map(Permission.read), allowLoginUI: allowLoginUI, loginUI: loginUI)
        if state.isOpen { _ = await extendTokenIfNeeded() }
        return await session.state
    }

    /// Closes the session and keeps the token, so the next start opens without UI.
    public func close() async { await session.close() }

    /// Closes the session and deletes its token from the store.
    public func closeAndClearTokenInformation() async throws { try await session.closeAndClearTokenInformation() }

    /// Logs the person out: with `revoke`, first deauthorizes the app on Facebook
    /// (`DELETE /me/permissions`), then closes the session and clears the stored token.
    ///
    /// A token Facebook already refuses needs no revoking. When the revoke cannot be made (no
    /// network, say), the token is cleared here all the same and the error is thrown, so the
    /// app can tell the person the app is still connected on Facebook.
    public func logout(revoke: Bool = true) async throws {
        if revoke, let token = await session.token {
            do {
                _ = try await FacebookHTTP.send(
                    .delete, "me/permissions", token: token.tokenString, provider: provider, transport: transport)
            } catch let error as AuthError where error.category == .authenticationReopenSession {
                // Already invalid on Facebook's side: nothing left to revoke.
            } catch {
                try await session.closeAndClearTokenInformation()
                throw error
            }
        }
        try await session.closeAndClearTokenInformation()
    }

    // MARK: Permissions

    /// Asks for more read permissions (`auth_type=rerequest`).
    ///
    /// - Returns: what was granted and declined.
    /// - Throws: `AuthError` `ErrorCategory.userCancelled` when the person
    ///   declined every one (the session stays open); the login's error otherwise.
    @discardableResult
    public func requestNewReadPermissions(_ names: [String]) async throws -> PermissionRequestOutcome {
        try await requestPermissions(names.map(Permission.read), defaultAudience: .none)
    }

    /// Asks for publish permissions with a default audience (`auth_type=rerequest`,
    /// `default_audience`).
    ///
    /// - Returns: what was granted and declined.
    /// - Throws: `AuthError` `ErrorCategory.userCancelled` when the person
    ///   declined every one: an outcome for the app to handle (do not publish), not a failure
    ///   of the session, which stays open.
    @discardableResult
    public func requestNewPublishPermissions(
        _ names: [String], defaultAudience: DefaultAudience
    ) async throws
        -> PermissionRequestOutcome
    {
        try await requestPermissions(names.map(Permission.publish), defaultAudience: defaultAudience)
    }

    private func requestPermissions(
        _ permissions: [Permission], defaultAudience: DefaultAudience
    ) async throws
        -> PermissionRequestOutcome
    {
        guard let loginUI else {
            throw AuthError(
                category: .invalid, message: "This session has no login UI, so it cannot ask for permissions.",
                provider: .facebook)
        }
        let outcome = try await session.requestPermissions(
            permissions, defaultAudience: defaultAudience, loginUI: loginUI)
        if outcome.granted.isEmpty, !outcome.declined.isEmpty {
            throw AuthError(
                category: .userCancelled,
                message: "The person declined \(outcome.declined.sorted().joined(separator: ", ")). The session stays "
                    + "open; do what needed the permission only if they ask again.",
                loginFailedReason: .userDenied, recoveryTactic: RecoveryTactic.none, provider: .facebook,
                providerInfo: ["declined": .array(outcome.declined.sorted().map { .string($0) })])
        }
        return outcome
    }

    /// Reads the granted and declined permissions from `GET /me/permissions` and keeps them
    /// on the token (saved).
    @discardableResult
    public func refreshPermissions() async throws -> PermissionSet {
        let permissions = PermissionSet(graphPermissions: try await graph.withRecovery(nil).get("me/permissions"))
        if var token = await session.token {
            token.permissions = permissions
            try await session.updateToken(token)
        }
        return permissions
    }

    /// Revokes one permission (`DELETE /me/permissions/{name}`) and drops it from the token.
    public func revokePermission(_ name: String) async throws {
        let encoded = FormEncoding.escape(name)
        try await graph.withRecovery(nil).delete("me/permissions/\(encoded)")
        if var token = await session.token {
            token.permissions = PermissionSet(
                granted: token.permissions.granted.subtracting([name]), declined: token.permissions.declined)
            try await session.updateToken(token)
        }
    }

    // MARK: The token

    /// What `debug_token` says about the current token; its expiry and data-access expiry are
    /// kept on the token when they changed.
    public func introspectToken() async throws -> TokenIntrospection {
        guard let token = await session.token else { throw AuthError.sessionNotOpen(provider: .facebook) }
        let info = try await FacebookHTTP.debugToken(token.tokenString, provider: provider, transport: transport)
        if info.isValid,
            info.expirationDate != token.expirationDate
                || info.dataAccessExpirationDate != token.dataAccessExpirationDate, await session.state.isOpen
        {
            var updated = token
            updated.expirationDate = info.expirationDate
            updated.dataAccessExpirationDate = info.dataAccessExpirationDate ?? token.dataAccessExpirationDate
            try await session.updateToken(updated)
        }
        return info
    }

    /// What the last token extension attempt ended with.
    public var lastTokenExtension: TokenExtensionOutcome? { lifecycle.withLock { $0.lastExtension } }

    /// Extends the token when it is due, as the SDK did: only when it is older than
    /// ``extensionAge`` and no attempt was made in the last ``extensionRetryInterval``.
    ///
    /// With an app secret (server-side) this is `fb_exchange_token`; on the desktop it is
    /// `fb_extend_sso_token`. When Facebook does not extend the token (usual for a desktop
    /// app without a server) the outcome says so and the session carries on with its token.
    /// An error that invalidates the token closes the session.
    @discardableResult
    public func extendTokenIfNeeded(force: Bool = false) async -> TokenExtensionOutcome {
        guard await session.state.isOpen, let token = await session.token else {
            return .notDue("the session is not open")
        }
        let now = now()
        let due: Bool = lifecycle.withLock { state in
            if !force {
                guard now.timeIntervalSince(token.refreshDate) > extensionAge else { return false }
                if let last = state.lastExtensionAttempt, now.timeIntervalSince(last) < extensionRetryInterval {
                    return false
                }
            }
            state.lastExtensionAttempt = now
            return true
        }
        guard due else { return .notDue("the token was refreshed less than a day ago, or tried within the hour") }
        let outcome: TokenExtensionOutcome
        do {
            let extended = try await requestExtension(of: token)
            try await session.updateToken(extended)
            outcome = .extended(extended)
        } catch let error as AuthError where error.closesSession {
            await session.handle(error)
            outcome = .failed(error)
        } catch let error as AuthError
            where error.category == .retry || error.category == .server
            || error.category == .throttling
        {
            outcome = .failed(error)
        } catch let error as AuthError {
            outcome = .notAvailable(
                "Facebook did not extend the token (\(error.message)); desktop apps without a server usually "
                    + "cannot. The token keeps working until it expires, then the person logs in again.")
        } catch {
            outcome = .failed(
                AuthError(
                    category: .invalid, message: "The extended token could not be saved: \(error)",
                    provider: .facebook, underlyingError: SendableErrorBox(error)))
        }
        lifecycle.withLock { $0.lastExtension = outcome }
        return outcome
    }

    /// Asks Facebook for a longer-lived copy of `token`.
    func requestExtension(of token: AccessToken) async throws -> AccessToken {
        let answer: JSONValue
        if let secret = provider.appSecret {
            // A POST form, not a query: the app secret and the token never travel in a URL.
            answer = try await FacebookHTTP.send(
                .post, "oauth/access_token",
                parameters: [
                    ("grant_type", "fb_exchange_token"), ("client_id", provider.appID), ("client_secret", secret.value),
                    ("fb_exchange_token", token.tokenString),
                ], token: nil, provider: provider, transport: transport)
        } else {
            answer = try await FacebookHTTP.get(
                "oauth/access_token", query: [("grant_type", "fb_extend_sso_token"), ("client_id", provider.appID)],
                token: token.tokenString, provider: provider, transport: transport)
        }
        guard let string = answer["access_token"]?.stringValue, !string.isEmpty else {
            throw AuthError.unreadableGraphAnswer("token extension answer (it has no access_token)")
        }
        let issued = now()
        var extended = token
        extended.tokenString = string
        extended.refreshDate = issued
        if let at = answer["expires_at"]?.lenientInt {
            extended.expirationDate = at > 0 ? Date(timeIntervalSince1970: TimeInterval(at)) : nil
        } else if let seconds = answer["expires_in"]?.lenientInt {
            extended.expirationDate = seconds > 0 ? issued.addingTimeInterval(TimeInterval(seconds)) : nil
        }
        if let at = answer["data_access_expiration_time"]?.lenientInt, at > 0 {
            extended.dataAccessExpirationDate = Date(timeIntervalSince1970: TimeInterval(at))
        }
        return extended
    }

    /// The token to call with: refreshed first, once for every caller in this process and
    /// under the lock file across processes, when it expires within ``refreshLeeway``.
    ///
    /// When Facebook will not extend a token that has not expired yet, the token is used as
    /// it is (and not tried again for ``extensionRetryInterval``).
    public func validToken() async throws -> AccessToken {
        do {
            return try await session.freshToken(leeway: refreshLeeway) { [self] current in
                try await refreshExpiring(current)
            }
        } catch let notExtended as TokenNotExtended {
            return notExtended.token
        }
    }

    private struct TokenNotExtended: Error {
        let token: AccessToken
    }

    private func refreshExpiring(_ current: AccessToken) async throws -> AccessToken {
        let refresh: () async throws -> AccessToken = { [self] in
            // Another process may have refreshed it while this one waited for the lock.
            if let stored = try await session.store.load(session.key), !stored.needsLogin,
                !stored.token.isExpired(at: now(), leeway: refreshLeeway)
            {
                return stored.token
            }
            let attempt = now()
            let recent: Bool = lifecycle.withLock { state in
                if let last = state.lastExtensionAttempt, attempt.timeIntervalSince(last) < extensionRetryInterval {
                    return true
                }
                state.lastExtensionAttempt = attempt
                return false
            }
            if recent, !current.isExpired(at: attempt) { throw TokenNotExtended(token: current) }
            let extended: AccessToken
            do {
                extended = try await requestExtension(of: current)
            } catch let error as AuthError where !error.closesSession && !current.isExpired(at: attempt) {
                lifecycle.withLock {
                    $0.lastExtension = .notAvailable("Facebook did not refresh the expiring token: \(error.message)")
                }
                throw TokenNotExtended(token: current)
            }
            // Saved before it is used, and before the lock is released.
            try await session.store.save(StoredCredential(key: session.key, token: extended, savedAt: now()))
            lifecycle.withLock { $0.lastExtension = .extended(extended) }
            return extended
        }
        guard let refreshLock else { return try await refresh() }
        return try await refreshLock.withLock(refresh)
    }

    /// Reacts to a Graph error made with this session's token: one that invalidates the session
    /// closes it and clears the token (and observers get the error); 459 and the other errors
    /// the taxonomy keeps open change nothing.
    ///
    /// - Returns: whether the session was closed.
    @discardableResult
    public func handleGraphError(_ error: AuthError) async -> Bool { await session.handle(error) }

    // MARK: Login flows

    /// Facebook device login with the code shown on a terminal: the default for a terminal app.
    public static func deviceLogin(
        provider: FacebookProvider, transport: any HTTPTransport,
        presenter: any DeviceCodePresenter = TerminalDeviceCodePresenter(providerName: "Facebook"),
        clock: any Clock<Duration> = ContinuousClock()
    ) -> DeviceLoginFlow {
        DeviceLoginFlow(
            dialect: FacebookDeviceDialect(provider: provider, transport: transport), presenter: presenter,
            transport: transport, clock: clock)
    }

    /// Browser login with a loopback redirect and PKCE, for apps whose settings allow it.
    public static func browserLogin(
        provider: FacebookProvider, transport: any HTTPTransport, receiver: any RedirectReceiver,
        opener: any BrowserOpener = SystemBrowserOpener()
    ) -> BrowserLoginFlow {
        BrowserLoginFlow(
            dialect: FacebookBrowserDialect(provider: provider, transport: transport), receiver: receiver,
            opener: opener, transport: transport)
    }
}

/// What a token extension attempt ended with.
public enum TokenExtensionOutcome: Sendable, CustomStringConvertible {
    /// Extended; the session is `openTokenExtended` with this token (already saved).
    case extended(AccessToken)
    /// Not attempted: the token is young, an attempt was made recently, or the session is
    /// not open.
    case notDue(String)
    /// Facebook does not extend this token for this app (usual on a desktop without a
    /// server); the session carries on until the token expires.
    case notAvailable(String)
    /// The attempt failed; a failure that invalidates the token has closed the session.
    case failed(AuthError)

    public var description: String {
        switch self {
        case .extended(let token): "extended until \(token.expirationDate?.ISO8601Format() ?? "no expiry")"
        case .notDue(let why): "not due: \(why)"
        case .notAvailable(let why): "not available: \(why)"
        case .failed(let error): "failed: \(error.message)"
        }
    }
}

extension AuthError {
    /// A call that needs an open session was made on one that is not.
    static func sessionNotOpen(provider: ProviderID) -> AuthError {
        AuthError(
            category: .authenticationReopenSession,
            message: "The session is not open, so it has no token to use. Open it (log in) first.",
            recoveryTactic: .reauthenticate, closesSession: false, provider: provider)
    }
}

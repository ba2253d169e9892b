import Foundation
import Sesame

/// A person's Facebook session in an app: FBSession brought to Linux.
///
/// ```swift
/// let session = FacebookSession(
///     provider: facebook, transport: CurlTransport(), store: keyring,
///     loginUI: FacebookSession.deviceLogin(provider: facebook, transport: transport, presenter: codeDialog))
/// let changes = session.stateChanges()   // sessionStateChanged:, subscribed before opening
/// Task { for await change in changes { render(change) } }
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
/// The token lifecycle is the core `Session`'s (`Session.renewToken(isDue:renew:)`): this type
/// only supplies Facebook's hooks, the daily extension (``extendTokenIfNeeded(force:)``) and
/// the refresh of a token about to expire (``validToken()``). Both are single-flight twice
/// over: concurrent calls in this process wait on one renewal, and with
/// ``Configuration/refreshLocking`` set to a lock file, a process that waited for another one
/// finds that one's token in the store and uses it. The renewed token is saved once, before
/// it is used. Permission and expiry updates after a Graph call go through `Session.update(_:)`,
/// so they never overwrite a token renewed in the meantime.
///
/// Creating a session has no side effects: no lock file and no terminal output unless the
/// ``Configuration`` and `loginUI` ask for them. `SesameDesktop`'s `Desktop.facebook()` gives
/// the desktop defaults (device login on the terminal, a lock file per credential).
public final class FacebookSession: ProviderSession {
    /// The app.
    public let provider: FacebookProvider
    /// The state machine and the token.
    public let session: Session
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in (and grants more permissions); `nil`: only a stored token opens
    /// the session.
    public let loginUI: (any LoginUI)?
    /// Refresh, extension and locking settings.
    public let configuration: Configuration
    /// Recovers from Graph errors in ``graph``; `nil` leaves them to the caller.
    public let recovery: FacebookRecoveryProcessor?
    /// Paces ``graph``'s calls by the usage headers.
    public let governor: GraphUsageGovernor
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let extender: FacebookTokenExtender
    private var lifecycle: Locked<FacebookTokenExtender.Lifecycle> { extender.lifecycle }

    /// The tunable parts of a session. Every default is the Facebook SDK's, except the lock,
    /// which is off unless asked for (so that creating a session writes no file).
    public struct Configuration: Sendable {
        /// How renewals are kept apart from other processes using the same store: `RefreshLocking.none`
        /// by default; `SesameDesktop` passes a lock file per credential.
        public var refreshLocking: RefreshLocking
        /// A token that expires within this long is refreshed before use: five minutes by default.
        public var refreshLeeway: Duration
        /// Token extension is tried only for tokens older than this: the SDK's 24 hours by default.
        public var extensionAge: Duration
        /// Token extension is tried at most once in this long: the SDK's one hour by default.
        public var extensionRetryInterval: Duration

        /// Creates a configuration; see each property for its default.
        public init(
            refreshLocking: RefreshLocking = .none, refreshLeeway: Duration = .seconds(300),
            extensionAge: Duration = .seconds(86_400), extensionRetryInterval: Duration = .seconds(3_600)
        ) {
            self.refreshLocking = refreshLocking
            self.refreshLeeway = refreshLeeway
            self.extensionAge = extensionAge
            self.extensionRetryInterval = extensionRetryInterval
        }
    }

    /// Creates a session. Nothing is written or shown until the session is used.
    ///
    /// - Parameters:
    ///   - provider: the app.
    ///   - transport: what sends requests (`CurlTransport` on the desktop).
    ///   - store: where the token is kept (the keyring on the desktop).
    ///   - account: the name the token is stored under.
    ///   - loginUI: how the person logs in (``deviceLogin(provider:transport:presenter:clock:)``,
    ///     ``browserLogin(provider:transport:receiver:opener:)``); without one the session
    ///     opens only from a stored token.
    ///   - configuration: refresh, extension and locking settings (``Configuration``).
    ///   - recoveryDelegate: when given, ``graph`` recovers from errors through a
    ///     ``FacebookRecoveryProcessor`` with this delegate and `recoveryPolicy`.
    ///   - recoveryPolicy: how often and how long that recovery retries; unused without a
    ///     `recoveryDelegate`.
    ///   - governor: paces ``graph``'s calls by Facebook's usage headers.
    ///   - clock: what waits (back-off, pacing) are measured on.
    ///   - now: the wall clock.
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, store: any CredentialStore,
        account: String = "default", loginUI: (any LoginUI)? = nil, configuration: Configuration = Configuration(),
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil, recoveryPolicy: RecoveryPolicy = RecoveryPolicy(),
        governor: GraphUsageGovernor = GraphUsageGovernor(), clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.transport = transport
        let extender = FacebookTokenExtender(
            provider: provider, transport: transport, retryInterval: configuration.extensionRetryInterval.inSeconds,
            now: now)
        self.extender = extender
        // Facebook renews a token that still works (an extension); an expired one needs a login.
        let session = Session(
            provider: .facebook, appID: provider.appID, account: account, store: store,
            refreshLocking: configuration.refreshLocking,
            renewer: TokenRenewer(
                maximumLeeway: configuration.refreshLeeway.inSeconds, canRenew: { !$0.isExpired(at: $1) },
                renew: { try await extender.refreshExpiring($0) }),
            now: now)
        self.session = session
        self.loginUI = loginUI
        self.configuration = configuration
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

    // MARK: Opening and closing

    /// Opens the session, as `FBSession openActiveSessionWithReadPermissions:allowLoginUI:` did.
    ///
    /// A valid cached token for this app opens it with no UI (`createdTokenLoaded` → `open`).
    /// With no cached token and `allowLoginUI` false it stays `created` (check with
    /// ``state``). Otherwise the person logs in (``loginUI``) and it becomes `open`, or
    /// `closedLoginFailed` with the classified error, which is also thrown. An open session
    /// whose token is due for extension is extended afterwards, as the SDK did, through the
    /// core's locked renewal (one extension however many processes open at once).
    ///
    /// - Throws: also an `AuthError` when a login is needed and allowed but this session has
    ///   no ``loginUI``.
    @discardableResult
    public func openActiveSession(readPermissions: [String] = [], allowLoginUI: Bool) async throws -> SessionState {
        try await open(permissions: readPermissions.map(Permission.read), allowLoginUI: allowLoginUI)
    }

    /// Opens the session with any permissions: ``openActiveSession(readPermissions:allowLoginUI:)``
    /// in the spelling every provider's session shares.
    ///
    /// - Throws: what ``openActiveSession(readPermissions:allowLoginUI:)`` throws.
    @discardableResult
    public func open(permissions: [Permission] = [], allowLoginUI: Bool) async throws -> SessionState {
        let state = try await session.open(permissions: permissions, allowLoginUI: allowLoginUI, loginUI: loginUI)
        if allowLoginUI, loginUI == nil, !state.isOpen {
            throw AuthError(
                category: .invalid,
                message: "There is no valid stored Facebook token and this session has no login UI to get one. Pass "
                    + "loginUI: FacebookSession.deviceLogin(...) or .browserLogin(...) when creating it, or use "
                    + "SesameDesktop's Desktop.facebook().session(), which has one.", provider: .facebook)
        }
        if state.isOpen { _ = await extendTokenIfNeeded() }
        return await session.state
    }

    /// Logs the person out: with `revoke`, first deauthorizes the app on Facebook
    /// (`DELETE /me/permissions`), then closes the session and clears the stored token.
    ///
    /// The token revoked is the login as stored, read again under the lock first: another process
    /// may have renewed or replaced it since this session read it. A token Facebook already refuses
    /// needs no revoking. When the revoke cannot be made (no
    /// network, say), the token is cleared here all the same and the error is thrown, so the
    /// app can tell the person the app is still connected on Facebook.
    ///
    /// - Throws: `AuthError` when the revoke failed (the token is cleared here all the same);
    ///   `CredentialStoreError` when it cannot be removed from the store.
    public func logout(revoke: Bool = true) async throws {
        if revoke, let token = await session.tokenToRevoke() {
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
        try await requestPermissions(names.map(Permission.read), options: LoginRequest.Options())
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
        try await requestPermissions(
            names.map(Permission.publish), options: LoginRequest.Options(defaultAudience: defaultAudience))
    }

    /// Asks for more permissions, read or publish (publish ones with the default audience,
    /// `friends`): the spelling every provider's session shares.
    ///
    /// - Returns: what was granted and declined.
    /// - Throws: `AuthError` `ErrorCategory.userCancelled` when the person declined every one.
    @discardableResult
    public func requestPermissions(_ permissions: [Permission]) async throws -> PermissionRequestOutcome {
        try await requestPermissions(permissions, options: LoginRequest.Options())
    }

    private func requestPermissions(
        _ permissions: [Permission], options: LoginRequest.Options
    ) async throws
        -> PermissionRequestOutcome
    {
        guard let loginUI else {
            throw AuthError(
                category: .invalid, message: "This session has no login UI, so it cannot ask for permissions.",
                provider: .facebook)
        }
        let outcome = try await session.requestPermissions(
            permissions, options: options, loginUI: loginUI)
        if outcome.granted.isEmpty, !outcome.declined.isEmpty {
            throw AuthError(
                category: .userCancelled,
                message: "The person declined \(outcome.declined.sorted().joined(separator: ", ")). The session stays "
                    + "open; do what needed the permission only if they ask again.",
                loginFailedReason: .userDenied, recoveryTactic: RecoveryTactic.none, provider: .facebook,
                details: [DeclinedPermissions(outcome.declined.sorted())])
        }
        return outcome
    }

    /// Reads the granted and declined permissions from `GET /me/permissions` and keeps them
    /// on the token (saved).
    @discardableResult
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer;
    ///   `CredentialStoreError` when the updated token cannot be saved.
    public func refreshPermissions() async throws -> PermissionSet {
        let permissions = PermissionSet(graphPermissions: try await graph.withRecovery(nil).get("me/permissions"))
        // Applied to the token as it is now: a refresh during the call is kept.
        if await session.token != nil { try await session.update { $0.permissions = permissions } }
        return permissions
    }

    /// Revokes one permission (`DELETE /me/permissions/{name}`) and drops it from the token.
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer;
    ///   `CredentialStoreError` when the updated token cannot be saved.
    public func revokePermission(_ name: String) async throws {
        let encoded = FormEncoding.escape(name)
        try await graph.withRecovery(nil).delete("me/permissions/\(encoded)")
        if await session.token != nil {
            try await session.update {
                $0.permissions = PermissionSet(
                    granted: $0.permissions.granted.subtracting([name]), declined: $0.permissions.declined)
            }
        }
    }

    // MARK: The token

    /// What `debug_token` says about the current token; its expiry and data-access expiry are
    /// kept on the token when they changed.
    ///
    /// - Throws: `AuthError` when the session has no token or `debug_token` fails.
    public func introspectToken() async throws -> TokenIntrospection {
        guard let token = await session.token else { throw AuthError.sessionNotOpen(provider: .facebook) }
        let info = try await FacebookHTTP.debugToken(token.tokenString, provider: provider, transport: transport)
        if info.isValid, await session.state.isOpen {
            // Only the token that was introspected takes its dates; a newer one is left alone.
            try await session.update { current in
                guard current.tokenString == token.tokenString else { return }
                current.expirationDate = info.expirationDate
                current.dataAccessExpirationDate = info.dataAccessExpirationDate ?? current.dataAccessExpirationDate
                current.granularScopes = info.granularScopes
            }
        }
        return info
    }

    /// What the last token extension attempt ended with.
    public var lastTokenExtension: TokenExtensionOutcome? { lifecycle.withLock { $0.lastExtension } }

    /// Extends the token when it is due, as the SDK did: only when it is older than
    /// ``Configuration/extensionAge`` and no attempt was made here in the last
    /// ``Configuration/extensionRetryInterval``.
    ///
    /// With an app secret (server-side) this is `fb_exchange_token`; on the desktop it is
    /// `fb_extend_sso_token`. It runs through the core's locked renewal: a process that finds
    /// the token already extended by another one uses that token and sends nothing. When
    /// Facebook does not extend the token (usual for a desktop app without a server) the
    /// outcome says so and the session carries on with its token. An error that invalidates
    /// the token closes the session.
    @discardableResult
    public func extendTokenIfNeeded(force: Bool = false) async -> TokenExtensionOutcome {
        guard await session.state.isOpen, let token = await session.token else {
            return .notDue("the session is not open")
        }
        let now = self.now
        let age = configuration.extensionAge.inSeconds
        let isOld: @Sendable (AccessToken) -> Bool = { force || now().timeIntervalSince($0.refreshDate) > age }
        let due: Bool = lifecycle.withLock { state in
            let attempt = now()
            if !force {
                guard isOld(token) else { return false }
                if let last = state.lastExtensionAttempt,
                    attempt.timeIntervalSince(last) < configuration.extensionRetryInterval.inSeconds
                {
                    return false
                }
            }
            state.lastExtensionAttempt = attempt
            return true
        }
        guard due else { return .notDue("the token was refreshed less than a day ago, or tried within the hour") }
        let outcome: TokenExtensionOutcome
        do {
            switch try await session.renewToken(isDue: isOld, renew: { [extender] in try await extender.extend($0) }) {
            case .renewed(let extended), .renewedElsewhere(let extended): outcome = .extended(extended)
            case .unchanged: outcome = .notDue("the token is not due for extension")
            }
        } catch let error as AuthError
            where error.closesSession || error.category == .retry || error.category == .server
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

    /// Reacts to a Graph error made with this session's token: one that invalidates the session
    /// closes it and clears the token (and observers get the error); 459 and the other errors
    /// the taxonomy keeps open change nothing.
    ///
    /// - Returns: whether the session was closed.
    @discardableResult
    public func handleGraphError(_ error: AuthError) async -> Bool { await session.handle(error) }

    // MARK: Login flows

    /// Facebook device login, with the code shown by `presenter` (a GUI app's dialog, or
    /// `TerminalLoginPresenter` from SesameDesktop on a terminal).
    public static func deviceLogin(
        provider: FacebookProvider, transport: any HTTPTransport, presenter: any DeviceCodePresenter,
        clock: any Clock<Duration> = ContinuousClock()
    ) -> DeviceLoginFlow {
        DeviceLoginFlow(
            dialect: FacebookDeviceDialect(provider: provider, transport: transport), presenter: presenter,
            transport: transport, clock: clock)
    }

    /// Browser login with a loopback redirect and PKCE, for apps whose settings allow it; `opener`
    /// shows the sign-in page (a GUI app's web view, or `SystemBrowserOpener` from SesameDesktop).
    public static func browserLogin(
        provider: FacebookProvider, transport: any HTTPTransport, receiver: any RedirectReceiver,
        opener: any BrowserOpener
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

import Foundation

/// Where a ``Session`` is in its life, after the Facebook SDK's `FBSessionState`.
public enum SessionState: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// New; no token loaded.
    case created
    /// A valid cached token was found in the store; opening needs no UI.
    case createdTokenLoaded
    /// A login is under way.
    case opening
    /// Open with a token.
    case open
    /// Open, and the token was extended, refreshed or given new permissions.
    case openTokenExtended
    /// The login failed or was cancelled.
    case closedLoginFailed
    /// Closed by the app or by an error that invalidated the session.
    case closed

    /// Whether calls can be made (`open` or `openTokenExtended`).
    public var isOpen: Bool { self == .open || self == .openTokenExtended }

    /// Whether the session is closed (`closed` or `closedLoginFailed`).
    public var isClosed: Bool { self == .closed || self == .closedLoginFailed }

    /// The one table that decides which transitions are legal.
    ///
    /// It is FBSession's, with one addition: a closed session may be opened again (from the
    /// store or by a new login) instead of being thrown away, which suits a long-lived actor.
    public static let transitions: [SessionState: Set<SessionState>] = [
        .created: [.createdTokenLoaded, .opening],
        .createdTokenLoaded: [.open, .opening, .closed],
        .opening: [.open, .closedLoginFailed],
        .open: [.openTokenExtended, .closed],
        .openTokenExtended: [.openTokenExtended, .closed],
        .closedLoginFailed: [.createdTokenLoaded, .opening],
        .closed: [.createdTokenLoaded, .opening],
    ]

    /// Whether moving from `self` to `next` is legal.
    public func canTransition(to next: SessionState) -> Bool { Self.transitions[self]?.contains(next) ?? false }

    public var description: String { rawValue }
}

/// One change of a session's state: what every observer receives, in order (the seed's
/// `sessionStateChanged:state:error:`).
public struct SessionStateChange: Sendable, CustomStringConvertible {
    /// The new state.
    public var state: SessionState
    /// The state before.
    public var previousState: SessionState
    /// The error that caused the change, if one did.
    public var error: AuthError?

    /// Creates a change.
    public init(state: SessionState, previousState: SessionState, error: AuthError? = nil) {
        self.state = state
        self.previousState = previousState
        self.error = error
    }

    public var description: String {
        "\(previousState) → \(state)" + (error.map { " (\($0.category): \($0.message))" } ?? "")
    }
}

/// A transition the table does not allow.
public struct SessionTransitionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The state the session was in.
    public var from: SessionState
    /// The state that was asked for.
    public var to: SessionState

    /// Creates an error.
    public init(from: SessionState, to: SessionState) {
        self.from = from
        self.to = to
    }

    public var description: String {
        "A session cannot go from '\(from)' to '\(to)'"
            + (from == .opening ? ": a login is already in progress; wait for it to finish." : ".")
    }
}

/// What a login is asked to obtain.
public struct LoginRequest: Sendable, Hashable {
    /// The provider.
    public var provider: ProviderID
    /// The app.
    public var appID: String
    /// The permissions to ask for.
    public var permissions: [Permission]
    /// The audience for publish permissions.
    public var defaultAudience: DefaultAudience
    /// Whether this asks an already logged-in person again (Facebook's `auth_type=rerequest`).
    public var isRerequest: Bool
    /// The token the session already has, for a re-request.
    public var currentToken: AccessToken?

    /// Creates a request.
    public init(
        provider: ProviderID, appID: String, permissions: [Permission] = [], defaultAudience: DefaultAudience = .none,
        isRerequest: Bool = false, currentToken: AccessToken? = nil
    ) {
        self.provider = provider
        self.appID = appID
        self.permissions = permissions
        self.defaultAudience = defaultAudience
        self.isRerequest = isRerequest
        self.currentToken = currentToken
    }
}

/// Whatever shows the person a login and returns a token: a browser flow, a device flow, a
/// prompt for an existing token, or a test double.
///
/// A session calls it only when opening needs UI and the app allowed it.
public protocol LoginUI: Sendable {
    /// Runs a login and returns the token, or throws a classified ``AuthError`` (the person
    /// declining is ``ErrorCategory/userCancelled``).
    func logIn(_ request: LoginRequest) async throws -> AccessToken
}

/// One account's session with one provider: a state machine after FBSession.
///
/// ```swift
/// let session = Session(provider: "facebook", appID: "1234", store: store)
/// for await change in await session.stateChanges() { ... }    // in another task
/// try await session.open(permissions: [.read("email")], allowLoginUI: true, loginUI: deviceLogin)
/// ```
///
/// - Opening with a valid cached token goes `createdTokenLoaded` → `open` and never calls the
///   login UI. With no token and no UI allowed, the session stays where it is.
/// - ``close()`` keeps the stored token; ``closeAndClearTokenInformation(error:)`` deletes it.
/// - ``handle(_:)`` closes and clears on an error that invalidates the session.
/// - ``freshToken(leeway:refresh:)`` joins concurrent callers onto one refresh.
public actor Session {
    /// Where the session's token is kept.
    public nonisolated let key: CredentialKey
    /// The store.
    public nonisolated let store: any CredentialStore

    /// The current state.
    public private(set) var state: SessionState = .created
    /// The current token; `nil` until one is loaded or obtained.
    public private(set) var token: AccessToken?

    private var observers: [UUID: AsyncStream<SessionStateChange>.Continuation] = [:]
    private var refreshTask: Task<AccessToken, any Error>?
    private let now: @Sendable () -> Date

    /// Creates a session for `account` of `appID` on `provider`, kept in `store`.
    ///
    /// - Parameters:
    ///   - provider: The provider the session signs in with.
    ///   - appID: The app (client) id on that provider.
    ///   - account: The account name under which the token is stored.
    ///   - store: Where the token is loaded from and saved to.
    ///   - now: The wall clock, injectable for tests of expiry.
    public init(
        provider: ProviderID, appID: String, account: String = "default", store: any CredentialStore,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.key = CredentialKey(provider: provider, appID: appID, account: account)
        self.store = store
        self.now = now
    }

    deinit {
        for continuation in observers.values { continuation.finish() }
    }

    // MARK: Observing

    /// A stream of every state change from now on, in order. Each call makes a new observer;
    /// the stream ends when the observer stops iterating or the session goes away.
    public func stateChanges() -> AsyncStream<SessionStateChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionStateChange.self, bufferingPolicy: .unbounded)
        let id = UUID()
        observers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeObserver(id) }
        }
        return stream
    }

    private func removeObserver(_ id: UUID) { observers[id] = nil }

    private func transition(to next: SessionState, error: AuthError? = nil) throws {
        guard state.canTransition(to: next) else { throw SessionTransitionError(from: state, to: next) }
        let change = SessionStateChange(state: next, previousState: state, error: error)
        state = next
        for continuation in observers.values { continuation.yield(change) }
    }

    // MARK: Opening

    /// Loads a valid cached token, if there is one, moving to `createdTokenLoaded`.
    ///
    /// - Returns: whether a token was loaded.
    @discardableResult public func loadCachedToken() async throws -> Bool {
        if state == .createdTokenLoaded { return true }
        guard state == .created || state.isClosed else { return false }
        guard let stored = try await store.load(key), !stored.needsLogin,
            !stored.token.isExpired(at: now())
        else { return false }
        token = stored.token
        try transition(to: .createdTokenLoaded)
        return true
    }

    /// Opens the session: from a valid cached token without UI, or else, when `allowLoginUI`
    /// is true, through `loginUI`.
    ///
    /// - Returns: the state reached: open, or unchanged when no token was cached and no UI was
    ///   allowed.
    /// - Throws: the login's ``AuthError`` (the session is then `closedLoginFailed`), a store
    ///   failure, `CancellationError`, or ``SessionTransitionError`` when a login is already in
    ///   progress.
    @discardableResult
    public func open(
        permissions: [Permission] = [], defaultAudience: DefaultAudience = .none, allowLoginUI: Bool,
        loginUI: (any LoginUI)? = nil
    ) async throws -> SessionState {
        if state.isOpen { return state }
        if state == .opening { throw SessionTransitionError(from: .opening, to: .opening) }
        if try await loadCachedToken() {
            try transition(to: .open)
            return state
        }
        guard allowLoginUI, let loginUI else { return state }
        return try await runLogin(
            LoginRequest(
                provider: key.provider, appID: key.appID, permissions: permissions, defaultAudience: defaultAudience),
            with: loginUI)
    }

    private func runLogin(_ request: LoginRequest, with loginUI: any LoginUI) async throws -> SessionState {
        try transition(to: .opening)
        do {
            let newToken = try await loginUI.logIn(request)
            try Task.checkCancellation()
            try await store.save(StoredCredential(key: key, token: newToken, savedAt: now()))
            token = newToken
            try transition(to: .open)
            return state
        } catch let error as AuthError {
            try transition(to: .closedLoginFailed, error: error)
            throw error
        } catch is CancellationError {
            try transition(
                to: .closedLoginFailed,
                error: AuthError(
                    category: .userCancelled, message: "The login was cancelled.", loginFailedReason: .userCancelled,
                    provider: key.provider))
            throw CancellationError()
        } catch let error as CredentialStoreError {
            let wrapped = AuthError(
                category: .invalid,
                message: "The login succeeded but the token could not be saved: \(error.message)",
                shouldNotifyUser: true, userMessage: error.message, recoveryTactic: .showMessage,
                provider: key.provider, underlyingError: error)
            try transition(to: .closedLoginFailed, error: wrapped)
            throw wrapped
        } catch {
            let wrapped = AuthError(
                category: .providerOther, message: "The login failed: \(error)", loginFailedReason: .providerError,
                provider: key.provider, underlyingError: SendableErrorBox(error))
            try transition(to: .closedLoginFailed, error: wrapped)
            throw wrapped
        }
    }

    /// Asks an open session's person for more permissions (FBSession's
    /// `requestNewReadPermissions:` / `requestNewPublishPermissions:defaultAudience:`).
    ///
    /// On success the token is replaced (saved first) and the session moves to
    /// `openTokenExtended`. A cancelled or failed request leaves the session open and throws.
    ///
    /// - Returns: which of the requested permissions were granted and which declined.
    public func requestPermissions(
        _ permissions: [Permission], defaultAudience: DefaultAudience = .none, loginUI: any LoginUI
    ) async throws -> PermissionRequestOutcome {
        guard state.isOpen, let current = token else {
            throw AuthError(
                category: .invalid,
                message: "Permissions can only be requested on an open session; this one is '\(state)'. Open it first.",
                recoveryTactic: .reauthenticate, provider: key.provider)
        }
        let request = LoginRequest(
            provider: key.provider, appID: key.appID, permissions: permissions, defaultAudience: defaultAudience,
            isRerequest: true, currentToken: current)
        let newToken = try await loginUI.logIn(request)
        try await updateToken(newToken)
        return newToken.permissions.outcome(of: permissions)
    }

    // MARK: The token

    /// Replaces the token of an open session (extended, refreshed, new permissions): saves it
    /// first, then moves to `openTokenExtended`.
    ///
    /// - Throws: the store's error, in which case nothing changes.
    public func updateToken(_ newToken: AccessToken) async throws {
        guard state.isOpen else { throw SessionTransitionError(from: state, to: .openTokenExtended) }
        try await store.save(StoredCredential(key: key, token: newToken, savedAt: now()))
        token = newToken
        try transition(to: .openTokenExtended)
    }

    /// The token of an open session, refreshed first when it expires within `leeway` seconds.
    ///
    /// Concurrent callers wait on one in-flight refresh. The refreshed token is saved before it
    /// is returned. A failed refresh leaves the stored token as it was; if its error closes the
    /// session, the session is closed and cleared through ``handle(_:)``.
    public func freshToken(
        leeway: TimeInterval = 60, refresh: @escaping @Sendable (AccessToken) async throws -> AccessToken
    ) async throws -> AccessToken {
        guard state.isOpen, let current = token else {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "The session is '\(state)', not open, so it has no token to use. Log in first.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: key.provider)
        }
        guard current.isExpired(at: now(), leeway: leeway) else { return current }
        if let refreshTask { return try await refreshTask.value }
        // Saved inside the shared task, so that callers who joined it get the token only once it
        // is stored, as the first caller does.
        let task = Task {
            let refreshed = try await refresh(current)
            try await self.updateToken(refreshed)
            return refreshed
        }
        refreshTask = task
        defer { refreshTask = nil }
        do {
            return try await task.value
        } catch let error as AuthError {
            await handle(error)
            throw error
        }
    }

    // MARK: Closing

    /// Closes the session and keeps the stored token, so the next open needs no UI.
    public func close() {
        guard state.isOpen || state == .createdTokenLoaded else { return }
        try? transition(to: .closed)
    }

    /// Closes the session and deletes its stored token.
    ///
    /// - Parameter error: the error that caused it, passed on to observers.
    /// - Throws: the store's error when the token could not be deleted; the session is closed
    ///   all the same.
    public func closeAndClearTokenInformation(error: AuthError? = nil) async throws {
        token = nil
        if state.isOpen || state == .createdTokenLoaded { try? transition(to: .closed, error: error) }
        try await store.delete(key)
    }

    /// Reacts to an error from a call made with this session: one that invalidates the session
    /// (``AuthError/closesSession``) closes it and clears the stored token, as FBSession did.
    ///
    /// - Returns: whether the session was closed.
    @discardableResult public func handle(_ error: AuthError) async -> Bool {
        guard error.closesSession, state.isOpen || state == .createdTokenLoaded else { return false }
        try? await closeAndClearTokenInformation(error: error)
        return true
    }
}

/// Wraps an error that is not known to be `Sendable` so it can travel inside an ``AuthError``.
public struct SendableErrorBox: Error, Sendable, CustomStringConvertible {
    /// The wrapped error's description.
    public let description: String
    /// Wraps `error`.
    public init(_ error: any Error) { description = String(describing: error) }
}

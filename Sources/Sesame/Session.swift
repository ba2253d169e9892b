import Foundation

/// One account's session with one provider: a state machine after FBSession.
///
/// ```swift
/// let session = Session(provider: "facebook", appID: "1234", store: store)
/// let changes = session.stateChanges()    // subscribed now: no transition is missed
/// Task { for await change in changes { print(change) } }
/// try await session.open(permissions: [.read("email")], allowLoginUI: true, loginUI: deviceLogin)
/// ```
///
/// - Opening with a valid cached token goes `createdTokenLoaded` → `open` and never calls the
///   login UI. With no token and no UI allowed, the session stays where it is. Concurrent
///   opens share one read of the store.
/// - ``close()`` keeps the stored token; ``closeAndClearTokenInformation(error:)`` deletes it.
/// - ``handle(_:)`` closes and clears on an error that invalidates the session.
///
/// ## The token lifecycle
///
/// The session owns every change of its token, so that a provider only supplies hooks:
///
/// - ``renewToken(isDue:renew:)`` (and ``freshToken(leeway:refresh:)`` on top of it) takes the
///   cross-process lock (``refreshLocking``), reads the store again, asks `isDue` whether the
///   token there still needs renewing (another process may have done it while this one
///   waited), calls the provider's `renew` hook only then, saves the result once, and hands it
///   to every caller in this process that is waiting for the same renewal.
/// - ``update(_:)`` changes fields of the token (permissions, expiry) after a network call:
///   the change is applied to the token as it is then, never to a copy read before the call,
///   so a renewal that finished in between is kept.
///
/// Renewals, updates and ``updateToken(_:)`` run one at a time per session, and the renewal
/// and the update under the lock, so no two of them overwrite each other.
///
/// The shared read, renewal and writes run in tasks the session starts, and those tasks prefer
/// the task executor their caller prefers (SE-0417), if any: a program that runs its work on an
/// executor of its own keeps the session's work there too.
public actor Session {
    /// Where the session's token is kept.
    public nonisolated let key: CredentialKey
    /// The store.
    public nonisolated let store: any CredentialStore
    /// How renewals are kept apart from other processes using the same store.
    public nonisolated let refreshLocking: RefreshLocking

    /// The current state.
    public private(set) var state: SessionState = .created {
        didSet { publishOpenToken() }
    }
    /// The current token; `nil` until one is loaded or obtained.
    public private(set) var token: AccessToken? {
        didSet { publishOpenToken() }
    }
    /// ``token`` while the session is open, `nil` otherwise, kept in step with ``state`` and
    /// ``token`` (set with them, on the actor): ``renewToken(isDue:renew:)`` answers a token that
    /// is not due from it without a hop to the actor, so callers that only read the token do
    /// not take turns on it.
    private let openToken = Locked<AccessToken?>(nil)

    private func publishOpenToken() {
        let open = state.isOpen ? token : nil
        openToken.withLock { $0 = open }
    }

    /// Every observer's continuation; a lock rather than the actor so that ``stateChanges()``
    /// registers synchronously.
    private let observers = Locked<[UUID: AsyncStream<SessionStateChange>.Continuation]>([:])
    private var renewal: Task<TokenRenewal, any Error>?
    private var loading: Task<Bool, any Error>?
    /// The last of the token writes queued so far; each waits for the one before.
    private var lastWrite: Task<Void, Never>?
    /// Token writes asked for and not finished (see ``pendingWriteCount``).
    private let pendingWrites = Locked(0)
    /// Why the login the last read found cannot be used, when it cannot.
    private var unusableStoredLogin: NeedsLoginReason?
    private let now: @Sendable () -> Date

    /// How the provider renews the session's logins; the session decides when.
    public nonisolated let renewer: TokenRenewer

    /// Creates a session for `account` of `appID` on `provider`, kept in `store`.
    ///
    /// - Parameters:
    ///   - provider: The provider the session signs in with.
    ///   - issuer: Where the login is valid, for providers with many issuers (an OpenID
    ///     provider's issuer URL): part of the key, so that a login is never used at another.
    ///   - appID: The app (client) id on that provider.
    ///   - account: The account name under which the token is stored.
    ///   - store: Where the token is loaded from and saved to.
    ///   - refreshLocking: How renewals are kept apart from other processes; none by default
    ///     (right for a store only this process uses). Desktop apps pass
    ///     ``RefreshLocking/directory(_:)`` with ``RefreshLock/defaultDirectory(environment:)``.
    ///   - renewer: How the provider renews a login (``TokenRenewer/refreshToken(maximumLeeway:_:)``
    ///     for OAuth 2.0); ``TokenRenewer/none`` for a login that lasts as long as its token.
    ///   - now: The wall clock, injectable for tests of expiry.
    public init(
        provider: ProviderID, issuer: String? = nil, appID: String, account: String = "default",
        store: any CredentialStore, refreshLocking: RefreshLocking = .none, renewer: TokenRenewer = .none,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.key = CredentialKey(provider: provider, issuer: issuer, appID: appID, account: account)
        self.store = store
        self.refreshLocking = refreshLocking
        self.renewer = renewer
        self.now = now
    }

    deinit {
        let continuations = observers.withLock { observers in
            defer { observers.removeAll() }
            return Array(observers.values)
        }
        for continuation in continuations { continuation.finish() }
    }

    // MARK: Observing

    /// A stream of every state change from now on, in order. Each call makes a new observer,
    /// registered before this returns, so a subscription made before ``open(permissions:options:allowLoginUI:loginUI:)``
    /// sees every transition of that open. The stream ends when the observer stops iterating
    /// or the session goes away.
    public nonisolated func stateChanges() -> AsyncStream<SessionStateChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionStateChange.self, bufferingPolicy: .unbounded)
        let id = UUID()
        observers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    private func transition(to next: SessionState, error: AuthError? = nil) throws {
        guard state.canTransition(to: next) else { throw SessionTransitionError(from: state, to: next) }
        let change = SessionStateChange(state: next, previousState: state, error: error)
        state = next
        // Yielded outside the lock: a stream that ends re-enters it from `onTermination`.
        for continuation in observers.withLock({ Array($0.values) }) { continuation.yield(change) }
    }

    // MARK: Opening

    /// Loads a usable cached token, if there is one, moving to `createdTokenLoaded`: a valid
    /// token, or an expired one that ``renewer`` can renew (``condition(of:)``). Concurrent
    /// callers share one read of the store.
    ///
    /// - Returns: whether a token was loaded.
    /// - Throws: the store's ``CredentialStoreError`` when it could not be read (the session is
    ///   unchanged), or ``SessionTransitionError`` if the state moved illegally meanwhile.
    @discardableResult public func loadCachedToken() async throws -> Bool {
        if let loading { return try await loading.value }
        if state == .createdTokenLoaded { return true }
        guard state == .created || state.isClosed else { return false }
        let task = Task(executorPreference: currentTaskExecutorPreference) { try await self.loadFromStore() }
        loading = task
        defer { loading = nil }
        return try await task.value
    }

    private func loadFromStore() async throws -> Bool {
        let stored = try await store.load(key)
        // The state may have moved while the store answered (a login finished, say).
        guard state == .created || state.isClosed else { return state == .createdTokenLoaded }
        unusableStoredLogin = nil
        guard let stored else { return false }
        let condition = condition(of: stored)
        SesameLogging.log(.debug, "stored login read", ["login": .login(key), "condition": condition.logValue])
        if case .needsLogin(let reason) = condition {
            unusableStoredLogin = reason
            return false
        }
        token = stored.token
        try transition(to: .createdTokenLoaded)
        return true
    }

    /// What can be done with `credential` now: the one decision, made from the whole stored login
    /// (its token's expiry, its refresh token and that one's expiry, a refusal recorded before)
    /// by ``renewer``.
    public nonisolated func condition(of credential: StoredCredential) -> LoginCondition {
        renewer.condition(of: credential, at: now())
    }

    /// Opens the session: from a usable cached token without UI, or else, when `allowLoginUI`
    /// is true, through `loginUI`. Concurrent opens share one read of the store and all return
    /// the state it led to.
    ///
    /// A cached token that has expired, or is about to, is renewed first (``validToken()``),
    /// still without UI. A login that cannot be renewed (the provider refused its refresh
    /// token) stays stored, marked as needing a login; with `allowLoginUI` the person logs in,
    /// otherwise its ``AuthError`` is thrown.
    ///
    /// - Returns: the state reached: open, or unchanged when nothing was stored and no UI was
    ///   allowed.
    /// - Throws: the login's or the renewal's ``AuthError`` (after a failed login the session is
    ///   `closedLoginFailed`); without UI, ``AuthError/needsLogin(_:reason:)`` for a stored login
    ///   that cannot be used or renewed; a store failure, `CancellationError`, or
    ///   ``SessionTransitionError`` when a login is already in progress.
    @discardableResult
    public func open(
        permissions: [Permission] = [], options: LoginRequest.Options = LoginRequest.Options(), allowLoginUI: Bool,
        loginUI: (any LoginUI)? = nil
    ) async throws -> SessionState {
        if state.isOpen { return state }
        if state == .opening { throw SessionTransitionError(from: .opening, to: .opening) }
        if try await loadCachedToken() {
            // Another open sharing the same read may have moved on already.
            if state == .createdTokenLoaded { try transition(to: .open) }
            do {
                if state.isOpen, let token, renewer.isDue(token, at: now()) { _ = try await validToken() }
                if state.isOpen { return state }
            } catch let error as AuthError where error.category == .authenticationReopenSession {
                guard allowLoginUI, loginUI != nil else { throw error }
            } catch {
                // Not renewed now (no network, say): a token that still works is used as it is.
                guard state.isOpen, let token, !token.isExpired(at: now()) else { throw error }
                return state
            }
        }
        if state.isOpen { return state }
        guard allowLoginUI, let loginUI else {
            // A login is stored but cannot be used: say so, rather than that there is none.
            if let reason = unusableStoredLogin { throw AuthError.needsLogin(key, reason: reason) }
            return state
        }
        return try await runLogin(
            LoginRequest(
                provider: key.provider, appID: key.appID, permissions: permissions, options: options),
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
    /// `requestNewReadPermissions:` / `requestNewPublishPermissions:defaultAudience:`; the
    /// audience is a provider option in `options`).
    ///
    /// On success the token is replaced (saved first) and the session moves to
    /// `openTokenExtended`. A cancelled or failed request leaves the session open and throws.
    ///
    /// - Returns: which of the requested permissions were granted and which declined.
    /// - Throws: ``AuthError`` when the session is not open or from the login (the person
    ///   declining is ``ErrorCategory/userCancelled``); `CancellationError`; the store's
    ///   ``CredentialStoreError`` when the new token could not be saved (the old one stays).
    public func requestPermissions(
        _ permissions: [Permission], options: LoginRequest.Options = LoginRequest.Options(), loginUI: any LoginUI
    ) async throws -> PermissionRequestOutcome {
        guard state.isOpen, let current = token else {
            throw AuthError(
                category: .invalid,
                message: "Permissions can only be requested on an open session; this one is '\(state)'. Open it first.",
                recoveryTactic: .reauthenticate, provider: key.provider)
        }
        let request = LoginRequest(
            provider: key.provider, appID: key.appID, permissions: permissions, options: options, isRerequest: true,
            currentToken: current)
        let newToken = try await loginUI.logIn(request)
        try await updateToken(newToken)
        return newToken.permissions.outcome(of: permissions)
    }

    // MARK: The token

    /// Replaces the token of an open session with a whole new one (a new login's, say): saves
    /// it first, then moves to `openTokenExtended`.
    ///
    /// To change fields of the current token after a network call, use ``update(_:)``, which
    /// cannot overwrite a token renewed in the meantime.
    ///
    /// - Throws: the store's error, in which case nothing changes.
    public func updateToken(_ newToken: AccessToken) async throws {
        guard state.isOpen else { throw SessionTransitionError(from: state, to: .openTokenExtended) }
        _ = try await serialized {
            try await self.saveAndPublish(newToken)
            return newToken
        }
    }

    /// Changes fields of the open session's token (a read-modify-write): `change` is applied
    /// to the token as it is when the change runs, read again from the store under the
    /// refresh lock, never to a copy taken before a network call, so a renewal that finished
    /// in the meantime (here or in another process) is kept. The result is saved once and the
    /// session moves to `openTokenExtended`; a change that changes nothing saves nothing.
    ///
    /// ```swift
    /// let granted = try await fetchPermissions(token)        // the network call
    /// try await session.update { $0.permissions = granted }  // applied to the token as it is now
    /// ```
    ///
    /// - Returns: the token after the change.
    /// - Throws: ``SessionTransitionError`` when the session is not open, the store's or the
    ///   lock's error (nothing changes then), or what `change` throws.
    @discardableResult
    public func update(_ change: @escaping @Sendable (inout AccessToken) throws -> Void) async throws -> AccessToken {
        guard state.isOpen, token != nil else { throw SessionTransitionError(from: state, to: .openTokenExtended) }
        return try await serialized {
            try await self.refreshLocking.withLock(for: self.key) {
                try await self.store.withRenewalClaim(for: self.key) { try await self.applyUpdate(change, $0) }
            }
        }
    }

    private func applyUpdate(
        _ change: @Sendable (inout AccessToken) throws -> Void, _ claim: RenewalClaim
    ) async throws -> AccessToken {
        let base = try currentToken(from: claim)
        var updated = base
        try change(&updated)
        if updated != base {
            guard try await store.save(StoredCredential(key: key, token: updated, savedAt: now()), fencedBy: claim)
            else {
                throw CredentialStoreError(
                    kind: .ioFailure,
                    message: "The login for \(key) changed in the store while this change to it was made (another "
                        + "process renewed it or logged in); the change was not saved. Try again.")
            }
            try publish(updated)
        } else if updated != token {
            try publish(updated)
        }
        return updated
    }

    /// The token of an open session, good to use now: renewed first through ``renewer`` when it
    /// is due (``TokenRenewer/isDue(_:at:)``), once for every caller in this process and, with
    /// ``refreshLocking``, once across processes.
    ///
    /// A token that is due but cannot be renewed is returned while it still works. A login whose
    /// renewal the provider refuses is marked as needing a login (it stays stored) and the
    /// session is closed; a renewal that fails for another reason (no network) leaves everything
    /// as it was.
    ///
    /// - Throws: ``AuthError`` when the session is not open, the login needs a new login
    ///   (``AuthError/needsLogin(_:reason:)``) or the renewal failed; the store's and the lock's
    ///   errors.
    public nonisolated func validToken() async throws -> AccessToken {
        try await validToken(handedExpiry: nil)
    }

    /// ``validToken()`` for a caller that hands on another token of the login than the access
    /// token, one whose expiry `handedExpiry` reads (an OpenID ID token, which a provider may
    /// let expire before the access token): renewed when either is due
    /// (``TokenRenewer/isDue(_:at:handedExpiry:)``), through the same renewal.
    ///
    /// With `validFor`, a token that expires sooner than that is due too (`sesame token --min-valid`):
    /// the caller checks what it gets, since even a fresh token may live less.
    ///
    /// - Throws: what ``validToken()`` throws.
    public nonisolated func validToken(
        handedExpiry: (@Sendable (AccessToken) -> Date?)?, validFor: Duration = .zero
    ) async throws -> AccessToken {
        let renewer = self.renewer
        let now = self.now
        let key = self.key
        let lasting = validFor.inSeconds
        // A token that cannot be renewed is carried on with while it works, then refused below.
        let token: AccessToken
        do {
            token = try await renewToken(isDue: {
                let handed = handedExpiry?($0)
                return renewer.isDue($0, at: now(), handedExpiry: handed) || $0.isExpired(at: now(), leeway: lasting)
                    || handed.map { $0.timeIntervalSince(now()) <= lasting } == true
            }) { current in
                guard renewer.canRenew(current, now()) else { return nil }
                return try await renewer.renew(current)
            }.token
        } catch let error as AuthError where error.category != .authenticationReopenSession {
            // Not renewed now (no network, a server error): a token that still works (long enough) is used.
            guard let current = openToken.withLock({ $0 }), !current.isExpired(at: now(), leeway: lasting) else {
                throw error
            }
            return current
        }
        guard !token.isExpired(at: now()) else {
            let ended = token.refreshToken != nil && !token.hasUsableRefreshToken(at: now())
            let error = AuthError.needsLogin(key, reason: ended ? .refreshTokenExpired : .expired)
            await closeUnusable(error)
            throw error
        }
        return token
    }

    /// Renews the token now because the provider refused `refused` before its expiry (a 401 from
    /// an API): unless the session's token is already another one (renewed meanwhile, here or
    /// in another process), in which case that one is returned and nothing is sent.
    ///
    /// - Throws: what ``validToken()`` throws; ``AuthError/needsLogin(_:reason:)`` when the token
    ///   cannot be renewed.
    public nonisolated func renewRefused(_ refused: AccessToken) async throws -> AccessToken {
        let renewer = self.renewer
        let now = self.now
        return try await renewToken(isDue: { $0.tokenString == refused.tokenString }) { current in
            guard renewer.canRenew(current, now()) else { return nil }
            return try await renewer.renew(current)
        }.token
    }

    /// Records on the stored login that the provider refused `refused` before its expiry (a 401
    /// that `sesame status` or an API call saw): the stored token is marked expired now, so that
    /// ``condition(of:)`` finds it due and its next use renews it, in this process or another,
    /// instead of handing the dead token out until its stated expiry. Under the refresh lock;
    /// nothing changes when the store holds another token by then (renewed meanwhile), or one
    /// that has already expired. The session itself needs not be open.
    ///
    /// - Throws: the store's and the lock's errors.
    public nonisolated func recordRefusal(of refused: AccessToken) async throws {
        let (key, store, now) = (self.key, self.store, self.now())
        // Through a claim and a fenced save, as a renewal: on a fleet, a renewal in flight on another
        // machine is waited for (its new token is then not the refused one), never overwritten.
        try await refreshLocking.withLock(for: key) {
            try await store.withRenewalClaim(for: key) { claim in
                guard var stored = claim.stored, stored.token.tokenString == refused.tokenString,
                    !stored.token.isExpired(at: now)
                else { return }
                stored.token.expirationDate = now
                _ = try await store.save(stored, fencedBy: claim)
                SesameLogging.log(.info, "token refused by the provider; recorded as expired", ["login": .login(key)])
            }
        }
    }

    /// The token of an open session, renewed first when it expires within `leeway`, with
    /// `refresh` instead of ``renewer``: ``renewToken(isDue:renew:)`` with expiry as the test.
    ///
    /// - Parameters:
    ///   - leeway: a token that expires within this long is refreshed.
    ///   - refresh: a new token for the one given, or `nil` to carry on with the one given.
    /// - Throws: what ``renewToken(isDue:renew:)`` throws.
    public func freshToken(
        leeway: Duration = .seconds(60), refresh: @escaping @Sendable (AccessToken) async throws -> AccessToken?
    ) async throws -> AccessToken {
        let now = self.now
        let seconds = leeway.inSeconds
        return try await renewToken(isDue: { $0.isExpired(at: now(), leeway: seconds) }, renew: refresh).token
    }

    /// Renews the open session's token when `isDue` says so: the one code path for refreshes
    /// and extensions of every provider.
    ///
    /// In order: `isDue` is asked about the token in memory (not due: it is returned as it
    /// is, without waiting for the actor, so that callers who only need the token never take
    /// turns on it); the cross-process lock (``refreshLocking``) is taken; the store is read again, and
    /// its token (when it is the same person's) is the one to renew; `isDue` is asked again,
    /// about that token, since another process may have renewed it while this one waited;
    /// only then is `renew` called; its token is saved once, fenced by what the store read
    /// (``CredentialStore/save(_:fencedBy:)``: a renewal whose lock was lost while it waited on
    /// the provider never overwrites a newer login, and uses that one), becomes the session's (state
    /// `openTokenExtended`) and is handed to every caller in this process that joined the
    /// same renewal.
    ///
    /// - Parameters:
    ///   - isDue: whether a token still needs renewing (expires soon, is older than a day, …).
    ///   - renew: the provider's hook: a new token for the one given, or `nil` to carry on
    ///     with the one given. Called under the lock; it must not call back into the session.
    /// - Returns: what happened and the token to use.
    /// - Throws: ``AuthError`` when the session is not open, from `renew` (an error that closes
    ///   the session closes and clears it through ``handle(_:)``), or when another process found
    ///   the credential refused; the store's and the lock's errors.
    public nonisolated func renewToken(
        isDue: @escaping @Sendable (AccessToken) -> Bool,
        renew: @escaping @Sendable (AccessToken) async throws -> AccessToken?
    ) async throws -> TokenRenewal {
        // The common case, a token in memory that is not due, needs nothing of the actor: as if
        // the call had run on it just before or just after whatever it is doing now.
        if let current = openToken.withLock({ $0 }), !isDue(current) {
            SesameLogging.log(.trace, "token not due", ["login": .login(key)])
            return .unchanged(current)
        }
        return try await renewIfDue(isDue: isDue, renew: renew)
    }

    private func renewIfDue(
        isDue: @escaping @Sendable (AccessToken) -> Bool,
        renew: @escaping @Sendable (AccessToken) async throws -> AccessToken?
    ) async throws -> TokenRenewal {
        guard state.isOpen, let current = token else {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "The session is '\(state)', not open, so it has no token to use. Log in first.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: key.provider)
        }
        guard isDue(current) else {
            SesameLogging.log(.trace, "token not due", ["login": .login(key)])
            return .unchanged(current)
        }
        if let renewal {
            SesameLogging.log(.debug, "token due; waiting for the renewal in flight", ["login": .login(key)])
            return try await renewal.value
        }
        SesameLogging.log(
            .debug, "token due; renewing", ["login": .login(key), "expired": .flag(current.isExpired(at: now()))])
        let waitStart = now()
        let task = Task(executorPreference: currentTaskExecutorPreference) {
            try await self.serialized {
                try await self.refreshLocking.withLock(for: self.key) {
                    try await self.renewFromStore(isDue: isDue, renew: renew, since: waitStart)
                }
            }
        }
        renewal = task
        defer { renewal = nil }
        do {
            return try await task.value
        } catch let error as AuthError where error.category == .authenticationReopenSession {
            // The login cannot be renewed: it stays stored (marked under the lock), the session closes.
            closeUnusable(error)
            throw error
        }
    }

    /// Closes an open session whose login can no longer be used; the stored login stays.
    func closeUnusable(_ error: AuthError? = nil) {
        guard state.isOpen else { return }
        try? transition(to: .closed, error: error)
    }

    /// Run under the lock: reads the store again (a claim, ``CredentialStore/withRenewalClaim(for:_:)``,
    /// which waits for a renewal in flight elsewhere), renews what is still due, saves once, fenced
    /// by the claim.
    ///
    /// A renewal the provider refuses may have been caused by a sibling that renewed meanwhile
    /// without this lock (another machine, a program with a lock of its own) and rotated the
    /// refresh token: the store is read again, and a newer login there is adopted. Only
    /// otherwise is the stored login marked as needing a login, kept, never deleted. A renewal
    /// whose fenced save finds the login changed since the claim (its lock was lost, and another
    /// renewal or a new login came first) adopts the stored login instead of overwriting it.
    /// A passing failure is recorded beside the lock (a lock file's, or a service's), and one recorded
    /// since `waitStart` (while this renewal waited for the lock) is thrown rather than met again
    /// (`RenewalFailureRecord.swift`).
    private func renewFromStore(
        isDue: @escaping @Sendable (AccessToken) -> Bool,
        renew: @escaping @Sendable (AccessToken) async throws -> AccessToken?, since waitStart: Date
    ) async throws -> TokenRenewal {
        try await store.withRenewalClaim(for: key) { claim in
            SesameLogging.log(
                .debug, "renewal claimed; stored login read again",
                ["login": .login(self.key), "store": .type(of: self.store), "found": .flag(claim.stored != nil)])
            return try await self.renewClaimed(claim, isDue: isDue, renew: renew, since: waitStart)
        }
    }

    private func renewClaimed(
        _ claim: RenewalClaim, isDue: @Sendable (AccessToken) -> Bool,
        renew: @Sendable (AccessToken) async throws -> AccessToken?, since waitStart: Date
    ) async throws -> TokenRenewal {
        let base = try currentToken(from: claim)
        if isDue(base) {
            if let failure = await refreshLocking.recordedFailure(for: key, since: waitStart) { throw failure }
            let renewed: AccessToken?
            do {
                renewed = try await Self.redactingSecrets(of: base) { try await renew(base) }
            } catch let failure as RenewalKeepingRotation {
                // The provider rotated the refresh token: keep the new one, whatever else failed.
                let kept = StoredCredential(key: key, token: failure.kept, savedAt: now())
                if try await store.save(kept, fencedBy: claim) { token = failure.kept }
                SesameLogging.log(
                    .info, "renewal answer refused; its rotated refresh token kept",
                    ["login": .login(key), "error": .error(failure.error)])
                throw failure.error
            } catch let error as AuthError where error.category == .authenticationReopenSession {
                let stored = try await store.load(key)
                if let stored, !stored.needsLogin, stored.token.userID == base.userID,
                    stored.token.tokenString != base.tokenString
                {
                    SesameLogging.log(
                        .info, "renewal refused; a newer login saved meanwhile adopted",
                        ["login": .login(key), "error": .error(error)])
                    try publish(stored.token)
                    return .renewedElsewhere(stored.token)
                }
                if var stored, stored.token == base, !stored.needsLogin {
                    stored.needsLogin = true
                    _ = try await store.save(stored, fencedBy: claim)
                }
                SesameLogging.log(
                    .info, "renewal refused; the login is kept, marked as needing a new login",
                    ["login": .login(key), "error": .error(error)])
                throw error
            } catch let error as AuthError where [.retry, .server, .throttling].contains(error.category) {
                await refreshLocking.recordFailure(error, for: key, at: now())
                throw error
            }
            if let renewed {
                guard try await store.save(StoredCredential(key: key, token: renewed, savedAt: now()), fencedBy: claim)
                else {
                    SesameLogging.log(
                        .info, "renewal fenced out: the stored login changed since the claim; adopting it",
                        ["login": .login(key)])
                    return try await adoptStoredAfterFence()
                }
                SesameLogging.log(.info, "token renewed and saved", ["login": .login(key)])
                try publish(renewed)
                return .renewed(renewed)
            }
        }
        guard base != token else {
            SesameLogging.log(.debug, "nothing to renew after the claim; token kept", ["login": .login(key)])
            return .unchanged(base)
        }
        SesameLogging.log(.info, "token renewed elsewhere while waiting; adopted", ["login": .login(key)])
        try publish(base)
        return .renewedElsewhere(base)
    }

    /// What `body` returns; its errors with the secrets of `token` (the access and refresh
    /// tokens that a renewal sends) replaced wherever the provider echoed them back, in an
    /// `error_description` or a claim, so that no message ever prints them.
    private static func redactingSecrets<T>(
        of token: AccessToken, _ body: () async throws -> T
    ) async throws -> T {
        let secrets = [token.tokenString] + (token.refreshToken.map { [$0] } ?? [])
        do {
            return try await body()
        } catch let error as AuthError {
            throw error.redacting(secrets)
        } catch let failure as RenewalKeepingRotation {
            let kept = [failure.kept.tokenString] + (failure.kept.refreshToken.map { [$0] } ?? [])
            throw RenewalKeepingRotation(kept: failure.kept, error: failure.error.redacting(secrets + kept))
        }
    }

    /// The token to build on: the stored one `claim` read when it is this person's (another
    /// process may have renewed or changed it), else the one in memory.
    private func currentToken(from claim: RenewalClaim) throws -> AccessToken {
        guard state.isOpen, let current = token else {
            throw SessionTransitionError(from: state, to: .openTokenExtended)
        }
        guard let stored = claim.stored, stored.token.userID == current.userID else { return current }
        if stored.needsLogin { throw AuthError.needsLogin(key, reason: .refused) }
        return stored.token
    }

    /// After a renewal's fenced save found the stored login changed since its claim: the stored
    /// login now, adopted when it is this person's and usable. The renewed token is dropped; the
    /// login in the store is the one every process uses.
    private func adoptStoredAfterFence() async throws -> TokenRenewal {
        guard let stored = try await store.load(key), !stored.needsLogin, stored.token.userID == token?.userID else {
            throw AuthError.needsLogin(key, reason: .refused)
        }
        try publish(stored.token)
        return .renewedElsewhere(stored.token)
    }

    private func saveAndPublish(_ newToken: AccessToken) async throws {
        try await store.save(StoredCredential(key: key, token: newToken, savedAt: now()))
        try publish(newToken)
    }

    private func publish(_ newToken: AccessToken) throws {
        guard state.isOpen else { throw SessionTransitionError(from: state, to: .openTokenExtended) }
        token = newToken
        try transition(to: .openTokenExtended)
    }

    /// How many token writes (renewals, updates, ``updateToken(_:)``) have reached the session
    /// and not finished, the one running included: for tests that hold one write and need to
    /// know that another one is queued behind it.
    package nonisolated var pendingWriteCount: Int { pendingWrites.withLock { $0 } }

    /// Runs `body` after every token write queued before it, so writes never interleave.
    private func serialized<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = lastWrite
        let executor = currentTaskExecutorPreference
        let pendingWrites = self.pendingWrites
        pendingWrites.withLock { $0 += 1 }
        let task = Task(executorPreference: executor) {
            defer { pendingWrites.withLock { $0 -= 1 } }
            await previous?.value
            return try await body()
        }
        lastWrite = Task(executorPreference: executor) { _ = try? await task.value }
        return try await task.value
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

    /// The login a logout revokes: the one stored now, read under the cross-process lock (another
    /// process may have renewed or replaced it since this session read it), else the token in memory.
    package func tokenToRevoke() async -> AccessToken? {
        let (key, store) = (self.key, self.store)
        return (try? await refreshLocking.withLock(for: key) { try await store.load(key) })?.token ?? token
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

/// What ``Session/renewToken(isDue:renew:)`` did.
public enum TokenRenewal: Sendable, Hashable {
    /// The provider's hook made this token; it was saved once and is the session's now.
    case renewed(AccessToken)
    /// Another process renewed (or changed) the token while this one waited for the lock; the
    /// stored token is the session's now, and nothing was sent.
    case renewedElsewhere(AccessToken)
    /// Nothing was due, or the hook declined; the session carries on with this token.
    case unchanged(AccessToken)

    /// The token to use.
    public var token: AccessToken {
        switch self {
        case .renewed(let token), .renewedElsewhere(let token), .unchanged(let token): token
        }
    }
}

/// Wraps an error that is not known to be `Sendable` so it can travel inside an ``AuthError``.
public struct SendableErrorBox: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The wrapped error's description.
    public let description: String
    /// The wrapped error's ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }
    /// Wraps `error`.
    public init(_ error: any Error) { description = String(describing: error) }
}

import Foundation

/// The session API every provider's session offers, with the same names and shapes: open (with
/// permissions or scopes, `allowLoginUI`), close, close and clear, request more permissions, and
/// a valid token.
///
/// ```swift
/// func signIn(_ session: some ProviderSession) async throws -> String {
///     try await session.open(scopes: ["openid", "email"], allowLoginUI: true)
///     return try await session.validToken().tokenString
/// }
/// ```
///
/// A provider's session type (`FacebookSession`, `OIDCSession`, `GitHubSession`, or one written
/// in another package) holds a core ``Session`` and its login UI; everything else has a default
/// here, built on ``Session``, which owns the token's whole lifecycle. Provider extras (the Graph
/// client, GitHub's REST client, Facebook's `openActiveSession(readPermissions:allowLoginUI:)`)
/// are the types' own.
public protocol ProviderSession: Sendable {
    /// The core session: the state machine, the token and its renewal.
    var session: Session { get }
    /// How the person logs in (and grants more permissions); `nil`: the session opens only from
    /// a stored login.
    var loginUI: (any LoginUI)? { get }

    /// Opens the session: from a usable stored login without UI (renewing it first when it
    /// expired and can be renewed), else, when `allowLoginUI` is true, through ``loginUI``.
    ///
    /// - Returns: the state reached; unchanged when nothing usable was stored and no UI was
    ///   allowed.
    /// - Throws: ``AuthError`` from the login or the renewal (a stored login that needs a new
    ///   login, when no UI is allowed); ``CredentialStoreError`` when the store fails.
    @discardableResult
    func open(permissions: [Permission], allowLoginUI: Bool) async throws -> SessionState

    /// Asks the person for more permissions (scopes) on an open session, through ``loginUI``.
    ///
    /// - Returns: which were granted and which declined.
    /// - Throws: ``AuthError`` when the session is not open, has no login UI, or the login failed.
    @discardableResult
    func requestPermissions(_ permissions: [Permission]) async throws -> PermissionRequestOutcome

    /// A token good to use now, renewed first when it is due (``Session/validToken()``).
    ///
    /// - Throws: ``AuthError`` when there is no usable login or its renewal failed;
    ///   ``CredentialStoreError`` when the store fails.
    func validToken() async throws -> AccessToken
}

extension ProviderSession {
    public func open(permissions: [Permission] = [], allowLoginUI: Bool) async throws -> SessionState {
        try await session.open(permissions: permissions, allowLoginUI: allowLoginUI, loginUI: loginUI)
    }

    /// ``open(permissions:allowLoginUI:)`` with OAuth scopes (read permissions).
    ///
    /// - Throws: what ``open(permissions:allowLoginUI:)`` throws.
    @discardableResult
    public func open(scopes: [String], allowLoginUI: Bool) async throws -> SessionState {
        try await open(permissions: scopes.map(Permission.read), allowLoginUI: allowLoginUI)
    }

    public func requestPermissions(_ permissions: [Permission]) async throws -> PermissionRequestOutcome {
        guard let loginUI else {
            throw AuthError(
                category: .invalid,
                message: "This '\(session.key.provider)' session has no login UI, so it cannot ask for permissions; "
                    + "create it with one.", provider: session.key.provider)
        }
        return try await session.requestPermissions(permissions, loginUI: loginUI)
    }

    public func validToken() async throws -> AccessToken { try await session.validToken() }

    /// Closes the session and keeps the stored login, so the next open needs no UI.
    public func close() async { await session.close() }

    /// Closes the session and deletes its stored login.
    ///
    /// - Throws: ``CredentialStoreError`` when the stored login cannot be removed.
    public func closeAndClearTokenInformation() async throws { try await session.closeAndClearTokenInformation() }

    /// Where the login is kept.
    public var key: CredentialKey { session.key }
    /// The current state.
    public var state: SessionState { get async { await session.state } }
    /// The current token, if any.
    public var token: AccessToken? { get async { await session.token } }

    /// Every state change from now on; the observer is registered before this returns, so
    /// subscribe before opening.
    public func stateChanges() -> AsyncStream<SessionStateChange> { session.stateChanges() }
}

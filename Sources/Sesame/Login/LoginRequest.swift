import Foundation

/// What a login is asked to obtain.
public struct LoginRequest: Sendable, Hashable {
    /// The provider.
    public var provider: ProviderID
    /// The app.
    public var appID: String
    /// The permissions to ask for.
    public var permissions: [Permission]
    /// The provider's own settings for this login (Facebook's default audience, say), which
    /// the provider's module reads and writes through typed accessors.
    public var options: Options
    /// Whether this asks for more permissions on a session that is already open
    /// (``Session/requestPermissions(_:options:loginUI:)``).
    ///
    /// Kept in the core because asking an open session's person again is part of the session
    /// model every provider shares; each provider's login says it in its own words (Facebook's
    /// `auth_type=rerequest`, for example), and one without such a notion ignores it.
    public var isRerequest: Bool
    /// The token the session already has, for a re-request.
    public var currentToken: AccessToken?

    /// Creates a request.
    public init(
        provider: ProviderID, appID: String, permissions: [Permission] = [], options: Options = Options(),
        isRerequest: Bool = false, currentToken: AccessToken? = nil
    ) {
        self.provider = provider
        self.appID = appID
        self.permissions = permissions
        self.options = options
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
    ///
    /// - Throws: ``AuthError`` for a login that failed or was declined; `CancellationError` when
    ///   the task is cancelled.
    func logIn(_ request: LoginRequest) async throws -> AccessToken
}

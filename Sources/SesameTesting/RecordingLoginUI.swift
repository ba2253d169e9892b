import Foundation
import Sesame

/// A `LoginUI` double that counts its calls and answers from a closure, so a test can prove
/// that a session opened from its cache without UI, or drive a login to any outcome.
public final class RecordingLoginUI: LoginUI {
    private let handler: @Sendable (LoginRequest) async throws -> AccessToken
    private let recorded = Locked<[LoginRequest]>([])

    /// Answers each login with `handler`.
    public init(_ handler: @escaping @Sendable (LoginRequest) async throws -> AccessToken) {
        self.handler = handler
    }

    /// Grants every requested permission with a token made from `tokenString`.
    public convenience init(
        grantingToken tokenString: String, userID: String = "100001", expiresIn: TimeInterval = 3600
    ) {
        self.init { request in
            var granted = request.currentToken?.permissions.granted ?? []
            granted.formUnion(request.permissions.map(\.name))
            return AccessToken(
                tokenString: tokenString, provider: request.provider, appID: request.appID, userID: userID,
                permissions: PermissionSet(granted: granted),
                expirationDate: Date().addingTimeInterval(expiresIn))
        }
    }

    /// Fails every login with `error`.
    public convenience init(failingWith error: AuthError) {
        self.init { _ in throw error }
    }

    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        recorded.withLock { $0.append(request) }
        return try await handler(request)
    }

    /// How many times the login UI was shown.
    public var callCount: Int { recorded.withLock { $0.count } }

    /// The requests it was shown with, in order.
    public var requests: [LoginRequest] { recorded.withLock { $0 } }
}

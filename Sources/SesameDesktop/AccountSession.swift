import Foundation
import Sesame

/// One account's session as the generic commands use it.
public protocol AccountSession: Sendable {
    /// Where its token is kept.
    var key: CredentialKey { get }
    /// Opens it from the store without UI; `false` when there is no usable stored login.
    ///
    /// - Throws: `CredentialStoreError` when the store cannot be read; the provider's `AuthError`
    ///   when reopening fails.
    func open() async throws -> Bool
    /// What can be done with `credential` (this account's stored login) now: the core's one
    /// decision (`Session.condition(of:)`).
    func condition(of credential: StoredCredential) -> LoginCondition
    /// A token good to use now, refreshed first when needed.
    ///
    /// - Throws: `AuthError` when there is no usable token or its refresh failed;
    ///   `CredentialStoreError` when the store cannot be read or written.
    func validToken() async throws -> AccessToken
    /// ``validToken()`` for a caller that hands on another token of the login, one whose expiry
    /// `handedExpiry` reads (an OpenID ID token, for kubectl): renewed when either is due
    /// (`Session.validToken(handedExpiry:validFor:)`); with `validFor`, renewed too when it would
    /// expire sooner than that (`sesame token --min-valid`).
    ///
    /// - Throws: what ``validToken()`` throws.
    func validToken(handedExpiry: (@Sendable (AccessToken) -> Date?)?, validFor: Duration) async throws -> AccessToken
    /// Records on the stored login that the provider refused `token` (what a status check saw),
    /// so that its next use renews it (`Session.recordRefusal(of:)`).
    ///
    /// - Throws: the store's and the lock's errors.
    func recordRefusal(of token: AccessToken) async throws
    /// The token's user, when the session is open.
    var userID: String? { get async }
    /// Logs out: revokes at the provider when `revoke` is true (and the provider can), then
    /// deletes the stored login.
    ///
    /// - Returns: a note about the revocation for the person ("its tokens were revoked"), or nil.
    /// - Throws: ``RevocationFailed`` when the login was removed here but revoking failed; the
    ///   store's error when it could not be removed.
    func logOut(revoke: Bool) async throws -> String?
    /// The permissions granted and declined, read from the provider.
    ///
    /// - Throws: `AuthError` from the provider; `PermissionsUnsupported` for a provider without
    ///   permissions.
    func listPermissions() async throws -> PermissionSet
    /// Asks the person for more permissions, with the provider's options.
    ///
    /// - Throws: `AuthError` from the provider or the login; `PermissionsUnsupported` for a
    ///   provider without permissions.
    func requestPermissions(_ names: [String], options: [String: String]) async throws -> PermissionRequestOutcome
    /// Gives up one permission.
    ///
    /// - Throws: `AuthError` from the provider; `PermissionsUnsupported` for a provider without
    ///   permissions.
    func revokePermission(_ name: String) async throws
    /// The last rate-limit usage seen, to keep for `sesame status`.
    var lastUsage: JSONValue? { get }
    /// What to tell the person about `token` on standard error, if anything (a token that
    /// expires soon and cannot be renewed).
    func warning(for token: AccessToken) -> String?
}

extension AccountSession {
    /// ``validToken()``, for a session that does not hand on another token: `handedExpiry` and
    /// `validFor` are not read. A session over the core's `Session` renews for them
    /// (``ProviderAccountSession``).
    public func validToken(
        handedExpiry: (@Sendable (AccessToken) -> Date?)?, validFor: Duration
    ) async throws -> AccessToken {
        try await validToken()
    }
    /// Records nothing: a session that does not say how leaves a refused token to expire.
    /// ``ProviderAccountSession`` records it through the core's `Session.recordRefusal(of:)`.
    public func recordRefusal(of token: AccessToken) async throws {}
    public var lastUsage: JSONValue? { nil }
    public func warning(for token: AccessToken) -> String? { nil }
    public func listPermissions() async throws -> PermissionSet { throw PermissionsUnsupported() }
    public func requestPermissions(
        _ names: [String], options: [String: String]
    ) async throws -> PermissionRequestOutcome { throw PermissionsUnsupported() }
    public func revokePermission(_ name: String) async throws { throw PermissionsUnsupported() }
}

/// An ``AccountSession`` over a provider's session (`ProviderSession`): everything but logging out
/// and permissions comes from the core's session, so a plug-in writes only what its provider does
/// differently.
public protocol ProviderAccountSession: AccountSession {
    /// The provider's session type.
    associatedtype Wrapped: ProviderSession
    /// The provider's session for this account.
    var providerSession: Wrapped { get }
}

extension ProviderAccountSession {
    public var key: CredentialKey { providerSession.key }
    public var userID: String? { get async { await providerSession.token?.userID } }
    public func open() async throws -> Bool {
        try await providerSession.open(permissions: [], allowLoginUI: false).isOpen
    }
    public func condition(of credential: StoredCredential) -> LoginCondition {
        providerSession.session.condition(of: credential)
    }
    public func warning(for token: AccessToken) -> String? {
        providerSession.session.renewer.expiryWarning(for: token, at: Date())
    }
    public func validToken() async throws -> AccessToken { try await providerSession.validToken() }
    public func validToken(
        handedExpiry: (@Sendable (AccessToken) -> Date?)?, validFor: Duration
    ) async throws -> AccessToken {
        try await providerSession.session.validToken(handedExpiry: handedExpiry, validFor: validFor)
    }
    public func recordRefusal(of token: AccessToken) async throws {
        try await providerSession.session.recordRefusal(of: token)
    }
}

/// A provider's session whose logout says whether it revoked the tokens (`OAuth2Session.logOut(revoke:)`):
/// the described plug-in's and OpenID's.
package struct RevokingAccountSession<Wrapped: ProviderSession>: ProviderAccountSession {
    package var providerSession: Wrapped
    /// What the person can do when revoking fails ("remove the app in your Dropbox account's settings").
    var advice: String
    /// Why the provider cannot revoke, when it has nowhere to: a logout asked to revoke then throws
    /// it as ``RevocationFailed``, so that `--revoke` does not pass. `nil`: such a logout says nothing.
    var unrevoked: (any Error & Sendable)?
    /// Logs out, revoking when asked; whether the tokens were revoked.
    var revoking: @Sendable (_ revoke: Bool) async throws -> Bool

    /// The session of `providerSession`, logged out by `revoking`.
    package init(
        _ providerSession: Wrapped, advice: String, unrevoked: (any Error & Sendable)? = nil,
        revoking: @escaping @Sendable (_ revoke: Bool) async throws -> Bool
    ) {
        self.providerSession = providerSession
        self.advice = advice
        self.unrevoked = unrevoked
        self.revoking = revoking
    }

    package func logOut(revoke: Bool) async throws -> String? {
        var revoked = false
        try await RevocationFailed.loggingOut(revoke: revoke, advice: advice) { revoked = try await revoking(revoke) }
        if revoke, let unrevoked { throw RevocationFailed(underlying: unrevoked, advice: advice) }
        return revoked ? "its tokens were revoked" : nil
    }
}

/// A provider whose permissions are chosen at login only.
public struct PermissionsUnsupported: Error, Sendable, CustomStringConvertible, LocalizedError {
    public init() {}
    public var description: String { "This provider's permissions are chosen when logging in." }
    /// The same sentence as ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }
}

/// The login was removed here, but revoking it at the provider failed.
public struct RevocationFailed: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// Why revoking failed.
    public var underlying: any Error & Sendable
    /// What the person can do instead ("remove it in Facebook's settings").
    public var advice: String

    /// Creates the error.
    public init(underlying: any Error & Sendable, advice: String) {
        self.underlying = underlying
        self.advice = advice
    }

    public var description: String { "revoking failed (\(underlying)); \(advice)" }

    /// The whole sentence, ``description`` included: that the login was removed here but not
    /// revoked, why, and what to do instead. What `localizedDescription` returns.
    public var errorDescription: String? { "The login was removed here, but \(description)." }

    /// Runs a provider's logout: a store error (the login could not be removed) passes through;
    /// any other error, when `revoke` was asked for, means the login is gone here but the
    /// revocation failed.
    ///
    /// - Throws: the `CredentialStoreError` `body` throws; for any other error, `RevocationFailed`
    ///   with `advice` when `revoke` was asked for, the error itself otherwise.
    public static func loggingOut(
        revoke: Bool, advice: String, _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch let error as CredentialStoreError {
            throw error
        } catch  where revoke {
            throw RevocationFailed(underlying: SendableErrorBox(error), advice: advice)
        }
    }
}

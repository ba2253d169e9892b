import Foundation

/// How a provider renews its logins: the provider says how, and whether a login can be renewed
/// at all; the core (``Session``) decides when, for every provider alike.
///
/// ```swift
/// // An OAuth 2.0 provider: the refresh token grant, renewed a quarter of the token's lifetime
/// // (at most a minute) before it expires, and after it expired while the refresh token lasts.
/// let renewer = TokenRenewer.refreshToken(maximumLeeway: 60) { token in
///     try await refreshGrant(token)
/// }
/// let session = Session(provider: "example", appID: "desktop", store: store, renewer: renewer)
/// ```
///
/// The decision is made from the whole stored login (``condition(of:at:)``): the access token's
/// expiry, whether there is a refresh token and when it expires itself, and whether the login was
/// refused before. ``Session`` makes it when it loads a login, before it hands out a token, and
/// `sesame status` shows it; no provider decides expiry again.
public struct TokenRenewer: Sendable {
    /// The most a token is renewed before its expiry: a token is due a quarter of its lifetime
    /// before it expires, but never earlier than this.
    public var maximumLeeway: TimeInterval
    /// Whether `token` can be renewed at `now`: an expired access token with a working refresh
    /// token can; an expired token with nothing to renew it cannot.
    public var canRenew: @Sendable (_ token: AccessToken, _ now: Date) -> Bool
    /// The renewal itself, run under the core's lock: a new token for the one given, or `nil` to
    /// carry on with the one given (a provider that declines to renew a token that still works).
    /// An ``AuthError`` of category ``ErrorCategory/authenticationReopenSession`` means the login
    /// cannot be renewed any more (a refused refresh token).
    public var renew: @Sendable (AccessToken) async throws -> AccessToken?

    /// Creates a renewer.
    ///
    /// - Parameters:
    ///   - maximumLeeway: the most a token is renewed before its expiry, in seconds.
    ///   - canRenew: whether a token can be renewed at a date.
    ///   - renew: the provider's renewal call.
    public init(
        maximumLeeway: TimeInterval,
        canRenew: @escaping @Sendable (_ token: AccessToken, _ now: Date) -> Bool,
        renew: @escaping @Sendable (AccessToken) async throws -> AccessToken?
    ) {
        self.maximumLeeway = maximumLeeway
        self.canRenew = canRenew
        self.renew = renew
    }

    /// The OAuth 2.0 refresh token grant (RFC 6749 §6): a login can be renewed while it has a
    /// refresh token whose own expiry (``AccessToken/refreshTokenExpirationDate``), if any, has
    /// not passed.
    ///
    /// - Parameters:
    ///   - maximumLeeway: the most a token is renewed before its expiry, in seconds.
    ///   - refresh: the grant: the new token for the one given.
    public static func refreshToken(
        maximumLeeway: TimeInterval = 60, _ refresh: @escaping @Sendable (AccessToken) async throws -> AccessToken
    ) -> TokenRenewer {
        TokenRenewer(maximumLeeway: maximumLeeway, canRenew: { $0.hasUsableRefreshToken(at: $1) }, renew: refresh)
    }

    /// The renewer of a provider that cannot renew: a login lasts as long as its token.
    public static let none = TokenRenewer(maximumLeeway: 0, canRenew: { _, _ in false }, renew: { _ in nil })

    /// How long before its expiry `token` is due: a quarter of its lifetime (counted from its
    /// ``AccessToken/refreshDate``), at most ``maximumLeeway``, so that a token issued for a
    /// minute is not due the moment it arrives.
    public func leeway(for token: AccessToken) -> TimeInterval {
        guard let expiry = token.expirationDate else { return maximumLeeway }
        let lifetime = expiry.timeIntervalSince(token.refreshDate)
        guard lifetime > 0 else { return 0 }
        return min(maximumLeeway, lifetime / 4)
    }

    /// Whether `token` should be renewed at `now`: it has expired or will within its leeway.
    public func isDue(_ token: AccessToken, at now: Date) -> Bool {
        token.isExpired(at: now, leeway: leeway(for: token))
    }

    /// Whether `token` should be renewed at `now` for a caller that hands on another token of the
    /// login, one that expires at `handedExpiry` (an OpenID ID token, for kubectl): when the access
    /// token is due, or that one is, by the same rule (``isDue(_:at:)``, its lifetime counted from
    /// the login's ``AccessToken/refreshDate``).
    public func isDue(_ token: AccessToken, at now: Date, handedExpiry: Date?) -> Bool {
        if isDue(token, at: now) { return true }
        guard let handedExpiry else { return false }
        var handed = token
        handed.expirationDate = handedExpiry
        return isDue(handed, at: now)
    }

    /// A sentence for standard error when `token` still works but is due and cannot be renewed
    /// (the provider gave no refresh token); `nil` when there is nothing to say. It names the
    /// provider and the time left, never the token.
    public func expiryWarning(for token: AccessToken, at now: Date) -> String? {
        guard let expiry = token.expirationDate, isDue(token, at: now), !canRenew(token, now) else { return nil }
        let left = expiry.timeIntervalSince(now)
        guard left > 0 else { return nil }
        return "Warning: the token of '\(token.provider)' expires in \(Int(left.rounded(.down))) s and cannot be "
            + "renewed; log in again when it has expired."
    }

    /// What can be done with a stored login at `now`: use it, renew it, or log in again.
    public func condition(of credential: StoredCredential, at now: Date) -> LoginCondition {
        let token = credential.token
        if credential.needsLogin { return .needsLogin(.refused) }
        guard isDue(token, at: now) else { return .valid }
        if canRenew(token, now) { return .renewable(expired: token.isExpired(at: now)) }
        guard token.isExpired(at: now) else { return .valid }
        if token.refreshToken != nil, let end = token.refreshTokenExpirationDate, end <= now {
            return .needsLogin(.refreshTokenExpired)
        }
        return .needsLogin(.expired)
    }
}

/// What can be done with a stored login now: the one decision the core makes for every
/// provider (``TokenRenewer/condition(of:at:)``), shown by `sesame status` as it is.
public enum LoginCondition: Sendable, Hashable {
    /// Its token can be used as it is.
    case valid
    /// Its token has expired (or is about to) and will be renewed when it is next used, without
    /// the person: a refresh token, or the provider's own renewal.
    case renewable(expired: Bool)
    /// It cannot be used or renewed: a new login is needed. The login stays stored.
    case needsLogin(NeedsLoginReason)
}

/// Why a stored login needs a new login.
public enum NeedsLoginReason: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The token expired and nothing can renew it (no refresh token; a provider that cannot
    /// renew an expired token).
    case expired
    /// The refresh token expired too.
    case refreshTokenExpired = "refresh_token_expired"
    /// The provider refused to renew it (`invalid_grant`, a revoked app) and it was marked so.
    case refused

    /// The reason as a sentence.
    public var description: String {
        switch self {
        case .expired: "The token has expired and cannot be renewed."
        case .refreshTokenExpired: "The token and its refresh token have expired."
        case .refused: "The provider refused to renew the login."
        }
    }
}

extension AccessToken {
    /// Whether the token has a refresh token that has not expired at `date`.
    public func hasUsableRefreshToken(at date: Date) -> Bool {
        guard refreshToken != nil else { return false }
        guard let end = refreshTokenExpirationDate else { return true }
        return end > date
    }
}

extension AuthError {
    /// A login that cannot be used or renewed: the person must log in again. It stays stored.
    ///
    /// - Parameters:
    ///   - key: the login.
    ///   - reason: why.
    public static func needsLogin(_ key: CredentialKey, reason: NeedsLoginReason) -> AuthError {
        AuthError(
            category: .authenticationReopenSession,
            message: "The login to '\(key.provider)' (account '\(key.account)') needs renewing: \(reason) "
                + "Log in again.",
            shouldNotifyUser: true,
            userMessage: "The login to '\(key.provider)' (account '\(key.account)') needs renewing: \(reason)",
            recoveryTactic: .reauthenticate, closesSession: false, provider: key.provider)
    }
}

/// Thrown by a ``TokenRenewer``'s `renew` when the provider answered (and so rotated the refresh
/// token) but the answer cannot be used — an ID token that fails its checks, say: the core saves
/// ``kept``, the login with the new refresh token and nothing else of the answer, before it passes
/// ``error`` on, so that the refresh token the provider has just retired is never sent again (a
/// provider with reuse detection would revoke the whole login).
public struct RenewalKeepingRotation: Error, Sendable, CustomStringConvertible {
    /// The login to keep: the one renewed, with the answer's refresh token.
    public var kept: AccessToken
    /// Why the answer was not used.
    public var error: AuthError

    /// Creates the failure.
    public init(kept: AccessToken, error: AuthError) {
        self.kept = kept
        self.error = error
    }

    public var description: String { error.description }
}

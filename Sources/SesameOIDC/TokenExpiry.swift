import Foundation
import Sesame

/// When a token is due for renewal, scaled to its lifetime, and what to tell the person when a
/// token that cannot be renewed is about to expire.
///
/// A fixed margin makes short-lived tokens unusable: with 60 s, a token issued for 60 s or
/// less would count as expired the moment it arrived. The margin is therefore a quarter of the
/// token's lifetime, at most `maximum`:
///
/// ```swift
/// let margin = TokenExpiry.margin(for: token)                 // 60 s for an hour, 10 s for 40 s
/// if let warning = TokenExpiry.warning(for: token) { StandardStreams.err.write(warning + "\n") }
/// ```
public enum TokenExpiry {
    /// How long before its expiry `token` should be renewed: `min(maximum, lifetime / 4)`, the
    /// lifetime counted from its `AccessToken.refreshDate` (when it was issued or last
    /// refreshed). A token without an expiry date gets `maximum`, which never matters for it.
    public static func margin(for token: AccessToken, maximum: TimeInterval = 60) -> TimeInterval {
        guard let expiry = token.expirationDate else { return maximum }
        let lifetime = expiry.timeIntervalSince(token.refreshDate)
        guard lifetime > 0 else { return 0 }
        return min(maximum, lifetime / 4)
    }

    /// A sentence for standard error when `token` is still valid but will expire within its
    /// margin and has no refresh token to renew it; `nil` when there is nothing to say. The
    /// sentence names the provider and the time left, never the token.
    public static func warning(for token: AccessToken, now: Date = Date(), maximum: TimeInterval = 60) -> String? {
        guard token.refreshToken == nil, let expiry = token.expirationDate else { return nil }
        let left = expiry.timeIntervalSince(now)
        guard left > 0, left <= margin(for: token, maximum: maximum) else { return nil }
        return "Warning: the token of '\(token.provider)' expires in \(Int(left.rounded(.down))) s and cannot be "
            + "renewed (the provider gave no refresh token); log in again when it has expired."
    }
}

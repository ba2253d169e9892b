import Foundation
import Sesame

/// What an emulator's token endpoint did with refresh tokens since it was created: what a test
/// that drives clients in other processes checks, with the emulator object or over
/// `GET /__sesame/stats`.
public struct RefreshTokenCounters: Sendable, Hashable {
    /// Refresh-token grants answered with new tokens (`refresh_grants`).
    public var refreshGrants: Int
    /// Refresh-token grants refused: an unknown, expired, used, revoked or another client's
    /// refresh token, or a wider scope (`refused_refresh_grants`).
    public var refusedRefreshGrants: Int
    /// Token families revoked because a refresh token that was already rotated away came back
    /// (`revoked_families`, RFC 9700 §4.14.2).
    public var revokedFamilies: Int

    /// Creates counters.
    public init(refreshGrants: Int = 0, refusedRefreshGrants: Int = 0, revokedFamilies: Int = 0) {
        self.refreshGrants = refreshGrants
        self.refusedRefreshGrants = refusedRefreshGrants
        self.revokedFamilies = revokedFamilies
    }

    /// The counters as `GET /__sesame/stats` answers them.
    package var jsonMembers: [String: JSONValue] {
        [
            "refresh_grants": .number(Double(refreshGrants)),
            "refused_refresh_grants": .number(Double(refusedRefreshGrants)),
            "revoked_families": .number(Double(revokedFamilies)),
        ]
    }
}

/// The refresh tokens each token family has rotated away, for reuse detection (OAuth 2.0
/// Security BCP, RFC 9700 §4.14.2): a family is every token descended from one grant, and a used
/// refresh token that comes back means two parties hold the family, so all of it is revoked.
///
/// Bounded: a family remembers its last ``usedLimit`` used tokens, and at most ``familyLimit``
/// families are remembered (the one that retired a token longest ago is forgotten first). A used
/// token that is no longer remembered is refused as unknown, without revoking its family.
package struct RefreshFamilies: Sendable {
    /// Used tokens remembered per family: more than the generations a few dozen processes
    /// sharing one login rotate through while one of them is stale.
    package static let usedLimit = 1024
    /// Families whose used tokens are remembered.
    package static let familyLimit = 256
    /// Revoked families remembered, so that their tokens are not taken back from saved state.
    package static let revokedLimit = 1024

    /// The used tokens of each family, oldest first.
    private var used: [String: [String]] = [:]
    /// The family of each used token.
    private var familyOfUsed: [String: String] = [:]
    /// Families in the order they last retired a token, the longest ago first.
    private var order: [String] = []
    /// Families revoked for reuse, oldest first.
    private var revoked: [String] = []
    package var counters = RefreshTokenCounters()

    package init() {}

    /// Counts a refresh-token grant answered (`granted`) or refused.
    package mutating func count(refreshGranted granted: Bool) {
        if granted {
            counters.refreshGrants += 1
        } else {
            counters.refusedRefreshGrants += 1
        }
    }

    /// Records that `token`, of `family`, was rotated away.
    package mutating func retire(_ token: String, family: String) {
        if let index = order.firstIndex(of: family) { order.remove(at: index) }
        order.append(family)
        used[family, default: []].append(token)
        familyOfUsed[token] = family
        if let tokens = used[family], tokens.count > Self.usedLimit {
            familyOfUsed[tokens[0]] = nil
            used[family]?.removeFirst()
        }
        if order.count > Self.familyLimit { forget(order[0]) }
    }

    /// The family of `token` when it is a used refresh token still remembered.
    package func family(ofUsed token: String) -> String? { familyOfUsed[token] }

    /// Forgets the used tokens of `family`, which ended (revoked, or its refresh token expired).
    package mutating func forget(_ family: String) {
        for token in used.removeValue(forKey: family) ?? [] { familyOfUsed[token] = nil }
        if let index = order.firstIndex(of: family) { order.remove(at: index) }
    }

    /// Forgets every family's used tokens, as when every grant is revoked.
    package mutating func forgetAll() {
        used.removeAll()
        familyOfUsed.removeAll()
        order.removeAll()
    }

    /// Counts `family` as revoked for reuse and forgets its used tokens; the engine drops its
    /// live tokens.
    package mutating func revoke(_ family: String) {
        forget(family)
        counters.revokedFamilies += 1
        revoked.append(family)
        if revoked.count > Self.revokedLimit { revoked.removeFirst() }
    }

    /// Whether `family` was revoked for reuse (among the last ``revokedLimit``).
    package func isRevoked(_ family: String) -> Bool { revoked.contains(family) }
}

import Foundation
import Sesame
import SesameEmulator

/// Who may see what an app publishes (the post's `privacy.value`), most open first.
enum Audience: String, Codable, Sendable, CaseIterable, Comparable {
    case everyone = "EVERYONE"
    case friendsOfFriends = "FRIENDS_OF_FRIENDS"
    case allFriends = "ALL_FRIENDS"
    case onlyMe = "SELF"

    /// The dialog's `default_audience` value (`everyone`, `friends`, `only_me`).
    init?(dialogValue: String) {
        switch dialogValue.lowercased() {
        case "everyone": self = .everyone
        case "friends": self = .allFriends
        case "only_me", "self": self = .onlyMe
        default: return nil
        }
    }

    /// How open it is: higher is more open.
    private var openness: Int {
        switch self {
        case .everyone: 3
        case .friendsOfFriends: 2
        case .allFriends: 1
        case .onlyMe: 0
        }
    }

    static func < (lhs: Audience, rhs: Audience) -> Bool { lhs.openness < rhs.openness }

    /// The words Facebook shows for it.
    var description: String {
        switch self {
        case .everyone: "Public"
        case .friendsOfFriends: "Friends of friends"
        case .allFriends: "Your friends"
        case .onlyMe: "Only me"
        }
    }
}

/// An access token the emulator issued.
struct TokenRecord: Codable, Sendable {
    enum Kind: String, Codable, Sendable {
        case user
        case app
    }

    var token: String
    var kind: Kind
    var appID: String
    var userID: String?
    /// Increases with every token issued; scenarios compare against it.
    var serial: Int
    var issuedAt: Date
    /// `nil`: never expires (app tokens).
    var expiresAt: Date?
    var isLongLived: Bool
}

/// What a person has granted and declined to an app.
struct GrantRecord: Codable, Sendable {
    var appID: String
    var userID: String
    /// Granted permissions, in the order first granted.
    var granted: [String]
    /// Declined permissions (including ones revoked with `DELETE`), in order.
    var declined: [String]
    /// The widest audience the person allowed the app's posts.
    var audience: Audience
    var dataAccessExpiresAt: Date
    /// Tokens of this person and app with a serial at or below this were revoked with the app.
    var revokedThroughSerial: Int
    /// Whether the app is installed (not removed with `DELETE /me/permissions`).
    var isInstalled: Bool
    /// The objects a permission was granted for, by a Login for Business configuration
    /// (`granular_scopes`); absent in state files written before it existed.
    var targets: [String: [String]]?

    mutating func grant(_ names: [String]) {
        for name in names where !granted.contains(name) { granted.append(name) }
        declined.removeAll { names.contains($0) }
    }

    mutating func decline(_ names: [String]) {
        granted.removeAll { names.contains($0) }
        for name in names where !declined.contains(name) { declined.append(name) }
        for name in names { targets?[name] = nil }
    }
}

/// A post on a person's timeline.
struct PostRecord: Codable, Sendable {
    /// `{user-id}_{number}`.
    var id: String
    /// Increasing over all posts; the paging cursor.
    var number: Int
    var userID: String
    var appID: String
    var message: String
    var link: String?
    var audience: Audience
    var createdAt: Date
}

/// An authorization code waiting to be exchanged.
struct CodeRecord: Sendable {
    var code: String
    var appID: String
    var userID: String
    var redirectURI: String
    var challenge: String?
    var challengeMethod: String?
    var createdAt: Date
    var isUsed = false
}

/// A login dialog shown and not yet answered.
struct PendingDialog: Sendable {
    var id: String
    var appID: String
    var redirectURI: String
    var state: String?
    /// Everything the app asked for, `public_profile` first.
    var requested: [String]
    /// The permissions the page asks about (the others are granted already, or declined without
    /// `auth_type=rerequest`).
    var asking: [String]
    var wantsCode: Bool
    var wantsToken: Bool
    var returnScopes: Bool
    var challenge: String?
    var challengeMethod: String?
    var audience: Audience?
    var authType: String?
    var createdAt: Date
    /// The Login for Business configuration asked for (`config_id`).
    var configurationID: String? = nil
}

/// A device login waiting for the person.
struct DeviceRecord: Sendable {
    enum Status: Sendable {
        case pending
        case approved(userID: String)
        case declined
        case consumed
    }

    var code: String
    var userCode: String
    var appID: String
    var scopes: [String]
    var createdAt: Date
    var expiresAt: Date
    /// The Login for Business configuration asked for (`config_id`).
    var configurationID: String? = nil
    var lastPollAt: Date?
    var status: Status = .pending
}

/// What the state file holds.
struct PersistedState: Codable {
    static let formatVersion = 1

    var version = PersistedState.formatVersion
    var users: [EmulatedUser]
    var tokens: [TokenRecord]
    var grants: [GrantRecord]
    var posts: [PostRecord]
    var nextSerial: Int
    var nextPostNumber: Int
    var clockOffset: TimeInterval
}

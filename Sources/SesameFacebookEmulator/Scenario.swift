import Foundation
import Sesame
import SesameEmulator

/// A named situation the emulator can be put in, as Facebook's error docs and the SDK's error
/// guide describe them.
///
/// The names are the ones `sesame emulator --scenario NAME` and the admin API take. See
/// <doc:ScenarioCatalogue> for what each one answers and which document it reproduces.
public struct EmulatorScenario: RawRepresentable, Hashable, Sendable, Codable, CaseIterable,
    CustomStringConvertible
{
    /// The scenario's name, for example `app-removed`.
    public var rawValue: String
    /// Creates a scenario from its name; `nil` when no scenario has that name.
    public init?(rawValue: String) {
        guard Self.allCases.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ name: String) { self.rawValue = name }

    /// The person removed the app: their earlier tokens get 190/458.
    public static let appRemoved = EmulatorScenario("app-removed")
    /// The person changed their password: their earlier tokens get 190/460.
    public static let passwordChanged = EmulatorScenario("password-changed")
    /// The person is checkpointed: every token of theirs gets 190/459 until cleared.
    public static let checkpointed = EmulatorScenario("checkpointed")
    /// The person has not confirmed their account: every token of theirs gets 190/464 until cleared.
    public static let unconfirmedUser = EmulatorScenario("unconfirmed-user")
    /// The earlier tokens expired: they get 190/463.
    public static let tokenExpired = EmulatorScenario("token-expired")
    /// The earlier sessions were invalidated: they get 190/492.
    public static let invalidSession = EmulatorScenario("invalid-session")
    /// The publish permission was revoked: it reads as declined and the next publish gets 200.
    public static let permissionRevoked = EmulatorScenario("permission-revoked")
    /// The app is throttled: calls get 4 with usage headers at 100%.
    public static let appThrottled = EmulatorScenario("app-throttled")
    /// The person is throttled: calls get 17.
    public static let userThrottled = EmulatorScenario("user-throttled")
    /// The page is throttled: calls get 32 with `X-Page-Usage`.
    public static let pageThrottled = EmulatorScenario("page-throttled")
    /// A custom rate limit is hit: calls get 613.
    public static let rateLimited = EmulatorScenario("rate-limited")
    /// A passing server failure: calls get 2 with `is_transient`.
    public static let transient = EmulatorScenario("transient")
    /// An unknown server failure: calls get 1.
    public static let unknownError = EmulatorScenario("unknown-error")
    /// Publishing gets 506, duplicate post.
    public static let duplicatePost = EmulatorScenario("duplicate-post")
    /// Calls get an error that carries `error_user_title` and `error_user_msg` for the person.
    public static let userMessage = EmulatorScenario("user-message")
    /// Every answer waits `delayMs` first.
    public static let slow = EmulatorScenario("slow")
    /// The connection is closed without an answer.
    public static let dropConnection = EmulatorScenario("drop-connection")
    /// The app is one created before 2026-11-04: Graph's legacy request forms (method override,
    /// `ids=`, `date_format`, `callback=`, field aliases, asynchronous batch) are answered as
    /// before rather than refused with (#12).
    public static let legacyForms = EmulatorScenario("legacy-forms")

    public static let allCases: [EmulatorScenario] = [
        .appRemoved, .passwordChanged, .checkpointed, .unconfirmedUser, .tokenExpired, .invalidSession,
        .permissionRevoked, .appThrottled, .userThrottled, .pageThrottled, .rateLimited, .transient,
        .unknownError, .duplicatePost, .userMessage, .slow, .dropConnection, .legacyForms,
    ]

    public var description: String { rawValue }

    /// One line on what the scenario does, for `GET /__sesame/scenarios` and `--help`.
    public var summary: String {
        switch self {
        case .appRemoved: "tokens issued before it get 190/458 (the person removed the app)"
        case .passwordChanged: "tokens issued before it get 190/460 (the person changed their password)"
        case .checkpointed: "every token of the person gets 190/459 (log in at facebook.com to fix)"
        case .unconfirmedUser: "every token of the person gets 190/464 (account not confirmed)"
        case .tokenExpired: "tokens issued before it get 190/463 (session expired)"
        case .invalidSession: "tokens issued before it get 190/492 (invalid session)"
        case .permissionRevoked: "the publish permission reads as declined; publishing gets (#200)"
        case .appThrottled: "calls get (#4) application request limit, X-App-Usage at 100%"
        case .userThrottled: "calls get (#17) user request limit"
        case .pageThrottled: "calls get (#32) page request limit, X-Page-Usage at 100%"
        case .rateLimited: "calls get (#613) custom rate limit"
        case .transient: "calls get (#2) temporary failure with is_transient"
        case .unknownError: "calls get (#1) unknown error"
        case .duplicatePost: "publishing gets (#506) duplicate status message"
        case .userMessage: "calls get an error with error_user_title and error_user_msg"
        case .slow: "each answer waits delayMs milliseconds"
        case .dropConnection: "the connection closes without an answer"
        case .legacyForms: "legacy request forms (method=, ids=, date_format, callback=, .as(), async batch) are served"
        default: rawValue
        }
    }

    /// Whether the scenario is about a person's tokens (it needs a user token to apply).
    var isTokenScenario: Bool {
        [.appRemoved, .passwordChanged, .checkpointed, .unconfirmedUser, .tokenExpired, .invalidSession]
            .contains(self)
    }

    /// Whether the scenario applies to every token of the person, including ones issued after it:
    /// a condition of the account rather than of a session.
    var appliesToLaterTokens: Bool { self == .checkpointed || self == .unconfirmedUser }
}

/// A scenario to activate, with its options: the body of `POST /__sesame/scenarios` and the value of
/// `--scenario`.
public struct ScenarioSetting: Sendable, Hashable, Codable {
    /// Which scenario.
    public var scenario: EmulatorScenario
    /// Only requests made with this person's tokens; `nil` for everyone.
    public var user: String?
    /// How many answers it gives before it ends by itself; `nil` until cleared.
    public var count: Int?
    /// For `slow`: how long each answer waits, in milliseconds.
    public var delayMs: Int?
    /// For `permission-revoked`: the permission revoked (default `publish_actions`).
    public var permission: String?
    /// For the throttling scenarios: `estimated_time_to_regain_access`, in minutes (default 5).
    public var regainAccessMinutes: Int?
    /// Only Graph calls to this path (`me/feed`, without version or leading slash), including
    /// the calls inside a batch; `nil` for every path. Token scenarios ignore it.
    public var path: String?

    /// Creates a setting.
    public init(
        _ scenario: EmulatorScenario, user: String? = nil, count: Int? = nil, delayMs: Int? = nil,
        permission: String? = nil, regainAccessMinutes: Int? = nil, path: String? = nil
    ) {
        self.scenario = scenario
        self.user = user
        self.count = count
        self.delayMs = delayMs
        self.permission = permission
        self.regainAccessMinutes = regainAccessMinutes
        self.path = path.map { String($0.drop { $0 == "/" }) }
    }

    /// Reads a command-line value: a name, optionally followed by `,key=value` options, for
    /// example `transient,count=2` or `slow,delayMs=250` or `app-removed,user=100000000000001`
    /// or `transient,count=2,path=me/feed`.
    ///
    /// - Throws: `EmulatorError` naming the unknown scenario or option, or the bad number.
    public init(argument: String) throws {
        let parts = argument.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let name = parts.first ?? ""
        guard let scenario = EmulatorScenario(rawValue: name) else { throw EmulatorError.unknownScenario(name) }
        self.init(scenario)
        for option in parts.dropFirst() {
            let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else {
                throw EmulatorError.invalidScenarioOption(option, reason: "expected key=value")
            }
            func number() throws -> Int {
                guard let value = Int(pair[1]), value >= 0 else {
                    throw EmulatorError.invalidScenarioOption(option, reason: "expected a whole number of 0 or more")
                }
                return value
            }
            switch pair[0] {
            case "user": user = pair[1]
            case "count": count = try number()
            case "delayMs": delayMs = try number()
            case "permission": permission = pair[1]
            case "regainAccessMinutes": regainAccessMinutes = try number()
            case "path": path = String(pair[1].drop { $0 == "/" })
            default:
                throw EmulatorError.invalidScenarioOption(
                    option, reason: "known options are user, count, delayMs, permission, regainAccessMinutes, path")
            }
        }
        try validate()
    }

    /// Checks the options' ranges.
    func validate() throws {
        if let count, count < 1 || count > 1_000_000 {
            throw EmulatorError.invalidScenarioOption("count=\(count)", reason: "count must be 1 to 1000000")
        }
        if let delayMs, delayMs < 0 || delayMs > 600_000 {
            throw EmulatorError.invalidScenarioOption("delayMs=\(delayMs)", reason: "delayMs must be 0 to 600000")
        }
        if let regainAccessMinutes, regainAccessMinutes < 0 || regainAccessMinutes > 1440 {
            throw EmulatorError.invalidScenarioOption(
                "regainAccessMinutes=\(regainAccessMinutes)", reason: "regainAccessMinutes must be 0 to 1440")
        }
        if let user, user.isEmpty || user.count > 64 {
            throw EmulatorError.invalidScenarioOption("user", reason: "user must be a user id")
        }
        if let path, path.isEmpty || path.utf8.count > 256 {
            throw EmulatorError.invalidScenarioOption("path", reason: "path must be a Graph path such as me/feed")
        }
        if let permission, permission.isEmpty || permission.count > 64 {
            throw EmulatorError.invalidScenarioOption("permission", reason: "permission must be a permission name")
        }
    }
}

/// A scenario that is active now, as `GET /__sesame/scenarios` lists it.
public struct ActiveScenario: Sendable, Hashable {
    /// Its id, for `DELETE /__sesame/scenarios/{id}`.
    public var id: String
    /// What was asked for.
    public var setting: ScenarioSetting
    /// How many answers it still gives; `nil` until cleared.
    public var remaining: Int?
    /// Tokens with a serial at or below this one were issued before the scenario began.
    var tokenSerialAtActivation: Int
}

extension EmulatorError {
    static func unknownScenario(_ name: String) -> EmulatorError {
        EmulatorError(
            message: "There is no emulator scenario named '\(name)'. Known scenarios: "
                + EmulatorScenario.allCases.map(\.rawValue).joined(separator: ", ") + ".")
    }

    static func invalidScenarioOption(_ option: String, reason: String) -> EmulatorError {
        EmulatorError(message: "The scenario option '\(option)' is not valid: \(reason).")
    }
}

import Foundation
import Sesame

// Facebook's own notions on the core's provider-neutral values: the publish kind of
// permission and its audience, the data-access expiry of a token, and the extra fields of
// Facebook's login errors. The core carries them (as a permission kind, a login option, a
// token extra and error parameters) without knowing what they mean.

extension Permission.Kind {
    /// Publishing or acting for the person; requested with a ``DefaultAudience``.
    public static let publish = Permission.Kind(rawValue: "publish")
}

extension Permission {
    /// A publish permission, such as `publish_actions`.
    public static func publish(_ name: String) -> Permission { Permission(name, kind: .publish) }
}

/// Who can see what an app publishes for the person (the SDK's `FBSessionDefaultAudience`).
public enum DefaultAudience: String, Hashable, Sendable, Codable, CaseIterable {
    /// No audience given: the provider's own default applies.
    case none
    /// Only the person.
    case onlyMe
    /// The person's friends.
    case friends
    /// Everyone.
    case everyone

    /// The login dialog's `default_audience` value (`only_me`, `friends`, `everyone`); `nil`
    /// for ``none``.
    public var facebookValue: String? {
        switch self {
        case .none: nil
        case .onlyMe: "only_me"
        case .friends: "friends"
        case .everyone: "everyone"
        }
    }
}

/// The login option that carries a ``DefaultAudience``.
public enum DefaultAudienceOption: LoginOptionKey {
    /// No audience: Facebook's own default applies.
    public static let defaultValue = DefaultAudience.none
}

extension LoginRequest.Options {
    /// Options with the audience for publish permissions set.
    public init(defaultAudience: DefaultAudience) {
        self.init()
        self.defaultAudience = defaultAudience
    }

    /// The audience for publish permissions (`default_audience` in Facebook's login dialog).
    public var defaultAudience: DefaultAudience {
        get { self[DefaultAudienceOption.self] }
        set { self[DefaultAudienceOption.self] = newValue }
    }
}

extension LoginRequest {
    /// The audience for publish permissions, from ``Sesame/LoginRequest/options``.
    public var defaultAudience: DefaultAudience {
        get { options.defaultAudience }
        set { options.defaultAudience = newValue }
    }
}

extension AccessToken {
    /// When the app loses access to the person's data (Facebook's data-access expiry), even if
    /// the token itself is still valid; `nil` when Facebook gave none.
    public var dataAccessExpirationDate: Date? {
        get { providerExtras[Self.dataAccessExpiryExtra]?.doubleValue.map(Date.init(timeIntervalSince1970:)) }
        set { providerExtras[Self.dataAccessExpiryExtra] = newValue.map { .number($0.timeIntervalSince1970) } }
    }

    /// The targets each permission was granted for, from `debug_token`'s `granular_scopes` (a
    /// business login's Pages, ad accounts, businesses); empty when Facebook listed none or the
    /// login was stored before Sesame kept them. Stored with the token.
    public var granularScopes: [FacebookGranularScope] {
        get {
            (providerExtras[Self.grantTargetsExtra]?.arrayValue ?? []).compactMap(FacebookGranularScope.init(json:))
        }
        set { providerExtras[Self.grantTargetsExtra] = newValue.isEmpty ? nil : .array(newValue.map(\.json)) }
    }

    /// Whether access to the person's data has expired at `date`.
    public func isDataAccessExpired(at date: Date = Date()) -> Bool {
        guard let dataAccessExpirationDate else { return false }
        return dataAccessExpirationDate <= date
    }
}

/// A permission and the objects it was granted for: one entry of `debug_token`'s
/// `granular_scopes` (`{"scope": "pages_show_list", "target_ids": ["1234"]}`).
public struct FacebookGranularScope: Sendable, Hashable, Codable {
    /// The permission.
    public var scope: String
    /// The ids of the Pages, ad accounts or businesses it covers; empty when it is not limited
    /// to targets.
    public var targetIDs: [String]

    /// Creates an entry.
    public init(scope: String, targetIDs: [String] = []) {
        self.scope = scope
        self.targetIDs = targetIDs
    }

    /// Reads one `granular_scopes` entry; `nil` without a `scope`.
    public init?(json: JSONValue) {
        guard let scope = json["scope"]?.stringValue else { return nil }
        self.init(scope: scope, targetIDs: json["target_ids"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// The entry as Facebook writes it.
    public var json: JSONValue {
        var object: [String: JSONValue] = ["scope": .string(scope)]
        if !targetIDs.isEmpty { object["target_ids"] = .array(targetIDs.map { .string($0) }) }
        return .object(object)
    }

    enum CodingKeys: String, CodingKey {
        case scope
        case targetIDs = "target_ids"
    }
}

extension OAuthErrorResponse {
    /// A Facebook login error: the standard fields with Facebook's `error_reason` and
    /// `error_code`.
    public static func facebook(
        error: String, errorDescription: String? = nil, errorReason: String? = nil, errorCode: Int? = nil
    ) -> OAuthErrorResponse {
        var parameters: [String: String] = [:]
        parameters["error_reason"] = errorReason
        parameters["error_code"] = errorCode.map(String.init)
        return OAuthErrorResponse(error: error, errorDescription: errorDescription, additionalParameters: parameters)
    }

    /// Facebook's `error_reason` (for example `user_denied`).
    public var errorReason: String? { additionalParameters["error_reason"] }

    /// Facebook's numeric `error_code`.
    public var errorCode: Int? { additionalParameters["error_code"].flatMap { Int($0) } }
}

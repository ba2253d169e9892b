import Foundation

/// An access token and what is known about it.
///
/// The secret (``tokenString``, and ``refreshToken`` and ``idToken`` when present) never
/// appears in ``description``, ``debugDescription`` or a `dump`/`Mirror` of the value: they show
/// `<redacted>` instead, so a token can be logged and put in errors safely. Read the properties
/// when you need the secret itself.
public struct AccessToken: Sendable, Hashable, Codable {
    /// The bearer token sent to the provider. Secret.
    public var tokenString: String
    /// The provider that issued the token.
    public var provider: ProviderID
    /// The app (client) the token was issued to.
    public var appID: String
    /// The person the token acts for, when known.
    public var userID: String?
    /// The permissions granted and declined when the token was last checked.
    public var permissions: PermissionSet
    /// When the token stops working; `nil` when the provider gave no expiry.
    public var expirationDate: Date?
    /// What the provider said about the token that only its own module understands (Facebook's
    /// data-access expiry, say), by the provider's name for it. Stored with the token; the
    /// provider module reads it through typed accessors. Never holds a secret.
    public var providerExtras: [String: JSONValue]
    /// When the token was issued or last refreshed or extended.
    public var refreshDate: Date
    /// A refresh token (OAuth 2.0), when the provider issued one. Secret.
    public var refreshToken: String?
    /// When the refresh token itself stops working, when the provider said
    /// (`refresh_token_expires_in`); `nil` when it did not, or there is no refresh token.
    public var refreshTokenExpirationDate: Date?
    /// An OpenID Connect ID token, when the provider issued one. Secret.
    public var idToken: String?

    /// Creates a token.
    public init(
        tokenString: String,
        provider: ProviderID,
        appID: String,
        userID: String? = nil,
        permissions: PermissionSet = PermissionSet(),
        expirationDate: Date? = nil,
        refreshDate: Date = Date(),
        refreshToken: String? = nil,
        refreshTokenExpirationDate: Date? = nil,
        idToken: String? = nil,
        providerExtras: [String: JSONValue] = [:]
    ) {
        self.tokenString = tokenString
        self.provider = provider
        self.appID = appID
        self.userID = userID
        self.permissions = permissions
        self.expirationDate = expirationDate
        self.providerExtras = providerExtras
        self.refreshDate = refreshDate
        self.refreshToken = refreshToken
        self.refreshTokenExpirationDate = refreshTokenExpirationDate
        self.idToken = idToken
    }

    /// Whether the token has expired at `date`, or will within `leeway` seconds of it.
    ///
    /// A token with no expiry date never expires by this test.
    public func isExpired(at date: Date = Date(), leeway: TimeInterval = 0) -> Bool {
        guard let expirationDate else { return false }
        return expirationDate.timeIntervalSince(date) <= leeway
    }
}

extension AccessToken {
    private enum CodingKeys: String, CodingKey {
        case tokenString, provider, appID, userID, permissions, expirationDate, refreshDate, refreshToken, idToken
        case refreshTokenExpirationDate, providerExtras
        /// Where records written before ``AccessToken/providerExtras`` existed kept Facebook's
        /// data-access expiry, as a top-level date.
        case dataAccessExpirationDate
    }

    /// The ``providerExtras`` name of a data-access expiry, in seconds since 1970: Facebook's
    /// name, which `SesameFacebook` reads, an old record's top-level `dataAccessExpirationDate`
    /// is read into, and `sesame status` shows for any provider that sets it.
    package static let dataAccessExpiryExtra = "data_access_expires_at"

    /// The ``providerExtras`` name of the targets permissions were granted for (the Pages, ad
    /// accounts or businesses a person chose): `[{"scope": name, "target_ids": [id, …]}]`,
    /// Facebook's `granular_scopes`, which `SesameFacebook` writes and `sesame status` and
    /// `sesame permissions list` show for any provider that sets it.
    package static let grantTargetsExtra = "granular_scopes"

    /// ``grantTargetsExtra`` read: each permission with the ids it was granted for (none: not
    /// limited to targets), in the order stored.
    package var grantTargets: [(permission: String, targets: [String])] {
        (providerExtras[Self.grantTargetsExtra]?.arrayValue ?? []).compactMap { entry in
            guard let scope = entry["scope"]?.stringValue else { return nil }
            return (scope, entry["target_ids"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        tokenString = try container.decode(String.self, forKey: .tokenString)
        provider = try container.decode(ProviderID.self, forKey: .provider)
        appID = try container.decode(String.self, forKey: .appID)
        userID = try container.decodeIfPresent(String.self, forKey: .userID)
        permissions = try container.decode(PermissionSet.self, forKey: .permissions)
        expirationDate = try container.decodeIfPresent(Date.self, forKey: .expirationDate)
        refreshDate = try container.decode(Date.self, forKey: .refreshDate)
        refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
        refreshTokenExpirationDate = try container.decodeIfPresent(Date.self, forKey: .refreshTokenExpirationDate)
        idToken = try container.decodeIfPresent(String.self, forKey: .idToken)
        providerExtras = try container.decodeIfPresent([String: JSONValue].self, forKey: .providerExtras) ?? [:]
        // Keyring items and token files written before the extras existed still read.
        if providerExtras[Self.dataAccessExpiryExtra] == nil,
            let legacy = try container.decodeIfPresent(Date.self, forKey: .dataAccessExpirationDate)
        {
            providerExtras[Self.dataAccessExpiryExtra] = .number(legacy.timeIntervalSince1970)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(tokenString, forKey: .tokenString)
        try container.encode(provider, forKey: .provider)
        try container.encode(appID, forKey: .appID)
        try container.encodeIfPresent(userID, forKey: .userID)
        try container.encode(permissions, forKey: .permissions)
        try container.encodeIfPresent(expirationDate, forKey: .expirationDate)
        try container.encode(refreshDate, forKey: .refreshDate)
        try container.encodeIfPresent(refreshToken, forKey: .refreshToken)
        try container.encodeIfPresent(refreshTokenExpirationDate, forKey: .refreshTokenExpirationDate)
        try container.encodeIfPresent(idToken, forKey: .idToken)
        if !providerExtras.isEmpty { try container.encode(providerExtras, forKey: .providerExtras) }
    }
}

extension AccessToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        var parts = ["provider: \(provider)", "app: \(appID)"]
        if let userID { parts.append("user: \(userID)") }
        parts.append("token: \(Redaction.placeholder)")
        if !permissions.granted.isEmpty {
            parts.append("granted: \(permissions.granted.sorted().joined(separator: ","))")
        }
        if !permissions.declined.isEmpty {
            parts.append("declined: \(permissions.declined.sorted().joined(separator: ","))")
        }
        if let expirationDate { parts.append("expires: \(expirationDate.ISO8601Format())") }
        if refreshToken != nil { parts.append("refreshToken: \(Redaction.placeholder)") }
        if let refreshTokenExpirationDate {
            parts.append("refreshTokenExpires: \(refreshTokenExpirationDate.ISO8601Format())")
        }
        return "AccessToken(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "tokenString": Redaction.placeholder,
                "provider": provider,
                "appID": appID,
                "userID": userID as Any,
                "permissions": permissions,
                "expirationDate": expirationDate as Any,
                "providerExtras": providerExtras,
                "refreshDate": refreshDate,
                "refreshToken": refreshToken == nil ? "nil" : Redaction.placeholder,
                "refreshTokenExpirationDate": refreshTokenExpirationDate as Any,
                "idToken": idToken == nil ? "nil" : Redaction.placeholder,
            ],
            displayStyle: .struct
        )
    }
}

/// How Sesame writes a secret it will not show.
public enum Redaction {
    /// The text shown in place of a secret.
    public static let placeholder = "<redacted>"
}

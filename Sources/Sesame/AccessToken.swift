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
    /// When the app loses access to the person's data (Facebook's data-access expiry), even if
    /// the token itself is still valid.
    public var dataAccessExpirationDate: Date?
    /// When the token was issued or last refreshed or extended.
    public var refreshDate: Date
    /// A refresh token (OAuth 2.0), when the provider issued one. Secret.
    public var refreshToken: String?
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
        dataAccessExpirationDate: Date? = nil,
        refreshDate: Date = Date(),
        refreshToken: String? = nil,
        idToken: String? = nil
    ) {
        self.tokenString = tokenString
        self.provider = provider
        self.appID = appID
        self.userID = userID
        self.permissions = permissions
        self.expirationDate = expirationDate
        self.dataAccessExpirationDate = dataAccessExpirationDate
        self.refreshDate = refreshDate
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    /// Whether the token has expired at `date`, or will within `leeway` seconds of it.
    ///
    /// A token with no expiry date never expires by this test.
    public func isExpired(at date: Date = Date(), leeway: TimeInterval = 0) -> Bool {
        guard let expirationDate else { return false }
        return expirationDate.timeIntervalSince(date) <= leeway
    }

    /// Whether access to the person's data has expired at `date`.
    public func isDataAccessExpired(at date: Date = Date()) -> Bool {
        guard let dataAccessExpirationDate else { return false }
        return dataAccessExpirationDate <= date
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
                "dataAccessExpirationDate": dataAccessExpirationDate as Any,
                "refreshDate": refreshDate,
                "refreshToken": refreshToken == nil ? "nil" : Redaction.placeholder,
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

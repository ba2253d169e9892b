/// The stable identifier of an identity provider, such as `facebook` or `oidc`.
public struct ProviderID: RawRepresentable, Hashable, Sendable, Codable, Comparable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The identifier as written in stores, configuration and on the command line.
    public var rawValue: String

    /// Creates an identifier.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Creates an identifier.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public init(stringLiteral value: String) { self.rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static func < (lhs: ProviderID, rhs: ProviderID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { rawValue }
}

/// A way of signing a person in.
public enum LoginFlowKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// The system browser and a loopback redirect (RFC 8252) with PKCE.
    case browser
    /// A code shown to the person, entered on another device while the app polls
    /// (Facebook Login for Devices, RFC 8628).
    case device
    /// A token the person already has, checked with the provider before it is stored.
    case existingToken
}

import Synchronization

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

/// An identity provider: what it supports and how it reads its own errors.
///
/// Adding a provider is adding one module with a type that conforms to this protocol and is
/// registered in a ``ProviderRegistry``; nothing in the core changes.
public protocol AuthProvider: Sendable {
    /// The provider's identifier.
    var id: ProviderID { get }
    /// A human name, for example "Facebook".
    var displayName: String { get }
    /// The login flows this provider can run.
    var supportedLoginFlows: Set<LoginFlowKind> { get }
    /// The kinds of permission this provider distinguishes.
    var supportedPermissionKinds: Set<Permission.Kind> { get }
    /// The mapping from this provider's raw errors to ``AuthError``.
    var errorTaxonomy: any ErrorTaxonomy { get }
}

/// The providers an application knows, by identifier.
///
/// Safe to use from any task; registration is one call.
public final class ProviderRegistry: Sendable {
    private let providers: Mutex<[ProviderID: any AuthProvider]>

    /// Creates a registry holding `providers`.
    ///
    /// - Throws: ``ProviderRegistryError`` when two of them share an identifier.
    public init(_ providers: [any AuthProvider] = []) throws {
        self.providers = Mutex([:])
        for provider in providers { try register(provider) }
    }

    /// Adds `provider`.
    ///
    /// - Throws: ``ProviderRegistryError/duplicate(_:)`` when a provider with the same
    ///   identifier is already registered.
    public func register(_ provider: any AuthProvider) throws {
        try providers.withLock { table in
            guard table[provider.id] == nil else { throw ProviderRegistryError.duplicate(provider.id) }
            table[provider.id] = provider
        }
    }

    /// The provider registered under `id`.
    ///
    /// - Throws: ``ProviderRegistryError/unknown(_:known:)`` naming the identifiers that are
    ///   registered.
    public func provider(for id: ProviderID) throws -> any AuthProvider {
        try providers.withLock { table in
            guard let provider = table[id] else {
                throw ProviderRegistryError.unknown(id, known: table.keys.sorted())
            }
            return provider
        }
    }

    /// The identifiers of every registered provider, sorted.
    public var ids: [ProviderID] { providers.withLock { $0.keys.sorted() } }
}

/// A registry lookup or registration that could not be done.
public struct ProviderRegistryError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Equatable { case duplicate, unknown }
    private let code: Code
    /// The identifier that was looked up or registered.
    public let providerID: ProviderID
    /// The identifiers registered at the time of the error.
    public let known: [ProviderID]

    /// A second provider was registered under an identifier already taken.
    public static func duplicate(_ id: ProviderID) -> Self { Self(code: .duplicate, providerID: id, known: []) }
    /// No provider is registered under the identifier.
    public static func unknown(_ id: ProviderID, known: [ProviderID]) -> Self {
        Self(code: .unknown, providerID: id, known: known)
    }

    public var description: String {
        switch code {
        case .duplicate:
            return "A provider named '\(providerID)' is already registered; each provider id can be registered once."
        case .unknown:
            let list =
                known.isEmpty
                ? "none are registered" : "known providers: \(known.map(\.rawValue).joined(separator: ", "))"
            return "No provider named '\(providerID)' is registered (\(list))."
        }
    }
}

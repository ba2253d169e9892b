/// A permission (scope) an app asks a person to grant.
public struct Permission: Hashable, Sendable, Codable, CustomStringConvertible {
    /// What a permission lets the app do, as the provider groups its permissions.
    ///
    /// The core knows one kind, ``read``. A provider with more kinds adds them as static
    /// members in its own module (Facebook's `publish`, asked for with an audience), the way
    /// ``LoginFailedReason`` grows, so a new kind never breaks an app's code. Encoded as its
    /// raw string.
    public struct Kind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The kind's name, for example `read`.
        public var rawValue: String

        /// Creates a kind from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Reading the person's data: the kind every provider has.
        public static let read = Kind(rawValue: "read")

        public var description: String { rawValue }
    }

    /// The provider's name for the permission, for example `email` or `repo`.
    public var name: String
    /// What the permission lets the app do; ``Kind/read`` unless the provider says otherwise.
    public var kind: Kind

    /// Creates a permission.
    public init(_ name: String, kind: Kind = .read) {
        self.name = name
        self.kind = kind
    }

    /// A read permission.
    public static func read(_ name: String) -> Permission { Permission(name, kind: .read) }

    public var description: String { name }
}

/// The permissions a person has granted and declined to an app.
public struct PermissionSet: Hashable, Sendable, Codable {
    /// Names of the permissions granted.
    public var granted: Set<String>
    /// Names of the permissions the person declined.
    public var declined: Set<String>

    /// Creates an empty set: nothing granted, nothing declined.
    public init() {
        granted = []
        declined = []
    }

    /// Creates a set; a name in both lists counts as declined.
    ///
    /// Inlinable so that it is specialized where it is called: unspecialized, its first call in a
    /// process looks up the sequences' element types by name, a scan of the binary's protocol
    /// conformances that costs a start-up path such as `sesame token` a tenth of a millisecond.
    @inlinable
    public init(granted: some Sequence<String> = [String](), declined: some Sequence<String> = [String]()) {
        let declined = Set(declined)
        self.granted = Set(granted).subtracting(declined)
        self.declined = declined
    }

    /// Whether `name` is granted.
    public func isGranted(_ name: String) -> Bool { granted.contains(name) }

    /// The permissions of `request` that are not granted, in request order, without repeats.
    public func missing(from request: some Sequence<Permission>) -> [Permission] {
        var seen = Set<String>()
        return request.filter { !granted.contains($0.name) && seen.insert($0.name).inserted }
    }

    /// The outcome of a request: what it granted and what it declined, as the SDK reported it.
    public func outcome(of request: some Sequence<Permission>) -> PermissionRequestOutcome {
        let names = request.map(\.name)
        return PermissionRequestOutcome(
            granted: Set(names.filter { granted.contains($0) }),
            declined: Set(names.filter { !granted.contains($0) })
        )
    }
}

/// What a permission request ended with.
public struct PermissionRequestOutcome: Hashable, Sendable {
    /// Requested and now granted.
    public var granted: Set<String>
    /// Requested and not granted (declined by the person, or not given).
    public var declined: Set<String>

    /// Creates an outcome.
    public init(granted: Set<String>, declined: Set<String>) {
        self.granted = granted
        self.declined = declined
    }

    /// Whether every requested permission was granted.
    public var isFullyGranted: Bool { declined.isEmpty }
}

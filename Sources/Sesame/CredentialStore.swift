import Foundation

/// Identifies one stored login: a provider, where the login is valid, an app on it, and an
/// account.
///
/// Where a login is valid is part of its identity, so that a token is never sent to, or
/// refreshed at, a server it did not come from: an OpenID login carries its ``issuer``; GitHub's
/// logins carry their host as the app id; a Facebook login its app.
public struct CredentialKey: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// The provider.
    public var provider: ProviderID
    /// The issuer the login came from (an OpenID provider's issuer URL), for providers whose
    /// logins are valid at one issuer among many; `nil` for providers whose app id already says
    /// where (Facebook's app, GitHub's host). A login stored with an issuer is found only under
    /// that issuer.
    public var issuer: String?
    /// The app (client) id on that provider.
    public var appID: String
    /// The account name: the person's choice (`--account`), or the user id.
    public var account: String

    /// Creates a key.
    public init(provider: ProviderID, issuer: String? = nil, appID: String, account: String) {
        self.provider = provider
        self.issuer = issuer
        self.appID = appID
        self.account = account
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.provider.rawValue, lhs.issuer ?? "", lhs.appID, lhs.account)
            < (rhs.provider.rawValue, rhs.issuer ?? "", rhs.appID, rhs.account)
    }

    /// The same login's key with another account name.
    public func with(account: String) -> CredentialKey {
        CredentialKey(provider: provider, issuer: issuer, appID: appID, account: account)
    }

    public var description: String {
        if let issuer { return "\(provider) (\(issuer), app \(appID)) — \(account)" }
        return "\(provider) (app \(appID)) — \(account)"
    }
}

/// A token as kept in a ``CredentialStore``.
public struct StoredCredential: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Where it is kept.
    public var key: CredentialKey
    /// The token. Its secret parts are redacted from every description.
    public var token: AccessToken
    /// When it was saved.
    public var savedAt: Date
    /// Set when a refresh failed for good (for example `invalid_grant`): the credential is kept
    /// for the person to see, but a login is needed before it can be used again.
    public var needsLogin: Bool

    /// Creates a stored credential.
    public init(key: CredentialKey, token: AccessToken, savedAt: Date = Date(), needsLogin: Bool = false) {
        self.key = key
        self.token = token
        self.savedAt = savedAt
        self.needsLogin = needsLogin
    }

    public var description: String {
        "StoredCredential(\(key), \(token)\(needsLogin ? ", needs login" : ""))"
    }
}

/// Where tokens are kept between runs.
///
/// Backends: ``InMemoryCredentialStore``, ``FileCredentialStore`` (opt-in, 0600, atomic) and the
/// desktop keyring (`SecretServiceStore` in `SesameKeyring`). Every method may be called from
/// any task. Failures are ``CredentialStoreError``s that say what to do.
public protocol CredentialStore: Sendable {
    /// Saves `credential`, replacing any with the same key. Either the new credential is saved
    /// or the old one is left as it was.
    ///
    /// - Throws: ``CredentialStoreError`` saying what to do when the store cannot be reached or
    ///   written.
    func save(_ credential: StoredCredential) async throws
    /// The credential for `key`, or `nil` when there is none.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached or the entry cannot be
    ///   read.
    func load(_ key: CredentialKey) async throws -> StoredCredential?
    /// Removes the credential for `key`; returns whether there was one.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached or written.
    @discardableResult func delete(_ key: CredentialKey) async throws -> Bool
    /// Every stored credential, optionally for one provider, sorted by key.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    func list(provider: ProviderID?) async throws -> [StoredCredential]
    /// A short name of the backend for status output, such as `keyring` or `file (~/.local/...)`.
    var backendDescription: String { get }
    /// Every stored credential that can be read, optionally for one provider, and the entries
    /// that cannot, so that one bad entry hides no good one.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    func listing(provider: ProviderID?) async throws -> CredentialListing
    /// Whether any entry is stored, optionally for one provider, told as cheaply as the store
    /// can: the keyring answers from one search, without the encrypted session that reading a
    /// secret needs. Unreadable and locked entries count. A caller uses it to start, beside the
    /// listing, slow work the listing's credentials will need (`sesame status` loads its HTTP
    /// library while the keyring's session opens).
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    func containsEntries(provider: ProviderID?) async throws -> Bool
    /// Checks that a credential for `key` could be saved now (the keyring is unlocked and has a
    /// collection to save in, the file's directory is writable), before a login asks the person
    /// to approve anything.
    ///
    /// - Throws: the ``CredentialStoreError`` a save would throw.
    func checkWritable(for key: CredentialKey) async throws
    /// Reads the login for `key` for a renewal (or another read-modify-write), marks the renewal
    /// in flight, and runs `body` with what was read; the mark is cleared when `body` ends.
    ///
    /// A store that several machines share cannot rely on its refresh lock alone: a database's
    /// lock is dropped by a restart or failover while its holder still waits on the issuer. Such
    /// a store (`PostgresCredentialStore`) fences: the claim holds the login's generation, which
    /// ``save(_:fencedBy:)`` checks, and a second renewer that finds a renewal in flight waits
    /// for it (or for its holder to stop showing signs of life) instead of sending the same
    /// refresh token. A store that only a file lock guards needs no fence, since that lock is
    /// lost only with its process: the default reads the login and runs `body`.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached or the login cannot be
    ///   read; whatever `body` throws.
    func withRenewalClaim<T: Sendable>(
        for key: CredentialKey, _ body: @Sendable (RenewalClaim) async throws -> T
    ) async throws -> T
    /// Saves `credential` only when the stored login is still the one `claim` read (no other
    /// renewal or login replaced it since).
    ///
    /// - Returns: whether it was saved; `false` leaves the store as it is.
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached or written.
    func save(_ credential: StoredCredential, fencedBy claim: RenewalClaim) async throws -> Bool
}

/// What ``CredentialStore/withRenewalClaim(for:_:)`` read for a renewal, and what fences the
/// renewal's save.
public struct RenewalClaim: Sendable, Hashable {
    /// The stored login when the claim was made, or `nil` when there was none.
    public var stored: StoredCredential?
    /// The login's generation that this claim holds, which a fenced save must still find; `nil`
    /// for a store that does not fence.
    public var generation: Int64?

    /// Creates a claim.
    public init(stored: StoredCredential?, generation: Int64? = nil) {
        self.stored = stored
        self.generation = generation
    }
}

extension CredentialStore {
    /// Every stored credential, sorted by key.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    public func list() async throws -> [StoredCredential] { try await list(provider: nil) }

    /// ``list(provider:)``'s credentials, with no unreadable entries reported: for stores that
    /// cannot hold an entry they cannot read.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    public func listing(provider: ProviderID?) async throws -> CredentialListing {
        CredentialListing(credentials: try await list(provider: provider), unreadable: [])
    }

    /// Whether ``listing(provider:)`` finds anything, credential or unreadable entry.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be reached.
    public func containsEntries(provider: ProviderID?) async throws -> Bool {
        let listing = try await listing(provider: provider)
        return !listing.credentials.isEmpty || !listing.unreadable.isEmpty
    }

    /// Reads the login and runs `body`: no fence, for a store whose lock is lost only with its
    /// process (a file lock).
    ///
    /// - Throws: ``CredentialStoreError`` when the login cannot be read; whatever `body` throws.
    public func withRenewalClaim<T: Sendable>(
        for key: CredentialKey, _ body: @Sendable (RenewalClaim) async throws -> T
    ) async throws -> T {
        try await body(RenewalClaim(stored: try await load(key)))
    }

    /// Saves `credential`: no fence, for a store whose lock is lost only with its process.
    ///
    /// - Returns: `true`.
    /// - Throws: ``CredentialStoreError`` when the store cannot be written.
    public func save(_ credential: StoredCredential, fencedBy claim: RenewalClaim) async throws -> Bool {
        try await save(credential)
        return true
    }

    /// Saves and removes a placeholder credential (holding no token) beside `key`.
    ///
    /// - Throws: ``CredentialStoreError`` when the store cannot be written.
    public func checkWritable(for key: CredentialKey) async throws {
        let probe = key.with(account: "\(key.account).sesame-write-check")
        let token = AccessToken(tokenString: "", provider: key.provider, appID: key.appID)
        do {
            try await save(StoredCredential(key: probe, token: token))
            try await delete(probe)
        } catch var error as CredentialStoreError {
            // The placeholder is Sesame's own business: a message speaks of the login itself.
            error.message = error.message.replacingOccurrences(of: "\(probe)", with: "\(key)")
            throw error
        }
    }
}

/// What a store holds: the credentials it can read, and the entries it cannot.
public struct CredentialListing: Sendable {
    /// The credentials that can be read, sorted by key.
    public var credentials: [StoredCredential]
    /// The entries that cannot be read as credentials.
    public var unreadable: [UnreadableCredential]

    /// Creates a listing.
    public init(credentials: [StoredCredential], unreadable: [UnreadableCredential]) {
        self.credentials = credentials
        self.unreadable = unreadable
    }
}

/// A stored entry that cannot be read as a credential (an empty secret, not JSON).
public struct UnreadableCredential: Sendable, Hashable {
    /// Its key, when its attributes name one (then it can be removed by key).
    public var key: CredentialKey?
    /// What is wrong with it.
    public var problem: String

    /// Creates a description of an unreadable entry.
    public init(key: CredentialKey?, problem: String) {
        self.key = key
        self.problem = problem
    }
}

/// A credential store failure, with what to do about it.
public struct CredentialStoreError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What kind of failure it was.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The store could not be reached, for a reason no more specific kind names.
        public static let unavailable = Kind(rawValue: "unavailable")
        /// There is no D-Bus session bus to reach the desktop keyring on: `DBUS_SESSION_BUS_ADDRESS`
        /// is unset, or names a bus that is gone.
        public static let noSessionBus = Kind(rawValue: "noSessionBus")
        /// The session bus works but no Secret Service provider (a keyring daemon such as
        /// gnome-keyring or KeePassXC) is running on it or can be started.
        public static let noSecretService = Kind(rawValue: "noSecretService")
        /// The keyring collection is locked and was not unlocked.
        public static let locked = Kind(rawValue: "locked")
        /// The store did not answer in time.
        public static let timedOut = Kind(rawValue: "timedOut")
        /// Stored data could not be read as credentials. It is left in place.
        public static let corrupt = Kind(rawValue: "corrupt")
        /// A file's permissions let other users read it, so it is not trusted.
        public static let insecurePermissions = Kind(rawValue: "insecurePermissions")
        /// Reading or writing failed.
        public static let ioFailure = Kind(rawValue: "ioFailure")
        /// A directory the store keeps its files in could not be made, or a file in it could not be
        /// written (a read-only home or state directory).
        public static let cannotCreate = Kind(rawValue: "cannotCreate")

        public var description: String { rawValue }
    }

    /// The kind of failure.
    public var kind: Kind
    /// Whether the store is absent rather than failing: ``Kind/unavailable``,
    /// ``Kind/noSessionBus`` or ``Kind/noSecretService``. A locked keyring, a timeout or a
    /// corrupt item are not absences: the credentials may well be there.
    public var isUnavailable: Bool { [.unavailable, .noSessionBus, .noSecretService].contains(kind) }
    /// What happened and what to do, in one or two sentences. Contains no secret.
    public var message: String

    /// Creates an error.
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// The ``message``: what `localizedDescription` returns.
    public var errorDescription: String? { message }
}

/// A store that keeps credentials in memory for the life of the process. For tests, and for
/// apps that must not persist tokens.
public final class InMemoryCredentialStore: CredentialStore {
    private let storage: Locked<[CredentialKey: StoredCredential]>

    /// Creates a store, optionally holding some credentials.
    public init(_ credentials: [StoredCredential] = []) {
        storage = Locked(Dictionary(credentials.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last }))
    }

    public func save(_ credential: StoredCredential) async throws {
        try await SesameLogging.storeOperation("save", self, credential.key) {
            storage.withLock { $0[credential.key] = credential }
        }
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        try await SesameLogging.storeOperation("load", self, key) {
            storage.withLock { $0[key] }
        }
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        try await SesameLogging.storeOperation("delete", self, key) {
            storage.withLock { $0.removeValue(forKey: key) != nil }
        }
    }

    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        storage.withLock { table in
            table.values.filter { provider == nil || $0.key.provider == provider }.sorted { $0.key < $1.key }
        }
    }

    public var backendDescription: String { "memory" }
}

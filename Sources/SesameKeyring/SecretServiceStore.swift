internal import CLibSecret
import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Credentials in the desktop keyring: GNOME Keyring, KeePassXC, KWallet or any other
/// provider of the freedesktop.org Secret Service API, reached over D-Bus through libsecret.
///
/// Each credential is one keyring item in the default collection (the “Login” keyring on
/// GNOME), labelled like `Sesame: facebook (app 1234) — alice`, with the attributes
/// `xdg:schema` = `org.sesame.Credential`, `provider`, `app_id`, `account` and
/// `schema_version`, and the credential's JSON (in base64) as its secret. Nothing secret goes
/// into the attributes, which the Secret Service stores unencrypted. `secret-tool` reads and
/// writes the same items; see <doc:SesameKeyring#Working-with-secret-tool>.
///
/// Every call runs on a dedicated thread, never on Swift's cooperative pool, and is bounded
/// by ``timeout``: a keyring or bus that never answers becomes a
/// `CredentialStoreError.Kind.timedOut` error, not a hang. Failures say which
/// case it is and what to do: no session bus
/// (`CredentialStoreError.Kind.noSessionBus`), no Secret Service on the bus
/// (`CredentialStoreError.Kind.noSecretService`), a locked collection that was
/// not unlocked (`CredentialStoreError.Kind.locked`), a timeout, or an item
/// whose secret is not a credential (`CredentialStoreError.Kind.corrupt`;
/// such an item is reported and left in place, never deleted by a read).
///
/// ```swift
/// let store = SecretServiceStore()
/// try await store.save(StoredCredential(key: key, token: token))
/// let saved = try await store.load(key)
/// ```
public final class SecretServiceStore: CredentialStore {
    /// Whether the store may ask the person to unlock a locked keyring.
    public enum Unlocking: Sendable, Hashable {
        /// A locked keyring is reported at once as
        /// `CredentialStoreError.Kind.locked`, without a prompt. For programs
        /// that must not wait for a person.
        case never
        /// The keyring is asked to unlock through the Secret Service's Prompt API (what
        /// `secret-tool search --unlock` does): it shows its own unlock dialog (GNOME Keyring's
        /// password prompt, KeePassXC's database unlock window), and Sesame waits up to
        /// `timeout` for the person's answer; a dismissed or unanswered prompt is reported as
        /// `CredentialStoreError.Kind.locked`. Only for programs a person is using and that
        /// asked for it.
        case prompt(timeout: Duration)
    }

    /// The longest any one keyring call may take before it fails with
    /// `CredentialStoreError.Kind.timedOut`. An unlock prompt has its own
    /// limit, in ``unlocking``.
    public let timeout: Duration
    /// Whether, and for how long, a locked keyring may prompt the person to unlock it.
    public let unlocking: Unlocking
    private let worker: KeyringWorker

    /// Creates a store on the session bus's Secret Service. Nothing is contacted until the
    /// first call.
    ///
    /// - Parameters:
    ///   - timeout: the longest one keyring call may take; 3 seconds by default.
    ///   - unlocking: whether a locked keyring may prompt the person, and how long to wait for
    ///     them. By default it may not: a locked keyring is reported at once, with where to
    ///     unlock it, and no dialog surprises a script. Pass `.prompt(timeout:)` when a person
    ///     is there and asked for it (what `secret-tool search --unlock` does).
    public convenience init(timeout: Duration = .seconds(3), unlocking: Unlocking = .never) {
        self.init(timeout: timeout, unlocking: unlocking, worker: .shared)
    }

    init(timeout: Duration, unlocking: Unlocking, worker: KeyringWorker) {
        self.timeout = timeout
        self.unlocking = unlocking
        self.worker = worker
    }

    public var backendDescription: String { "keyring (Secret Service)" }

    // MARK: - CredentialStore

    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, locked, timed out)
    ///   saying what to do.
    public func save(_ credential: StoredCredential) async throws {
        try await SesameLogging.storeOperation("save", self, credential.key) {
            let key = credential.key
            let operation = "saving the credential for \(key)"
            let request = SaveRequest(
                key: key, attributes: KeyringItemFormat.attributes(for: key),
                search: KeyringItemFormat.searchAttributes(for: key),
                label: KeyringItemFormat.label(for: key),
                secret: try KeyringItemFormat.secret(for: credential))

            var outcome = try await call(operation) { client in try Self.store(request, with: client, unlock: false) }
            if outcome == .locked {
                let promptTimeout = try await promptTimeout(operation)
                outcome = try await call(operation, timeout: promptTimeout) { client in
                    try Self.store(request, with: client, unlock: true)
                }
                if outcome == .locked { throw await lockedError { KeyringMessages.unlockDeclined(operation, $0) } }
            }
            if outcome == .noDefaultCollection {
                throw await lockedError { KeyringMessages.noDefaultCollection(key, $0) }
            }
        }
    }

    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, locked, timed out,
    ///   corrupt) saying what to do.
    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        try await SesameLogging.storeOperation("load", self, key) {
            let operation = "reading the credential for \(key)"
            let items = try await readItems(
                KeyringItemFormat.searchAttributes(for: key), everyItem: false, operation: operation)
            let newest = items.filter {
                !$0.isLocked && !KeyringItemFormat.isBeingDeleted($0) && KeyringItemFormat.belongs($0, to: key)
            }
            .max { Self.isOlder($0, than: $1) }
            guard let newest else { return nil }
            return try KeyringItemFormat.credential(from: newest).get()
        }
    }

    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, locked, timed out)
    ///   saying what to do.
    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        try await SesameLogging.storeOperation("delete", self, key) {
            let operation = "deleting the credential for \(key)"
            var result = try await call(operation) { client in try Self.remove(key, with: client, unlock: false) }
            if result.locked > 0 {
                let promptTimeout = try await promptTimeout(operation)
                let retry = try await call(operation, timeout: promptTimeout) { client in
                    try Self.remove(key, with: client, unlock: true)
                }
                if retry.locked > 0 { throw await lockedError { KeyringMessages.unlockDeclined(operation, $0) } }
                result.deleted += retry.deleted
            }
            return result.deleted > 0
        }
    }

    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, locked, timed out)
    ///   saying what to do.
    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        let listing = try await listing(provider: provider)
        guard !listing.unreadable.isEmpty else { return listing.credentials }
        guard listing.unreadable.count > 1 else {
            throw CredentialStoreError(kind: .corrupt, message: listing.unreadable[0].problem)
        }
        let lines: [String] = listing.unreadable.map { "- \($0.problem)" }
        let message =
            "\(listing.unreadable.count) keyring items cannot be read as Sesame credentials:\n"
            + lines.joined(separator: "\n")
        throw CredentialStoreError(kind: .corrupt, message: message)
    }

    /// One `SearchItems` call, locked items included, with no encrypted session: the
    /// Diffie-Hellman exchange that reading a secret needs is left to the listing.
    ///
    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, timed out) saying
    ///   what to do.
    public func containsEntries(provider: ProviderID?) async throws -> Bool {
        var search: [String: String] = [:]
        var operation = "looking for stored credentials"
        if let provider {
            operation += " for \(provider)"
            search[KeyringItemFormat.Attribute.provider] = provider.rawValue
        }
        return try await call(operation, session: false) { [search] client in try client.containsItems(search) }
    }

    /// - Throws: `CredentialStoreError` (no session bus, no Secret Service, locked, timed out)
    ///   saying what to do.
    public func listing(provider: ProviderID?) async throws -> CredentialListing {
        var operation = "listing the credentials"
        var search: [String: String] = [:]
        if let provider {
            operation += " for \(provider)"
            search[KeyringItemFormat.Attribute.provider] = provider.rawValue
        }
        let items = try await readItems(search, everyItem: true, operation: operation)

        var newest: [CredentialKey: KeyringItem] = [:]
        var problems: [UnreadableCredential] = []
        for item in items where !KeyringItemFormat.isBeingDeleted(item) {
            switch KeyringItemFormat.key(of: item) {
            case .failure(let error): problems.append(UnreadableCredential(key: nil, problem: error.message))
            case .success(let key):
                if let other = newest[key], !Self.isOlder(other, than: item) { continue }
                newest[key] = item
            }
        }
        var credentials: [StoredCredential] = []
        for (key, item) in newest {
            switch KeyringItemFormat.credential(from: item) {
            case .success(let credential): credentials.append(credential)
            case .failure(let error): problems.append(UnreadableCredential(key: key, problem: error.message))
            }
        }
        return CredentialListing(credentials: credentials.sorted { $0.key < $1.key }, unreadable: problems)
    }

    // MARK: - Status

    /// What the keyring looks like now, for status and diagnostic output.
    public struct Status: Sendable, Hashable, CustomStringConvertible {
        /// The label of the collection new credentials are saved in (the one the `default`
        /// alias names, “Login” on GNOME), or nil when there is no default collection.
        public var defaultCollection: String?
        /// Whether that collection is locked (using it will ask for it to be unlocked).
        public var isLocked: Bool

        /// Creates a status.
        public init(defaultCollection: String?, isLocked: Bool) {
            self.defaultCollection = defaultCollection
            self.isLocked = isLocked
        }

        public var description: String {
            guard let defaultCollection else { return "Secret Service, no default collection" }
            return "Secret Service, collection “\(defaultCollection)”\(isLocked ? " (locked)" : "")"
        }
    }

    /// Connects to the Secret Service and describes its default collection, without unlocking
    /// anything. Throws the error that any other call would meet: no session bus, no Secret
    /// Service, or a timeout.
    public func status() async throws -> Status {
        try await call("checking the keyring") { client in
            guard let collection = try client.defaultCollection() else {
                return Status(defaultCollection: nil, isLocked: false)
            }
            return Status(defaultCollection: client.label(of: collection), isLocked: client.isLocked(collection))
        }
    }

    /// Connects to the session bus and to the Secret Service on it, and nothing more: the
    /// cheapest check that the keyring is there. Throws what any other call would meet first: no
    /// session bus, no Secret Service, or a timeout. The encrypted session (a Diffie-Hellman
    /// exchange, the costliest step of a read) is left to the first call that reads or writes a
    /// secret, so that a caller can do other work beside it (`sesame status` loads libcurl then).
    public func checkReachable() async throws {
        try await call("connecting to the keyring", session: false) { _ in () }
    }

    // MARK: - Calls

    private struct SaveRequest: Sendable {
        var key: CredentialKey
        var attributes: [String: String]
        var search: [String: String]
        var label: String
        var secret: [UInt8]
    }

    private enum SaveOutcome: Sendable { case saved, locked, noDefaultCollection }

    /// Writes the item (in the worker). Does not prompt unless `unlock` is set.
    private static func store(
        _ request: SaveRequest, with client: LibSecretClient, unlock: Bool
    ) throws
        -> SaveOutcome
    {
        // The collection is looked up again if it vanishes between the lookup and the write
        // (see LibSecretClient.defaultCollection).
        let path: String?
        // Every item of the credential, whichever version wrote it, searched once for both the
        // update in place and the clean-up of copies.
        var existing: [GObjectReference<SecretItem>] = []
        do {
            path = try client.retryingVanishedObjects { () throws -> String in
                let collection = try client.collectionForDefaultAlias()
                if client.isLocked(collection) {
                    guard unlock, try client.unlock(collection) else {
                        throw LibSecretError(stage: .call, failure: .locked, message: "the collection is locked")
                    }
                }
                // An item Sesame wrote there before gets the new secret in place. Asking the
                // service to replace it (CreateItem with `replace`) makes KeePassXC 2.7 show an
                // access dialog to every process but the one that created the item.
                let prefix = sesame_object_path(collection.pointer).map { String(cString: $0) + "/" } ?? "\u{0}"
                existing = try client.search(request.search).filter {
                    KeyringItemFormat.belongs(client.read($0), to: request.key)
                }
                for item in existing {
                    let found = client.read(item)
                    guard found.path.hasPrefix(prefix), !found.isLocked,
                        found.attributes[KeyringItemFormat.Attribute.schemaVersion]
                            == request.attributes[KeyringItemFormat.Attribute.schemaVersion]
                    else { continue }
                    try client.overwrite(item, with: request.secret)
                    return found.path
                }
                return try client.create(
                    in: collection, attributes: request.attributes, label: request.label, secret: request.secret)
            }
        } catch let error as LibSecretError where error.failure == .locked {
            return .locked
        }
        guard let path else { return .noDefaultCollection }
        // One item per credential: copies of it elsewhere (another collection, or written with
        // other attributes, for example by hand) are replaced by the one just saved. A copy in a
        // locked collection stays; the newest item is the one read.
        var cleanup = DeleteOutcome()
        for item in existing where client.read(item).path != path {
            try cleanup.record(Result { () throws(LibSecretError) in try client.scrubAndDelete(item) })
        }
        return .saved
    }

    /// Deletes the items of `key` (in the worker). Does not prompt unless `unlock` is set.
    private static func remove(
        _ key: CredentialKey, with client: LibSecretClient, unlock: Bool
    ) throws
        -> DeleteOutcome
    {
        let search = KeyringItemFormat.searchAttributes(for: key)
        if unlock { try unlockAll(search, with: client) }
        var outcome = DeleteOutcome()
        let items = try client.search(search).filter { KeyringItemFormat.belongs(client.read($0), to: key) }
        // A locked collection that could not be searched (KeePassXC) may hold the credential.
        if client.notes.skippedLockedCollection { outcome.locked += 1 }
        for item in items {
            // The token is overwritten first: a service may keep deleted items (KeePassXC's
            // Recycle Bin), and the token must not stay in them.
            try outcome.record(Result { () throws(LibSecretError) in try client.scrubAndDelete(item) })
        }
        return outcome
    }

    /// Asks the service to unlock its locked collections, then the locked items matching
    /// `search` (KeePassXC locks items a client may not read yet), which may show the person
    /// prompts. A collection still locked (the prompt was dismissed) is left so: searching it
    /// would make KeePassXC show its unlock window again and wait.
    private static func unlockAll(_ search: [String: String], with client: LibSecretClient) throws {
        let locked = try client.collectionLocks().filter(\.locked).map(\.path)
        guard try client.unlock(paths: locked) else { return }
        _ = try client.search(search, unlock: true)
    }

    private struct DeleteOutcome: Sendable {
        var deleted = 0
        var locked = 0

        /// Counts one deletion; an item deleted meanwhile by someone else is not an error.
        mutating func record(_ result: Result<Void, LibSecretError>) throws {
            switch result {
            case .success: deleted += 1
            case .failure(let error) where error.failure == .locked: locked += 1
            case .failure(let error) where error.failure == .noSuchObject: break
            case .failure(let error): throw error
            }
        }
    }

    /// The items matching `search`. Locked ones are unlocked first (when allowed): when
    /// `everyItem` is set, if any is locked; otherwise only if no unlocked one matches.
    private func readItems(
        _ search: [String: String], everyItem: Bool, operation: String
    ) async throws
        -> [KeyringItem]
    {
        // The session is opened by the read, once it has a secret to read.
        let (items, skippedLocked) = try await call(operation, session: false) { client in
            (try client.items(search), client.notes.skippedLockedCollection)
        }
        // A locked collection that could not be searched (KeePassXC) may hold the credential.
        let needsUnlock =
            everyItem
            ? items.contains(where: \.isLocked) || skippedLocked
            : (!items.isEmpty && items.allSatisfy(\.isLocked)) || (skippedLocked && !items.contains { !$0.isLocked })
        guard needsUnlock else { return items }
        let promptTimeout = try await promptTimeout(operation)
        let (unlocked, stillSkipped) = try await call(operation, timeout: promptTimeout) { client in
            try Self.unlockAll(search, with: client)
            // Searched again so that the items' locked state and secrets are read afresh.
            return (try client.items(search), client.notes.skippedLockedCollection)
        }
        if unlocked.contains(where: \.isLocked) || (stillSkipped && !unlocked.contains { !$0.isLocked }) {
            throw await lockedError { KeyringMessages.unlockDeclined(operation, $0) }
        }
        return unlocked
    }

    private func promptTimeout(_ operation: String) async throws -> Duration {
        switch unlocking {
        case .never: throw await lockedError { KeyringMessages.lockedWithoutPrompt(operation, $0) }
        case .prompt(let timeout): return timeout
        }
    }

    /// The error `make` builds with the program that provides the Secret Service, so that it
    /// can say where to unlock it (nil when that cannot be told).
    private func lockedError(
        _ make: (SecretServiceProvider?) -> CredentialStoreError
    ) async -> CredentialStoreError {
        let provider = try? await call("asking who provides the Secret Service") { client in client.provider() }
        return make(provider ?? nil)
    }

    /// Runs `body` with a connected client on the keyring worker, bounded by `timeout`, and
    /// turns libsecret's failures into `CredentialStoreError`s.
    private func call<T: Sendable>(
        _ operation: String, timeout: Duration? = nil, session: Bool = true,
        _ body: @escaping @Sendable (LibSecretClient) throws -> T
    ) async throws -> T {
        let limit = timeout ?? self.timeout
        do {
            return try await worker.run(
                timeout: limit, timeoutError: { stage in KeyringMessages.timedOut(stage: stage, operation, limit) }
            ) { cancellation in
                try body(try LibSecretClient(cancellation, session: session))
            }
        } catch let error as CredentialStoreError where error.kind == .locked {
            // An unlock prompt that was not answered in time: say where to unlock.
            throw await lockedError { KeyringMessages.timedOut(stage: .unlockPrompt, operation, limit, $0) }
        } catch let error as LibSecretError where error.failure == .locked {
            throw await lockedError { KeyringMessages.unlockDeclined(operation, $0) }
        } catch let error as LibSecretError {
            throw KeyringMessages.storeError(error, operation, limit)
        }
    }

    private static func isOlder(_ item: KeyringItem, than other: KeyringItem) -> Bool {
        if item.modified != other.modified { return item.modified < other.modified }
        // On a tie, the item Sesame wrote (it has schema_version) wins over a hand-written one.
        let name = KeyringItemFormat.Attribute.schemaVersion
        return item.attributes[name] == nil && other.attributes[name] != nil
    }
}

/// The messages of the store's errors: what happened, to what, and what to do.
enum KeyringMessages {
    static let fileStoreHint = text(
        "on a machine without a desktop keyring, choose the file store instead (storage policy `file`, or ",
        "`keyring-or-file`)")
    /// Where to unlock the keyring, for the service that provides it.
    static func unlockHint(_ provider: SecretServiceProvider?) -> String {
        guard let provider, provider.kind != .other || provider.processName != nil else {
            return text(
                "Unlock the keyring (in the program that provides the Secret Service, or with `secret-tool search ",
                "--unlock xdg:schema org.sesame.Credential`) and try again.")
        }
        let advice = provider.unlockAdvice
        return
            "The Secret Service here is \(provider.name): \(advice.prefix(1).uppercased() + advice.dropFirst()), and try again."
    }

    static func storeError(_ error: LibSecretError, _ operation: String, _ timeout: Duration) -> CredentialStoreError {
        let detail = error.message
        switch (error.stage, error.failure) {
        case (_, .cancelled), (_, .noReply): return timedOut(stage: error.stage, operation, timeout)
        case (.bus, _), (_, .disconnected): return noSessionBus(operation, detail: detail)
        case (_, .noService): return noSecretService(operation, detail: detail)
        case (_, .locked): return unlockDeclined(operation, nil)
        case (.service, _):
            let message = text(
                "The desktop keyring's Secret Service refused to open a session for Sesame (\(detail)), so ",
                "\(operation) failed. Restart the keyring daemon and try again; \(fileStoreHint).")
            return CredentialStoreError(kind: .unavailable, message: message)
        case (_, .accessDenied):
            let message = text(
                "The desktop keyring refused \(operation) (\(detail)). Check that it lets this program use it (a ",
                "sandbox or the keyring's own settings may block it).")
            return CredentialStoreError(kind: .ioFailure, message: message)
        default:
            let message = text(
                "The desktop keyring failed while \(operation) (\(detail)). Try again; if it keeps failing, restart ",
                "the keyring daemon.")
            return CredentialStoreError(kind: .ioFailure, message: message)
        }
    }

    static func noSessionBus(_ operation: String, detail: String) -> CredentialStoreError {
        let situation: String
        if let address = busAddress {
            situation = text(
                "the D-Bus session bus at \(address) cannot be reached (\(detail)); DBUS_SESSION_BUS_ADDRESS may be ",
                "left over from a session that has ended, for example in ssh, tmux or screen")
        } else {
            situation = "there is no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set; \(detail))"
        }
        let message = text(
            "Sesame could not reach the desktop keyring while \(operation): \(situation). Run the program inside ",
            "your desktop session, or give it a bus with `dbus-run-session -- <command>`; \(fileStoreHint).")
        return CredentialStoreError(kind: .noSessionBus, message: message)
    }

    static func noSecretService(_ operation: String, detail: String) -> CredentialStoreError {
        let message = text(
            "Sesame could not reach the desktop keyring while \(operation): no Secret Service is running on the ",
            "session bus, and none can be started (\(detail)). Start a keyring that provides it (GNOME Keyring: ",
            "`gnome-keyring-daemon --start --components=secrets`, or KeePassXC with its Secret Service ",
            "integration turned on); \(fileStoreHint).")
        return CredentialStoreError(kind: .noSecretService, message: message)
    }

    static func lockedWithoutPrompt(_ operation: String, _ provider: SecretServiceProvider?) -> CredentialStoreError {
        let message = text(
            "The keyring is locked, and Sesame does not unlock it by itself, so \(operation) was not done. ",
            unlockHint(provider))
        return CredentialStoreError(kind: .locked, message: message)
    }

    static func unlockDeclined(_ operation: String, _ provider: SecretServiceProvider?) -> CredentialStoreError {
        let message = text(
            "The keyring is locked and was not unlocked: the unlock prompt was dismissed or could not be shown, so ",
            "\(operation) was not done. \(unlockHint(provider))")
        return CredentialStoreError(kind: .locked, message: message)
    }

    static func noDefaultCollection(_ key: CredentialKey, _ provider: SecretServiceProvider?) -> CredentialStoreError {
        let provider = provider ?? SecretServiceProvider(kind: .other, processName: nil, processID: nil)
        // The key is quoted: it ends with the account (“— default”), which a reader would
        // otherwise run into the rest of the sentence.
        let message = text(
            "The desktop keyring (\(provider.name)) has no default collection, so the credential for “\(key)” ",
            "could not be saved. To fix it, \(provider.defaultCollectionAdvice); then try again.")
        return CredentialStoreError(kind: .unavailable, message: message)
    }

    static func timedOut(
        stage: KeyringStage, _ operation: String, _ timeout: Duration, _ provider: SecretServiceProvider? = nil
    ) -> CredentialStoreError {
        let limit = describe(timeout)
        switch stage {
        case .bus:
            let bus = busAddress.map { "The D-Bus session bus at \($0)" } ?? "The D-Bus session bus"
            let message = text(
                "\(bus) did not answer within \(limit), so \(operation) was not done. The bus may be hung, or ",
                "DBUS_SESSION_BUS_ADDRESS may point at something that is not a bus; check it, or log in again.")
            return CredentialStoreError(kind: .timedOut, message: message)
        case .service:
            let message = text(
                "The Secret Service on the session bus did not answer within \(limit), so \(operation) was not done. ",
                "The keyring daemon may be hung; restart it (or log in again) and try again.")
            return CredentialStoreError(kind: .timedOut, message: message)
        case .call:
            let message = text(
                "The desktop keyring did not answer within \(limit) while \(operation). It may be busy, hung, or ",
                "waiting on a prompt nobody can see; try again, and restart the keyring daemon if it keeps happening.")
            return CredentialStoreError(kind: .timedOut, message: message)
        case .unlockPrompt:
            let message = text(
                "The keyring is locked and its unlock prompt was not answered within \(limit), so \(operation) was ",
                "not done. \(unlockHint(provider))")
            return CredentialStoreError(kind: .locked, message: message)
        }
    }

    /// The session bus address from the environment, when set.
    static var busAddress: String? {
        guard let value = getenv("DBUS_SESSION_BUS_ADDRESS") else { return nil }
        let address = String(cString: value)
        return address.isEmpty ? nil : address
    }

    /// `3 s`, `1.5 s`, `250 ms`.
    static func describe(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds: Int64 = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
        return "\(Double(milliseconds) / 1000) s"
    }

    /// The parts, joined: long messages without a chain of `+` for the type checker.
    static func text(_ parts: String...) -> String { parts.joined() }
}

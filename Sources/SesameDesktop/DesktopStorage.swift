import Foundation
import Sesame
import SesameKeyring

/// The store a desktop app keeps its logins in, and why that one.
public struct StorageSelection: Sendable {
    /// The store.
    public var store: any CredentialStore
    /// What it is, for people: `keyring (Secret Service)`, `file /path (0600)`, `memory only (...)`.
    public var backend: String
    /// Why it is the one in use: the mode and where the mode came from.
    public var reason: String
    /// What kind of store it is, in one word: `keyring`, `file`, `memory`, or a registered
    /// ``StorageBackend``'s name (`pass`, `postgres`).
    public var kind: String

    /// Creates a selection.
    public init(store: any CredentialStore, backend: String, reason: String, kind: String) {
        self.store = store
        self.backend = backend
        self.reason = reason
        self.kind = kind
    }
}

/// Picks the credential store for a ``StorageMode``: never a silent downgrade from the keyring
/// to a file; the file is used only when the mode says so. What each mode means is decided
/// once, by `StoragePolicy.resolve(fileURL:openKeyring:)` in SesameKeyring; this adds where the
/// mode came from and the way out when the keyring is missing.
public enum DesktopStorage {
    /// Opens and checks the keyring store, returning it and what it is in words. Throws a
    /// `CredentialStoreError` whose `isUnavailable` is true when there is no keyring (no session
    /// bus, no Secret Service); any other error (a locked or silent keyring) is passed on.
    public typealias KeyringFactory = @Sendable () async throws -> (store: any CredentialStore, backend: String)

    /// Selects the store for `mode`.
    ///
    /// - Parameters:
    ///   - mode: the mode and where it came from.
    ///   - keyring: opens the keyring store (``secretService`` in a real program).
    ///   - environment: for the file store's location (`$XDG_STATE_HOME`) and the registered
    ///     stores' settings (the password store's `PASSWORD_STORE_DIR`, `HOME` and
    ///     `PASSWORD_STORE_SIGNING_KEY`, say).
    /// - Throws: ``DesktopError`` (69, unavailable) when the keyring is needed and missing, and
    ///   when `auto` finds neither a keyring nor a registered store that is ready (naming the
    ///   choices); the keyring's own `CredentialStoreError` when it is there but locked or silent.
    public static func select(
        _ mode: Sourced<StorageMode>, keyring: KeyringFactory,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> StorageSelection {
        let why = "storage mode '\(mode.value)' from \(mode.source)"
        if let backend = mode.value.backend { return try open(backend, environment: environment, why: why) }
        guard let policy = mode.value.policy else {
            throw DesktopError(
                "The storage mode '\(mode.value)' is not registered in this program.", status: .config)
        }
        let url = FileCredentialStore.defaultURL(environment: environment)
        let resolved: ResolvedStorage
        do {
            // `auto` is the keyring first; the registered stores come after, below.
            resolved = try await (policy == .auto ? .keyring : policy).resolve(
                fileURL: url,
                openKeyring: {
                    let made = try await keyring()
                    return (made.store, made.backend)
                })
        } catch let error as CredentialStoreError where error.isUnavailable {
            guard mode.value == .auto else { throw unavailable(error) }
            for backend in Desktop.storageBackends {
                guard let ready = backend.readiness(environment: environment) else { continue }
                var selection = try open(backend, environment: environment, why: why)
                selection.reason = "\(why): there is no desktop keyring (\(keyringAbsence(error))), and \(ready)"
                return selection
            }
            throw noStore(error)
        }
        let backend =
            switch resolved.backend {
            case .keyring: resolved.detail
            case .file: "file \(url.path) (0600)"
            case .memory: "memory only (the login is gone when this program exits)"
            case .pass: resolved.detail
            }
        let reason = resolved.fallbackReason.map { error in
            "\(why): the keyring is not available (\(unavailable(error).message))"
        }
        return StorageSelection(
            store: resolved.store, backend: backend, reason: reason ?? why, kind: resolved.backend.rawValue)
    }

    /// The registered store `backend`, opened.
    private static func open(
        _ backend: any StorageBackend, environment: [String: String], why: String
    ) throws -> StorageSelection {
        let opened = try backend.open(environment: environment)
        return StorageSelection(store: opened.store, backend: opened.backend, reason: why, kind: backend.name)
    }

    /// What `sesame doctor` says of the selected store: its registered backend's lines, none for
    /// the keyring, the file and memory.
    public static func doctorLines(for selection: StorageSelection) async -> [DoctorLine] {
        guard let backend = Desktop.storageBackends.first(where: { $0.name == selection.kind }) else { return [] }
        return await backend.doctorLines(for: selection.store)
    }

    /// Why there is no keyring, in a few words.
    private static func keyringAbsence(_ error: CredentialStoreError) -> String {
        error.kind == .noSessionBus
            ? "there is no D-Bus session bus"
            : error.kind == .noSecretService
                ? "no Secret Service runs on the session bus"
                : "the keyring cannot be reached"
    }

    /// The error of the `auto` mode when there is neither a keyring nor a registered store that
    /// is ready: the ways on, never a silent plain file.
    private static func noStore(_ error: CredentialStoreError) -> DesktopError {
        let advice = Desktop.storageBackends.compactMap(\.setupAdvice).map { $0 + "; or " }.joined()
        var failure = DesktopError(
            "There is nowhere safe to keep logins here: no desktop keyring (\(keyringAbsence(error)))"
                + (Desktop.storageBackends.isEmpty ? "" : " and no other store ready")
                + ". Choose one: \(advice)run inside a desktop session with a keyring; or keep them "
                + "in a plain 0600 file by choosing the `file` storage policy (SESAME_STORAGE=file).",
            status: .unavailable)
        failure.suggestsFileStore = true
        return failure
    }

    /// How renewals of logins kept in `mode`'s store are kept apart: a lock file per login in
    /// `$XDG_STATE_HOME/sesame/locks` for the stores of one machine, what a registered store says for
    /// its own (PostgreSQL's advisory lock for a fleet's).
    public static func refreshLocking(for mode: StorageMode, environment: [String: String]) -> RefreshLocking {
        mode.backend?.refreshLocking(environment: environment)
            ?? .directory(RefreshLock.defaultDirectory(environment: environment))
    }

    /// The error for a keyring that is needed and absent: one sentence, with the way out in a
    /// library's terms (the storage policy, `SESAME_STORAGE`); a command line adds its flag.
    private static func unavailable(_ error: CredentialStoreError) -> DesktopError {
        let why = keyringAbsence(error)
        var failure = DesktopError(
            "There is no desktop keyring here (\(why)); run inside your desktop session (or under dbus-run-session), "
                + "or keep logins in a 0600 file: choose the `file` storage policy (in DesktopConfiguration, or with "
                + "SESAME_STORAGE=file).", status: .unavailable)
        failure.suggestsFileStore = true
        return failure
    }
}

/// Which account is active per provider, and the last rate-limit usage seen per account: a
/// small JSON file, `$XDG_STATE_HOME/sesame/accounts.json`, replaced atomically under a lock on
/// `accounts.json.lock` (as the credentials file is), so concurrent processes lose no change. No
/// secrets.
///
/// Every call reads or writes the file on a thread of its own (waiting for the lock may take as
/// long as another process holds it), never on the cooperative pool.
public struct AccountState: Sendable {
    /// The file.
    public var url: URL {
        get { file.url }
        set { file = JSONStateFile(url: newValue) }
    }

    /// Kept as a path: `sesame token` reads it at start (see `XDG.stateFilePath`).
    private var file: JSONStateFile

    /// Whether changes are kept only in memory, for logins that are (`--storage memory`):
    /// then nothing is written, and the file is only read.
    package var writesNothing = false

    /// The state file under `environment`'s `$XDG_STATE_HOME`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        file = JSONStateFile(path: XDG.stateFilePath("accounts.json", environment: environment))
    }

    /// The active account for `provider` (`default` when none was chosen): with `appID`, the
    /// one chosen for that app (a GitHub host) when there is one, else the provider's.
    public func activeAccount(for provider: ProviderID, appID: String? = nil) async -> String {
        await snapshot().activeAccount(for: provider, appID: appID)
    }

    /// The whole file as it is now, read once: for a command that asks several questions of it
    /// (`sesame status` asks for each provider's active account and each login's last usage).
    public func snapshot() async -> Snapshot {
        let file = self.file
        return Snapshot(contents: await onOwnThread { file.read() })
    }

    /// The accounts state as it was when ``AccountState/snapshot()`` read it.
    public struct Snapshot: Sendable {
        let contents: [String: JSONValue]

        /// The active account for `provider`, as ``AccountState/activeAccount(for:appID:)`` answers.
        public func activeAccount(for provider: ProviderID, appID: String? = nil) -> String {
            let active = contents["active"]
            if let appID, let account = active?["\(provider.rawValue)/\(appID)"]?.stringValue { return account }
            return active?[provider.rawValue]?.stringValue ?? "default"
        }

        /// Whether an active account is recorded for `provider`, for any of its apps: a login was
        /// made and has not been logged out of (logging out of the last one clears it), unless its
        /// store was emptied by other means.
        public func hasActiveAccount(for provider: ProviderID) -> Bool {
            guard let active = contents["active"]?.objectValue else { return false }
            let name = provider.rawValue
            return active.keys.contains { $0 == name || $0.hasPrefix(name + "/") }
        }

        /// The last rate-limit usage recorded for `key`, as ``AccountState/lastUsage(for:)`` answers.
        public func lastUsage(for key: CredentialKey) -> JSONValue? { contents["usage"]?[AccountState.name(key)] }
    }

    /// Makes `account` the active one for `provider`, and for its app `appID` when given, so that
    /// each app (each GitHub host) keeps its own active account.
    ///
    /// - Throws: `CredentialStoreError` when the state directory or its lock cannot be used;
    ///   Foundation's error when the file cannot be written.
    public func setActiveAccount(_ account: String, for provider: ProviderID, appID: String? = nil) async throws {
        try await modify { object in
            var active = object["active"]?.objectValue ?? [:]
            active[provider.rawValue] = .string(account)
            if let appID { active["\(provider.rawValue)/\(appID)"] = .string(account) }
            object["active"] = .object(active)
        }
    }

    /// Forgets that `account` is the active one for `provider`'s app `appID`, after its last
    /// login there was logged out of; the provider's own entry goes too when it names `account`
    /// and no other app of the provider has one.
    ///
    /// - Throws: `CredentialStoreError` when the state directory or its lock cannot be used;
    ///   Foundation's error when the file cannot be written.
    public func clearActiveAccount(_ account: String, for provider: ProviderID, appID: String) async throws {
        try await modify { object in
            guard var active = object["active"]?.objectValue else { return }
            active["\(provider.rawValue)/\(appID)"] = nil
            let otherApps = active.keys.contains { $0.hasPrefix(provider.rawValue + "/") }
            if !otherApps, active[provider.rawValue]?.stringValue == account { active[provider.rawValue] = nil }
            object["active"] = .object(active)
        }
    }

    /// The last rate-limit usage seen for `key`, as JSON.
    public func lastUsage(for key: CredentialKey) async -> JSONValue? {
        await snapshot().lastUsage(for: key)
    }

    /// Records the last rate-limit usage seen for `key`.
    ///
    /// - Throws: `CredentialStoreError` when the state directory or its lock cannot be used;
    ///   Foundation's error when the file cannot be written.
    public func recordUsage(_ usage: JSONValue, for key: CredentialKey) async throws {
        try await modify { object in
            var all = object["usage"]?.objectValue ?? [:]
            all[Self.name(key)] = usage
            object["usage"] = .object(all)
        }
    }

    /// Changes the file under its lock, on a thread of its own; nothing when ``writesNothing``.
    private func modify(_ change: @escaping @Sendable (inout [String: JSONValue]) -> Void) async throws {
        guard !writesNothing else { return }
        let file = self.file
        try await onOwnThread { try file.modify(change) }
    }

    fileprivate static func name(_ key: CredentialKey) -> String {
        "\(key.provider.rawValue)/\(key.appID)/\(key.account)"
    }
}

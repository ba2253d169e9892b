import Foundation
import Sesame

/// The store a desktop app keeps its logins in, and why that one.
public struct StorageSelection: Sendable {
    /// The store.
    public var store: any CredentialStore
    /// What it is, for people: `keyring (Secret Service)`, `file /path (0600)`, `memory`.
    public var backend: String
    /// Why it is the one in use: the mode and where the mode came from.
    public var reason: String

    /// Creates a selection.
    public init(store: any CredentialStore, backend: String, reason: String) {
        self.store = store
        self.backend = backend
        self.reason = reason
    }
}

/// Picks the credential store for a ``StorageMode``: never a silent downgrade from the keyring
/// to a file; the file is used only when the mode says so.
public enum DesktopStorage {
    /// Makes the keyring store, or throws ``DesktopError`` saying why there is none. Set by the
    /// keyring backend; `nil` in a build without one.
    public typealias KeyringFactory = @Sendable () async throws -> (store: any CredentialStore, backend: String)

    /// Selects the store for `mode`.
    ///
    /// - Parameters:
    ///   - mode: the mode and where it came from.
    ///   - keyring: makes the keyring store; `nil` when this build has no keyring backend.
    ///   - environment: for the file store's location (`$XDG_STATE_HOME`).
    /// - Throws: ``DesktopError`` (69, unavailable) when the keyring is needed and missing.
    public static func select(
        _ mode: Sourced<StorageMode>, keyring: KeyringFactory?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> StorageSelection {
        let why = "storage mode '\(mode.value)' from \(mode.source)"
        func file(_ reason: String) -> StorageSelection {
            let url = FileCredentialStore.defaultURL(environment: environment)
            return StorageSelection(
                store: FileCredentialStore(url: url), backend: "file \(url.path) (0600)", reason: reason)
        }
        switch mode.value {
        case .memory:
            return StorageSelection(store: InMemoryCredentialStore(), backend: "memory", reason: why)
        case .file:
            return file(why)
        case .keyring, .keyringOrFile:
            do {
                guard let keyring else {
                    throw DesktopError(
                        "This build of Sesame has no keyring backend, so logins cannot be kept in the keyring; opt in "
                            + "to a plain file with --storage file or SESAME_STORAGE=file.", status: .unavailable)
                }
                let made = try await keyring()
                return StorageSelection(store: made.store, backend: made.backend, reason: why)
            } catch let error as DesktopError where mode.value == .keyringOrFile {
                return file("\(why): the keyring is not available (\(error.message))")
            }
        }
    }
}

/// Which account is active per provider, and the last rate-limit usage seen per account: a
/// small JSON file, `$XDG_STATE_HOME/sesame/accounts.json`, replaced atomically. No secrets.
public struct AccountState: Sendable {
    /// The file.
    public var url: URL

    /// The state file under `environment`'s `$XDG_STATE_HOME`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.url = XDG.stateDirectory(environment: environment).appendingPathComponent("accounts.json")
    }

    private func read() -> [String: JSONValue] {
        FileManager.default.contents(atPath: url.path).flatMap { JSONValue(parsing: $0)?.objectValue } ?? [:]
    }

    private func write(_ object: [String: JSONValue]) throws {
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try Data(JSONValue.object(object).jsonText.utf8).write(to: url, options: .atomic)
    }

    /// The active account for `provider` (`default` when none was chosen).
    public func activeAccount(for provider: ProviderID) -> String {
        read()["active"]?[provider.rawValue]?.stringValue ?? "default"
    }

    /// Makes `account` the active one for `provider`.
    public func setActiveAccount(_ account: String, for provider: ProviderID) throws {
        var object = read()
        var active = object["active"]?.objectValue ?? [:]
        active[provider.rawValue] = .string(account)
        object["active"] = .object(active)
        try write(object)
    }

    /// The last rate-limit usage seen for `key`, as JSON.
    public func lastUsage(for key: CredentialKey) -> JSONValue? { read()["usage"]?[Self.name(key)] }

    /// Records the last rate-limit usage seen for `key`.
    public func recordUsage(_ usage: JSONValue, for key: CredentialKey) throws {
        var object = read()
        var all = object["usage"]?.objectValue ?? [:]
        all[Self.name(key)] = usage
        object["usage"] = .object(all)
        try write(object)
    }

    private static func name(_ key: CredentialKey) -> String { "\(key.provider.rawValue)/\(key.appID)/\(key.account)" }
}

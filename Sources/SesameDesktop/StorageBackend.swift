import Foundation
import Sesame

/// A store beyond the keyring, the file and memory, which the program hands in with
/// ``Desktop/bootstrap(_:storage:emulators:)`` (as swift-log's app hands in its handler): the
/// password store (`PassStorage`, in SesamePassDesktop), a fleet's PostgreSQL (`PostgresStorage`,
/// in SesamePostgresDesktop). A program that registers none links neither, nor their C libraries.
///
/// It is chosen by its ``name`` (`--storage NAME`, `SESAME_STORAGE`, the config file's `storage`),
/// or by `auto` when there is no keyring and ``readiness(environment:)`` says it is ready.
public protocol StorageBackend: Sendable {
    /// The mode's name: `pass`, `postgres`.
    var name: String { get }
    /// One line about it, for help output.
    var summary: String { get }
    /// Why `auto` may use it here when there is no keyring ("the password store ~/.password-store
    /// is initialised"), or `nil` when it is not ready or must be chosen by name. `nil` by default.
    func readiness(environment: [String: String]) -> String?
    /// What to do to make it ready, for the refusal of `auto` when nothing is ("run `pass init
    /// KEYID` with your GnuPG key (then logins go to pass)"); `nil` by default.
    var setupAdvice: String? { get }
    /// Opens the store; sends nothing anywhere yet.
    ///
    /// - Returns: the store and what it is, in words.
    /// - Throws: ``DesktopError`` for a setting that is missing or wrong.
    func open(environment: [String: String]) throws -> (store: any CredentialStore, backend: String)
    /// How renewals of its logins are kept apart: by default a lock file per login in
    /// `$XDG_RUNTIME_DIR`, for a store of one machine.
    func refreshLocking(environment: [String: String]) -> RefreshLocking
    /// The rate-limit budget that `appID` of `provider` shares with every other process using this
    /// store (a fleet's, in its database), or `nil` (the default) for each process's own.
    func rateLimitBudget(provider: ProviderID, appID: String, environment: [String: String]) -> (any RateLimitBudget)?
    /// What `sesame doctor` says of the store once opened; none by default.
    func doctorLines(for store: any CredentialStore) async -> [DoctorLine]
}

extension StorageBackend {
    public func readiness(environment: [String: String]) -> String? { nil }
    public var setupAdvice: String? { nil }
    public func refreshLocking(environment: [String: String]) -> RefreshLocking {
        .directory(RefreshLock.defaultDirectory(environment: environment))
    }
    public func rateLimitBudget(
        provider: ProviderID, appID: String, environment: [String: String]
    ) -> (any RateLimitBudget)? { nil }
    public func doctorLines(for store: any CredentialStore) async -> [DoctorLine] { [] }
}

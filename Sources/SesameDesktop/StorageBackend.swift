import Foundation
import Sesame

/// A store beyond the keyring, the file and memory, which the program hands in with
/// ``Desktop/bootstrap(_:storage:emulators:programName:)`` (as swift-log's app hands in its handler): the
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
    /// What `sesame doctor` says of this backend on this machine, whether it is in use or not
    /// (whether it is set up, whether its files are safe); none by default.
    func doctorLines(environment: [String: String]) -> [DoctorLine]
    /// The accounts `store` (opened by this backend) holds for `provider`, read without decrypting
    /// anything or asking for a passphrase, for shell completion; `nil` (the default) reads the
    /// store's listing instead.
    func accountNames(in store: any CredentialStore, provider: ProviderID) async -> Set<String>?
    /// The environment variables it reads and what each means, for the manual page; none by default.
    var variables: [(name: String, summary: String)] { get }
    /// What a failure of its store means for a program's exit status, for the kinds it adds to
    /// `CredentialStoreError` (a wrong key is a setting to fix, ``DesktopError/Status/config``);
    /// `nil` (the default) for the kinds every store shares.
    func status(of error: CredentialStoreError) -> DesktopError.Status?
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
    public func doctorLines(environment: [String: String]) -> [DoctorLine] { [] }
    public func accountNames(in store: any CredentialStore, provider: ProviderID) async -> Set<String>? { nil }
    public var variables: [(name: String, summary: String)] { [] }
    public func status(of error: CredentialStoreError) -> DesktopError.Status? { nil }
}

import Foundation
import Sesame
import SesameDesktop
import SesamePass

/// The standard Unix password store as a program registers it
/// (`Desktop.bootstrap(..., storage: [PassStorage()])`): `--storage pass` (or
/// `SESAME_STORAGE=pass`) keeps logins in `pass`, encrypted with GnuPG, and `auto` uses it when
/// there is no desktop keyring and the store is initialised (has a `.gpg-id`). Its location is
/// `PASSWORD_STORE_DIR` (or `~/.password-store`); GnuPG's home, `GNUPGHOME`; the keys its `.gpg-id`
/// files must be signed by, `PASSWORD_STORE_SIGNING_KEY`, as for `pass`.
public struct PassStorage: StorageBackend {
    /// Creates the registration.
    public init() {}

    public var name: String { "pass" }

    public var summary: String { "the password store (pass, GnuPG), for machines without a keyring" }

    /// Ready when the password store is initialised.
    public func readiness(environment: [String: String]) -> String? {
        let directory = PassCredentialStore.defaultDirectory(environment: environment)
        guard PassCredentialStore.isInitialised(directory) else { return nil }
        return "the password store \(directory.path) is initialised"
    }

    public var setupAdvice: String? {
        "run `pass init KEYID` with your GnuPG key (then logins go to pass)"
    }

    public func open(environment: [String: String]) throws -> (store: any CredentialStore, backend: String) {
        let directory = PassCredentialStore.defaultDirectory(environment: environment)
        let store = PassCredentialStore(
            directory: directory, gnupgHome: environment["GNUPGHOME"].flatMap { $0.isEmpty ? nil : $0 },
            signingKeys: PassCredentialStore.defaultSigningKeys(environment: environment))
        return (store, "password store \(directory.path) (pass, GnuPG)")
    }

    /// Whether there is an initialised password store, which the `auto` policy uses without a
    /// keyring; when there is, whether another user could have changed it (which Sesame refuses),
    /// and whether gpg-agent's secure memory can grow for many decryptions at once.
    public func doctorLines(environment: [String: String]) -> [DoctorLine] {
        let directory = PassCredentialStore.defaultDirectory(environment: environment)
        guard PassCredentialStore.isInitialised(directory) else {
            return [
                DoctorLine(
                    .info, "No initialised password store (pass) at \(directory.path)",
                    fix: "`pass init KEYID` makes one, which is used when there is no keyring")
            ]
        }
        var lines = [DoctorLine(.ok, "Password store (pass): \(directory.path), initialised.")]
        let gnupgHome = PassCredentialStore.defaultGnuPGHome(environment: environment)
        let store = PassCredentialStore(directory: directory, gnupgHome: gnupgHome.path, signingKeys: [])
        if let problem = store.permissionProblem() {
            lines.append(DoctorLine(.problem, "Password store (pass): \(problem.message)"))
        }
        if !PassCredentialStore.agentExpandsSecureMemory(gnupgHome: gnupgHome) {
            let file = gnupgHome.appendingPathComponent("gpg-agent.conf").path
            lines.append(
                DoctorLine(
                    .info,
                    "gpg-agent's secure memory cannot grow (no auto-expand-secmem in \(file)), so when many "
                        + "processes decrypt at once some may fail with \"Cannot allocate memory\"",
                    fix: "add the line `auto-expand-secmem` to \(file) and restart the agent (`gpgconf --kill "
                        + "gpg-agent`)"))
        }
        return lines
    }

    /// The entries' names say the accounts: nothing is decrypted, no passphrase asked.
    public func accountNames(in store: any CredentialStore, provider: ProviderID) async -> Set<String>? {
        guard let pass = store as? PassCredentialStore else { return nil }
        return Set(await pass.storedKeys(provider: provider).map(\.account))
    }

    public var variables: [(name: String, summary: String)] {
        [
            (
                "PASSWORD_STORE_DIR, GNUPGHOME, PASSWORD_STORE_SIGNING_KEY",
                "With the pass storage: where the password store is, GnuPG's home, and the keys its .gpg-id "
                    + "files must be signed by, as for pass."
            )
        ]
    }
}

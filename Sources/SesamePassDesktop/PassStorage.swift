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
}

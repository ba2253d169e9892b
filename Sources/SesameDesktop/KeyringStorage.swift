import Sesame
import SesameKeyring

extension DesktopStorage {
    /// The desktop keyring through the Secret Service (`SecretServiceStore`), checked before it
    /// is used: no session bus or no Secret Service is "unavailable" (so `keyring-or-file` may
    /// fall back to the file, saying so); a locked or silent keyring is an error, never a reason
    /// to write tokens to a file instead.
    public static let secretService: KeyringFactory = {
        let store = SecretServiceStore()
        do {
            _ = try await store.status()
        } catch let error as CredentialStoreError where error.isUnavailable {
            throw DesktopError(
                error.message + " (For sesame and the examples: --storage file or --storage keyring-or-file, or "
                    + "SESAME_STORAGE.)", status: .unavailable)
        }
        return (store, "keyring (Secret Service)")
    }
}

import Sesame
import SesameKeyring

extension DesktopStorage {
    /// The desktop keyring through the Secret Service (`SecretServiceStore`), checked before it
    /// is used. Whether a failure lets `keyring-or-file` fall back to the file is the policy's
    /// decision (`StoragePolicy`): only an absent keyring does; a locked or silent one is an error.
    public static let secretService: KeyringFactory = {
        let store = SecretServiceStore()
        _ = try await store.status()
        return (store, store.backendDescription)
    }
}

import Sesame
import SesameKeyring

extension DesktopStorage {
    /// The desktop keyring through the Secret Service (`SecretServiceStore`), checked before it
    /// is used. Whether a failure lets `keyring-or-file` fall back to the file is the policy's
    /// decision (`StoragePolicy`): only an absent keyring does; a locked or silent one is an error.
    ///
    /// The check connects to the service, which every use of the store does first anyway; the
    /// encrypted session is opened by the first read or write, and the default collection is not
    /// looked up, so a command that reads one credential pays for nothing it does not use.
    public static let secretService: KeyringFactory = {
        let store = SecretServiceStore()
        try await store.checkReachable()
        return (store, store.backendDescription)
    }
}

import Foundation
import Sesame

/// Where an application keeps its tokens, chosen explicitly: Sesame never falls back to a
/// weaker store without saying so.
///
/// Resolve a policy once, when the program starts, and show the outcome where the person can
/// see it (the command line's `status` and `doctor` do):
///
/// ```swift
/// let storage = try await StoragePolicy.keyringOrFile.resolve()
/// if let warning = storage.warning { print("warning: \(warning)") }
/// let session = Session(provider: "facebook", appID: "1234", store: storage.store)
/// ```
public enum StoragePolicy: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// The desktop keyring (the default on a desktop). When it cannot be reached, resolving
    /// fails with the reason and what to do.
    case keyring
    /// The desktop keyring when there is one; otherwise the 0600 file store, with a
    /// ``ResolvedStorage/warning`` that names the file. Only an absent keyring (no session
    /// bus, no Secret Service) falls back: a locked or hung keyring is an error, since the
    /// credentials are probably in it.
    case keyringOrFile = "keyring-or-file"
    /// A `FileCredentialStore`, chosen explicitly, for machines without a keyring.
    case file
    /// An `InMemoryCredentialStore`: nothing outlives the process.
    case memory
    /// The standard Unix password store (`pass`, through GnuPG), for machines without a keyring.
    case pass
    /// The desktop keyring when there is one; otherwise the password store when it is initialised
    /// (has a `.gpg-id`); otherwise resolving fails, naming the choices. Never a plain file.
    case auto

    /// The policy a desktop program uses unless told otherwise.
    public static let `default`: StoragePolicy = .auto

    /// The policy's name as written in configuration and on the command line:
    /// `keyring`, `keyring-or-file`, `file`, `memory`, `pass` or `auto`.
    public var description: String { rawValue }

    /// One line about what the policy does, for help output.
    public var summary: String {
        switch self {
        case .keyring: "the desktop keyring (Secret Service); fails when there is none"
        case .keyringOrFile: "the desktop keyring, or a 0600 file with a warning when there is no keyring"
        case .file: "a 0600 file, for machines without a keyring"
        case .memory: "memory only; nothing is kept after the program exits"
        case .pass: "the password store (pass, GnuPG), for machines without a keyring"
        case .auto: "the keyring, else an initialised password store; refuses when there is neither"
        }
    }

    /// Makes the store this policy calls for, checking that the keyring answers when the
    /// policy involves it.
    ///
    /// - Parameters:
    ///   - fileURL: the file for ``file``, and for ``keyringOrFile`` when it falls back.
    ///   - keyring: the keyring store to use and check.
    /// - Returns: the store, the backend in use, and a warning when the policy fell back.
    /// - Throws: `CredentialStoreError` when ``keyring`` cannot be reached, or when the
    ///   keyring of ``keyringOrFile`` is present but does not answer.
    public func resolve(
        fileURL: URL = FileCredentialStore.defaultURL(),
        keyring: SecretServiceStore = SecretServiceStore()
    ) async throws -> ResolvedStorage {
        try await resolve(fileURL: fileURL) {
            let status = try await keyring.status()
            return (keyring, "keyring (\(status))")
        }
    }

    /// Makes the store this policy calls for, with the keyring opened by `openKeyring`: the one
    /// place that says what each policy means, for programs that open the keyring their own way.
    ///
    /// - Parameters:
    ///   - fileURL: the file for ``file``, and for ``keyringOrFile`` when it falls back.
    ///   - openKeyring: opens and checks the keyring, returning the store and the backend in
    ///     words (the resolved ``ResolvedStorage/detail``). It throws a `CredentialStoreError`
    ///     whose `isUnavailable` is true when there is no keyring (no session bus, no Secret
    ///     Service); only that lets ``keyringOrFile`` (and ``auto``) fall back.
    ///   - openPass: the password store, the backend in words, and whether it is initialised;
    ///     for ``pass`` and ``auto`` (a program without one leaves it out, and ``auto`` then
    ///     finds no password store).
    /// - Returns: the store, the backend in use, and a warning when the policy fell back.
    /// - Throws: what `openKeyring` throws for ``keyring``, and for ``keyringOrFile`` anything
    ///   but an absent keyring: a locked or silent keyring is an error, never a fallback.
    public func resolve(
        fileURL: URL,
        openKeyring: () async throws -> (store: any CredentialStore, detail: String),
        openPass: () -> (store: any CredentialStore, detail: String, initialised: Bool)? = { nil }
    ) async throws -> ResolvedStorage {
        // The keyring, opened and checked: the whole of `keyring`, the first choice of the others.
        func keyring() async throws -> ResolvedStorage {
            let opened = try await openKeyring()
            return ResolvedStorage(
                policy: self, backend: .keyring, store: opened.store, detail: opened.detail, warning: nil,
                fallbackReason: nil)
        }
        switch self {
        case .pass:
            guard let opened = openPass() else {
                throw CredentialStoreError(
                    kind: .unavailable, message: "This program was built without the password store (SesamePass).")
            }
            return ResolvedStorage(
                policy: self, backend: .pass, store: opened.store, detail: opened.detail, warning: nil,
                fallbackReason: nil)
        case .auto:
            do {
                return try await keyring()
            } catch let error as CredentialStoreError where error.isUnavailable {
                // No keyring: an initialised password store, or nothing (the caller refuses).
                guard let opened = openPass(), opened.initialised else { throw error }
                return ResolvedStorage(
                    policy: self, backend: .pass, store: opened.store, detail: opened.detail, warning: nil,
                    fallbackReason: error)
            }
        case .memory:
            return ResolvedStorage(
                policy: self, backend: .memory, store: InMemoryCredentialStore(), detail: "memory", warning: nil,
                fallbackReason: nil)
        case .file:
            let store = FileCredentialStore(url: fileURL)
            return ResolvedStorage(
                policy: self, backend: .file, store: store, detail: store.backendDescription, warning: nil,
                fallbackReason: nil)
        case .keyring:
            return try await keyring()
        case .keyringOrFile:
            do {
                return try await keyring()
            } catch let error as CredentialStoreError where error.isUnavailable {
                let store = FileCredentialStore(url: fileURL)
                let reason =
                    switch error.kind {
                    case .noSessionBus: "there is no D-Bus session bus"
                    case .noSecretService: "no Secret Service is running on the session bus"
                    default: "it is unavailable"
                    }
                let warning = KeyringMessages.text(
                    "The desktop keyring cannot be used (\(reason)), so tokens are kept in the file ",
                    "\(fileURL.path) (readable only by you, mode 0600) instead. Start a keyring to keep them ",
                    "encrypted, or choose the `file` storage policy to say that a file is what you want.")
                return ResolvedStorage(
                    policy: self, backend: .file, store: store, detail: store.backendDescription, warning: warning,
                    fallbackReason: error)
            }
        }
    }
}

/// The outcome of resolving a ``StoragePolicy``: the store to use and what it is.
public struct ResolvedStorage: Sendable, CustomStringConvertible {
    /// The kind of store in use.
    public enum Backend: String, Sendable, Hashable, CaseIterable {
        /// ``SecretServiceStore``.
        case keyring
        /// `FileCredentialStore`.
        case file
        /// `InMemoryCredentialStore`.
        case memory
        /// `PassCredentialStore` (in SesamePass).
        case pass
    }

    /// The policy that was resolved.
    public let policy: StoragePolicy
    /// The backend actually in use.
    public let backend: Backend
    /// The store to give to sessions.
    public let store: any CredentialStore
    /// The backend in words, such as `keyring (Secret Service, collection “Login”)` or
    /// `file (/home/alice/.local/state/sesame/credentials.json)`.
    public let detail: String
    /// Set when the policy fell back to a weaker store: what happened and the file now used.
    /// Show it to the person.
    public let warning: String?
    /// Why the keyring was not used, when the policy fell back (to the file, or ``StoragePolicy/auto``
    /// to the password store).
    public let fallbackReason: CredentialStoreError?

    /// Creates a resolved storage.
    public init(
        policy: StoragePolicy, backend: Backend, store: any CredentialStore, detail: String, warning: String?,
        fallbackReason: CredentialStoreError?
    ) {
        self.policy = policy
        self.backend = backend
        self.store = store
        self.detail = detail
        self.warning = warning
        self.fallbackReason = fallbackReason
    }

    /// For example `policy keyring-or-file: file (/home/alice/.local/state/sesame/credentials.json)`.
    public var description: String { "policy \(policy): \(detail)" }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An advisory lock file (`flock`) that keeps two processes on the machine from refreshing the
/// same token at the same time, for every provider.
///
/// One file per credential, in `$XDG_STATE_HOME/sesame/locks/` (beside the per-user state),
/// created 0600 in a 0700 directory. Waiting for the lock blocks, so it happens on a thread of
/// its own, never on Swift's cooperative pool. The lock is released when the body returns or
/// throws, and by the kernel if the process dies.
///
/// A provider's session refreshes like this: take the lock, read the credential from the
/// store again (another process may have refreshed it while this one waited, and with refresh
/// token rotation the token in memory may already be used up), refresh only when the stored
/// token is still the one to replace, and save the new token before the lock is released.
///
/// ```swift
/// let lock = RefreshLock(key: session.key)
/// let token = try await lock.withLock {
///     if let stored = try await store.load(key), stored.token != current { return stored.token }
///     let refreshed = try await refresh(current)
///     try await store.save(StoredCredential(key: key, token: refreshed))
///     return refreshed
/// }
/// ```
public struct RefreshLock: Sendable {
    /// The lock file.
    public let url: URL

    /// A lock for `key` in `directory`.
    public init(key: CredentialKey, directory: URL = RefreshLock.defaultDirectory()) {
        let name = "\(key.provider.rawValue)-\(key.appID)-\(key.account)"
        let safe = String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        let digest = Base64URL.encode(Crypto.sha256(Data(name.utf8)).prefix(6))
        url = directory.appendingPathComponent("\(safe.prefix(80))-\(digest).lock")
    }

    /// `$XDG_STATE_HOME/sesame/locks`, or `~/.local/state/sesame/locks`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        FileCredentialStore.defaultURL(environment: environment).deletingLastPathComponent()
            .appendingPathComponent("locks", isDirectory: true)
    }

    /// Runs `body` while holding the lock, waiting for another holder first.
    ///
    /// - Throws: ``CredentialStoreError`` when the lock file cannot be created or
    ///   locked; what `body` throws.
    public func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let descriptor = try await acquire()
        defer {
            _ = flock(descriptor, LOCK_UN)
            close(descriptor)
        }
        return try await body()
    }

    private func acquire() async throws -> Int32 {
        let path = url.path
        let directory = url.deletingLastPathComponent().path
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    try FileManager.default.createDirectory(
                        atPath: directory, withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700])
                } catch {
                    continuation.resume(throwing: Self.failure("could not create \(directory): \(error)"))
                    return
                }
                let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    continuation.resume(throwing: Self.failure("could not open \(path): \(Self.errnoText())"))
                    return
                }
                var result: Int32
                repeat { result = flock(descriptor, LOCK_EX) } while result != 0 && errno == EINTR
                guard result == 0 else {
                    let text = Self.errnoText()
                    close(descriptor)
                    continuation.resume(throwing: Self.failure("could not lock \(path): \(text)"))
                    return
                }
                continuation.resume(returning: descriptor)
            }
        }
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    private static func failure(_ detail: String) -> CredentialStoreError {
        CredentialStoreError(
            kind: .ioFailure,
            message: "The token refresh lock \(detail). Check that the state directory is writable by you.")
    }
}

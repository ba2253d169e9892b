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
/// created 0600 in a 0700 directory; a symbolic link in its place is refused, not followed, and
/// a directory that others may use is made private first. Waiting for the lock blocks, so it happens on a thread of
/// its own, never on Swift's cooperative pool. The lock is released when the body returns or
/// throws, and by the kernel if the process dies.
///
/// A ``Session`` with ``RefreshLocking/file(_:)`` or ``RefreshLocking/directory(_:)`` renews
/// like this (``Session/renewToken(isDue:renew:)``): take the lock, read the credential from
/// the store again (another process may have refreshed it while this one waited, and with
/// refresh token rotation the token in memory may already be used up), renew only when the
/// stored token is still due, and save the new token once before the lock is released.
/// Providers do not take the lock themselves.
public struct RefreshLock: Sendable, Hashable {
    /// The lock file.
    public let url: URL

    /// A lock for `key` in `directory`.
    public init(key: CredentialKey, directory: URL = RefreshLock.defaultDirectory()) {
        let name = "\(key.provider.rawValue)-\(key.appID)-\(key.account)"
        let safe = String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        // The issuer is in the digest only, so that a key without one keeps its lock file's name.
        let identity = key.issuer.map { "\(name)\u{0}\($0)" } ?? name
        let digest = Base64URL.encode(Crypto.sha256(Data(identity.utf8)).prefix(6))
        url = URL(fileURLWithPath: directory.path + "/\(safe.prefix(80))-\(digest).lock")
    }

    /// `$XDG_STATE_HOME/sesame/locks`, or `~/.local/state/sesame/locks`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        XDG.stateFile("locks", isDirectory: true, environment: environment)
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
        guard let limit = Self.waitLimit else { return try await onOwnThread(lockFile(waiting: true))! }
        // Within `waitLimit`: tried at once, then again and again without blocking until it passes.
        if let fd = try await onOwnThread(lockFile(waiting: false)) { return fd }
        guard let fd = try await Self.lock(url.path, within: limit) else { throw Self.waitedTooLong(limit) }
        return fd
    }

    /// Locks the file, waiting for another holder or (`waiting` false) `nil` when there is one.
    private func lockFile(waiting: Bool) -> @Sendable () throws -> Int32? {
        let url = self.url
        return {
            do {
                // The same rules as the credentials file's own lock: a private directory, and a
                // lock file that is a regular file of this user, never a symbolic link.
                try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
                return try waiting ? PrivateFiles.lock(url.path) : PrivateFiles.tryLock(url.path)
            } catch let error as CredentialStoreError where error.kind == .ioFailure {
                throw CredentialStoreError(
                    kind: .ioFailure,
                    message: "The token refresh lock failed: \(error.message) Check that the state directory is "
                        + "writable by you.")
            }
        }
    }
}

/// A lock a program supplies to keep renewals of one login apart beyond what a lock file can
/// reach: the processes of a fleet on several machines sharing one store (a database's advisory
/// lock, held on a connection of its own, released when its holder dies).
///
/// A ``Session`` with ``RefreshLocking/service(_:)`` renews inside
/// ``withRefreshLock(for:_:)`` exactly as it does inside a ``RefreshLock``: it reads the store
/// again once it holds the lock, renews only when the stored login is still due, and saves before
/// the lock is released. A service must hold the lock for `key` against every other holder of
/// the same `key` until `body` returns or throws, and release it then. A lock that can be lost
/// while `body` runs (a database's, dropped by a restart) needs a store that fences the save
/// (``CredentialStore/withRenewalClaim(for:_:)``), as `PostgresCredentialStore` does.
public protocol RefreshLockService: AnyObject, Sendable {
    /// Runs `body` while holding the lock for `key`, waiting for another holder first.
    ///
    /// - Throws: a ``CredentialStoreError`` when the lock cannot be had (the service is
    ///   unreachable); whatever `body` throws.
    func withRefreshLock<T: Sendable>(for key: CredentialKey, _ body: () async throws -> T) async throws -> T

    /// Keeps `error`, a passing failure (the provider silent, down, or throttling) that the
    /// renewal of `key` met, for the holders waiting behind the caller, who holds the lock; as
    /// a lock file does (`RenewalFailureRecord.swift`). Best effort; by default, nothing.
    func recordFailure(_ error: AuthError, for key: CredentialKey) async

    /// The failure another holder recorded for `key` since the caller, who holds the lock now,
    /// began to wait for it; `nil` by default, and when there is none.
    func recordedFailure(for key: CredentialKey) async -> AuthError?
}

extension RefreshLockService {
    /// Records nothing: the waiters behind this holder try again themselves.
    public func recordFailure(_ error: AuthError, for key: CredentialKey) async {}

    /// None: a service that records no failure has none to tell.
    public func recordedFailure(for key: CredentialKey) async -> AuthError? { nil }
}

/// How a ``Session`` keeps its renewals apart from other processes that use the same store.
///
/// Sesame's desktop setup (`SesameDesktop`) uses ``directory(_:)`` with
/// ``RefreshLock/defaultDirectory(environment:)``; a session built directly has ``none`` unless
/// it asks, so that creating one writes no file.
public enum RefreshLocking: Sendable, Hashable {
    /// No cross-process lock: right when no other process uses the store (an in-memory store,
    /// a test, a benchmark).
    case none
    /// This lock file.
    case file(RefreshLock)
    /// One lock file per credential in this directory (``RefreshLock/init(key:directory:)``).
    case directory(URL)
    /// A lock the program supplies (``RefreshLockService``), for processes that share a store
    /// beyond one machine.
    case service(any RefreshLockService)

    /// The lock file for `key`, if the locking is by file.
    public func lock(for key: CredentialKey) -> RefreshLock? {
        switch self {
        case .none, .service: nil
        case .file(let lock): lock
        case .directory(let directory): RefreshLock(key: key, directory: directory)
        }
    }

    /// Runs `body` holding the lock for `key` (or at once with ``none``).
    ///
    /// - Throws: ``CredentialStoreError`` when the lock cannot be had; whatever `body` throws.
    public func withLock<T: Sendable>(for key: CredentialKey, _ body: () async throws -> T) async throws -> T {
        if case .service(let service) = self { return try await service.withRefreshLock(for: key, body) }
        guard let lock = lock(for: key) else { return try await body() }
        return try await lock.withLock(body)
    }

    /// The failure another process's renewal of `key` recorded since `waitStart` (by the lock
    /// file) or since this holder began waiting (by the service), read by the lock's holder.
    func recordedFailure(for key: CredentialKey, since waitStart: Date) async -> AuthError? {
        if case .service(let service) = self { return await service.recordedFailure(for: key) }
        return lock(for: key)?.failure(since: waitStart, provider: key.provider)
    }

    /// Records `error` for the holders waiting behind this one, who holds the lock for `key`.
    func recordFailure(_ error: AuthError, for key: CredentialKey, at date: Date) async {
        if case .service(let service) = self { return await service.recordFailure(error, for: key) }
        lock(for: key)?.recordFailure(error, at: date)
    }

    /// Equal when the same locking: a service by identity.
    public static func == (left: RefreshLocking, right: RefreshLocking) -> Bool {
        switch (left, right) {
        case (.none, .none): true
        case (.file(let a), .file(let b)): a == b
        case (.directory(let a), .directory(let b)): a == b
        case (.service(let a), .service(let b)): a === b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .none: hasher.combine(0)
        case .file(let lock): hasher.combine(1); hasher.combine(lock)
        case .directory(let directory): hasher.combine(2); hasher.combine(directory)
        case .service(let service): hasher.combine(3); hasher.combine(ObjectIdentifier(service))
        }
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Credentials in one JSON file, for machines without a keyring, used only when chosen.
///
/// Like GitHub's CLI, Sesame writes tokens to a plain file only when asked to: the file is
/// created with mode 0600 in a 0700 directory and replaced atomically (written to a temporary
/// file in the same directory, flushed with `fsync`, then renamed over the old one), so a
/// crash mid-write leaves the previous contents intact. A file that group or others can read
/// is refused with the `chmod` that fixes it; a file that is not valid JSON is reported and
/// left in place, never overwritten. Writers in several processes are serialised with an
/// advisory lock on a `.lock` file beside it, which is never followed if it is a symbolic link;
/// a directory that group or others may use is made private (0700) before anything is written.
/// A save or delete, holding that lock, also removes the temporary files that an interrupted
/// write left (after a crash or a `kill -9`, such a file may hold a valid token): regular files
/// of this user named `.<name>.tmp-` and six letters or digits, beside the file. A symbolic link
/// with such a name is neither followed nor removed.
public final class FileCredentialStore: CredentialStore {
    /// The file that holds the credentials.
    public let url: URL
    private let lock = Locked(())
    /// Called after the temporary file is written and flushed, before the rename: tests use it
    /// to fail a save at the worst moment.
    let beforeRename: (@Sendable (_ temporaryPath: String) throws -> Void)?

    /// Creates a store at `url`. Nothing is read or written until the first call.
    public init(url: URL) {
        self.url = url
        self.beforeRename = nil
    }

    init(url: URL, beforeRename: @escaping @Sendable (_ temporaryPath: String) throws -> Void) {
        self.url = url
        self.beforeRename = beforeRename
    }

    /// The conventional location: `$XDG_STATE_HOME/sesame/credentials.json`, or
    /// `~/.local/state/sesame/credentials.json`.
    public static func defaultURL(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        XDG.stateFile("credentials.json", environment: environment)
    }

    public var backendDescription: String { "file (\(url.path))" }

    public func save(_ credential: StoredCredential) async throws {
        try await SesameLogging.storeOperation("save", self, credential.key) {
            try await onOwnThread { try self.update { table in table[credential.key] = credential } }
        }
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        try await SesameLogging.storeOperation("load", self, key) {
            try await onOwnThread { try self.lock.withLock { _ in try self.readTable()[key] } }
        }
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        try await SesameLogging.storeOperation("delete", self, key) {
            try await onOwnThread { try self.update { table in table.removeValue(forKey: key) != nil } }
        }
    }

    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        try await onOwnThread {
            try self.lock.withLock { _ in
                try self.readTable().values.filter { provider == nil || $0.key.provider == provider }
                    .sorted { $0.key < $1.key }
            }
        }
    }

    // MARK: - File format

    private struct FileContents: Codable {
        var version: Int
        var credentials: [StoredCredential]
    }

    private static let formatVersion = 1

    private func update<T>(_ change: (inout [CredentialKey: StoredCredential]) -> T) throws -> T {
        try lock.withLock { _ in
            try ensureDirectory()
            let lockFD = try openLockFile()
            defer { close(lockFD) }
            var table = try readTable()
            let result = change(&table)
            removeInterruptedWrites()
            try writeAtomically(table)
            return result
        }
    }

    private func readTable() throws -> [CredentialKey: StoredCredential] {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            if errno == ENOENT { return [:] }
            throw ioError("could not read \(url.path)", errno)
        }
        guard info.st_uid == geteuid() else {
            throw CredentialStoreError(
                kind: .insecurePermissions,
                message: "\(url.path) belongs to another user (uid \(info.st_uid)), so Sesame will not trust the "
                    + "tokens in it. Move it aside (or delete it) and log in again.")
        }
        if info.st_mode & 0o077 != 0 {
            throw CredentialStoreError(
                kind: .insecurePermissions,
                message: "\(url.path) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))), "
                    + "so Sesame will not trust the tokens in it. If the file is yours, run: chmod 600 '\(url.path)'")
        }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw CredentialStoreError(
                kind: .ioFailure, message: "Could not read \(url.path): \(error.localizedDescription)")
        }
        if data.isEmpty { return [:] }
        let contents: FileContents
        do { contents = try JSONDecoder().decode(FileContents.self, from: data) } catch {
            throw CredentialStoreError(
                kind: .corrupt,
                message: "\(url.path) is not a valid Sesame credential file (\(Self.shortReason(error))). It was left "
                    + "as it is; move it aside (or delete it) and log in again.")
        }
        guard contents.version <= Self.formatVersion else {
            throw CredentialStoreError(
                kind: .corrupt,
                message:
                    "\(url.path) was written by a newer Sesame (format \(contents.version)); upgrade Sesame to read it."
            )
        }
        return Dictionary(contents.credentials.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
    }

    private func writeAtomically(_ table: [CredentialKey: StoredCredential]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(
            FileContents(version: Self.formatVersion, credentials: table.values.sorted { $0.key < $1.key }))

        try PrivateFiles.replace(atPath: url.path, with: data, beforeRename: beforeRename)
    }

    /// Removes the temporary files of writes that never reached their rename (the process was
    /// killed in between): regular files of this user named as ``writeAtomically(_:)`` names its
    /// own, `.<name>.tmp-` and the six letters or digits `mkstemp` puts in place of `XXXXXX`.
    ///
    /// Called with the `.lock` file held: every writer holds it from before it creates its
    /// temporary file until that file is renamed or removed, so no file matched here belongs to a
    /// write in progress. Names are examined with `fstatat` and removed with `unlinkat`, relative
    /// to the open directory and without following symbolic links; a link, a directory or another
    /// user's file is left alone. Failures are ignored: the save does not depend on them.
    private func removeInterruptedWrites() {
        let prefix = Array(".\(url.lastPathComponent).tmp-".utf8)
        guard let directory = opendir(url.deletingLastPathComponent().path) else { return }
        defer { closedir(directory) }
        let directoryFD = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            guard name.count == prefix.count + 6, name.starts(with: prefix),
                name[prefix.count...].allSatisfy(Self.isLetterOrDigit)
            else { continue }
            let path = String(decoding: name, as: UTF8.self)
            var info = stat()
            guard fstatat(directoryFD, path, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG,
                info.st_uid == geteuid()
            else { continue }
            _ = unlinkat(directoryFD, path, 0)
        }
    }

    /// An ASCII letter or digit: what `mkstemp` puts in a template's `XXXXXX`.
    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The directory is made 0700, or repaired to 0700 when group or others may use it.
    private func ensureDirectory() throws {
        try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
    }

    /// The `.lock` file beside the credentials, opened without following a symbolic link.
    private func openLockFile() throws -> Int32 { try PrivateFiles.lock(url.path + ".lock") }

    private func ioError(_ what: String, _ code: Int32) -> CredentialStoreError {
        CredentialStoreError(kind: .ioFailure, message: "Sesame \(what): \(String(cString: strerror(code))).")
    }

    private static func shortReason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): "not JSON: \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, _): "missing field '\(key.stringValue)'"
        case DecodingError.typeMismatch(_, let context): "wrong type at \(Self.path(context.codingPath))"
        case DecodingError.valueNotFound(_, let context): "missing value at \(Self.path(context.codingPath))"
        default: "unreadable"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}

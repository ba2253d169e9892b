import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The rules for Sesame's own state files (credentials, accounts), in one place: a private
/// directory, and lock files that cannot be redirected with a symbolic link.
package enum PrivateFiles {
    /// Makes `directory` (and its parents) with mode 0700 when missing. One that exists must be a
    /// directory owned by this user; if group or others may use it (a `0777` left by an
    /// installer or a careless `chmod`), its mode is repaired to 0700, as it holds secrets.
    ///
    /// - Throws: ``CredentialStoreError`` (`insecurePermissions` for another user's directory,
    ///   `ioFailure` otherwise) saying what is wrong and what to do.
    package static func ensurePrivateDirectory(_ directory: URL) throws {
        let path = directory.standardizedFileURL.path
        try makeDirectories(path)
        var info = stat()
        guard stat(path, &info) == 0 else { throw ioError("could not inspect \(path)", errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CredentialStoreError(
                kind: .ioFailure, message: "\(path) is not a directory; move it aside so that Sesame can make one.")
        }
        guard info.st_uid == geteuid() else {
            throw CredentialStoreError(
                kind: .insecurePermissions,
                message: "\(path) belongs to another user (uid \(info.st_uid)), so Sesame will not keep secrets in "
                    + "it. Remove it or point XDG_STATE_HOME at a directory of your own.")
        }
        if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw CredentialStoreError(
                kind: .insecurePermissions,
                message: "\(path) can be used by other users (mode \(String(info.st_mode & 0o777, radix: 8))) and "
                    + "Sesame could not make it private (\(String(cString: strerror(errno)))). Run: chmod 700 '\(path)'"
            )
        }
    }

    /// Makes `path` and its missing parents, each 0700 whatever the umask (`mkdir` with 0700 can
    /// only lose bits to it); directories that exist are left as they are. An error names the
    /// directory that could not be made, why (in the system's words), and what to do.
    package static func makeDirectories(_ path: String) throws {
        var info = stat()
        if stat(path, &info) == 0 { return }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try makeDirectories(parent) }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            let reason = String(cString: strerror(errno))
            throw CredentialStoreError(
                kind: .cannotCreate,
                message: "Sesame could not create the directory \(path) for its state (\(reason)). Make \(parent) "
                    + "writable, or set XDG_STATE_HOME to a directory you can write.")
        }
    }

    /// Replaces the file at `path` with `bytes` at once, with mode 0600 whatever the umask (002
    /// on many distributions would otherwise make it 0664, a file Sesame then refuses to trust):
    /// a new file beside it, `.NAME.tmp-XXXXXX`, made by `mkstemp` and set to 0600 with `fchmod`
    /// before a byte is written, flushed to disk, renamed over `path`, and the rename made durable.
    /// A reader sees the old contents or the new, never a part; on failure the new file is removed
    /// and the old one is left as it was. The directory must exist (``ensurePrivateDirectory(_:)``).
    ///
    /// - Parameter beforeRename: called with the new file's path just before the rename (tests
    ///   interrupt a save there).
    /// - Throws: ``CredentialStoreError`` (`ioFailure`) naming the file and the system's reason;
    ///   whatever `beforeRename` throws.
    package static func replace(
        atPath path: String, with bytes: some ContiguousBytes, beforeRename: ((String) throws -> Void)? = nil
    ) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        var template = Array("\(directory)/.\(name).tmp-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw writeError("could not create a temporary file in \(directory)", errno) }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { throw ioError("could not set mode 0600 on \(temporary)", errno) }
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ioError("could not write \(temporary)", errno)
                }
                offset += written
            }
        }
        guard fsync(fd) == 0 else { throw ioError("could not flush \(temporary) to disk", errno) }
        try beforeRename?(temporary)
        guard rename(temporary, path) == 0 else { throw writeError("could not replace \(path)", errno) }
        renamed = true
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// The whole of the file at `path`, or nil when it cannot be opened or read (missing, a
    /// directory, unreadable) or is larger than `limit` bytes. Read with `open` and `read`:
    /// Foundation's readers first gather the file's attributes into a dictionary, which costs a
    /// command's start more than reading a small state file does.
    package static func contents(atPath path: String, limit: Int = 16 << 20) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return contents(of: fd, info: info, limit: limit)
    }

    /// What reading one of Sesame's own state files found.
    package enum StateFileContents: Sendable {
        /// The file is missing or cannot be read.
        case missing
        /// The file is there but not to be trusted; `reason` says why, as the end of a sentence
        /// that starts with the file's path ("belongs to another user (uid 1001)").
        case untrusted(reason: String)
        /// The file's bytes.
        case contents(Data)
    }

    /// The whole of the state file at `path`, when it can be trusted: a regular file (not
    /// reached through a symbolic link) that belongs to this user and that neither group nor
    /// others may write. A file another user planted in a directory that was left open (0777),
    /// or one anybody could have changed, is reported, not read, even after the directory has
    /// been made private again. The checks are made on the opened file, so it cannot be swapped
    /// between the check and the read.
    package static func trustedContents(atPath path: String, limit: Int = 16 << 20) -> StateFileContents {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            return errno == ELOOP ? .untrusted(reason: "is a symbolic link, which Sesame does not follow") : .missing
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .missing }
        guard info.st_uid == geteuid() else {
            return .untrusted(reason: "belongs to another user (uid \(info.st_uid))")
        }
        if info.st_mode & 0o022 != 0 {
            return .untrusted(
                reason: "could have been changed by other users (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        return contents(of: fd, info: info, limit: limit).map { .contents($0) } ?? .missing
    }

    private static func contents(of fd: Int32, info: stat, limit: Int) -> Data? {
        guard info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) <= limit else { return nil }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: max(4096, min(limit, Int(info.st_size) + 1)))
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            data.append(contentsOf: chunk[..<count])
            guard data.count <= limit else { return nil }
        }
    }

    /// Opens (creating when missing, mode 0600) and exclusively locks the lock file `path`,
    /// waiting while another process holds it; returns the descriptor, to `close` when done.
    /// A symbolic link at `path` is refused, not followed (a dangling one would otherwise make
    /// Sesame create its target), and so is a file that is not a regular file of this user.
    package static func lock(_ path: String) throws -> Int32 {
        let fd = try openLockFile(path)
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let code = errno
                close(fd)
                throw ioError("could not lock \(path)", code)
            }
        }
        return fd
    }

    /// Opens and exclusively locks the lock file `path` as ``lock(_:)`` does, without waiting:
    /// `nil` when another process holds it.
    package static func tryLock(_ path: String) throws -> Int32? {
        let fd = try openLockFile(path)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            close(fd)
            if code == EWOULDBLOCK { return nil }
            throw ioError("could not lock \(path)", code)
        }
        return fd
    }

    private static func openLockFile(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP {
                throw CredentialStoreError(
                    kind: .insecurePermissions,
                    message: "The lock file \(path) is a symbolic link, which Sesame does not follow; remove it "
                        + "(rm '\(path)') and try again.")
            }
            throw writeError("could not open the lock file \(path)", code)
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw ioError("could not inspect the lock file \(path)", code)
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            close(fd)
            throw CredentialStoreError(
                kind: .insecurePermissions,
                message: "The lock file \(path) is not a regular file of yours; remove it (rm '\(path)') and try again."
            )
        }
        // A lock file others can write to could be replaced under us; it is ours, so tighten it.
        if info.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o600) }
        return fd
    }

    /// The bytes of a file that holds a private key, when it may hold one by libpq's rule for a
    /// client's private key (`sslkey`): a regular file owned by this user with no access for group
    /// or others (0600 or less), or owned by root and readable by root's group at most (0640 or
    /// less). A file of another user (reached through a symbolic link too), or one every user may
    /// read, is refused, saying how to fix it. The checks are made on the opened file, so it
    /// cannot be swapped between the check and the read.
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - setting: where the path came from, for "check ..." in errors (`SESAME_POSTGRES_KEY_FILE`).
    /// - Throws: ``CredentialStoreError`` (`insecurePermissions` for a file others may use or
    ///   replace, `ioFailure` otherwise) whose message begins "The key file PATH" and never holds
    ///   a byte of the file.
    package static func privateKeyFileContents(atPath path: String, setting: String) throws -> Data {
        func refuse(_ kind: CredentialStoreError.Kind, _ message: String) -> CredentialStoreError {
            CredentialStoreError(kind: kind, message: "The key file \(path) " + message)
        }
        // O_NONBLOCK: a FIFO in its place is refused below rather than waited on.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw refuse(.ioFailure, "cannot be read (\(String(cString: strerror(errno)))); check \(setting).")
        }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw refuse(.ioFailure, "cannot be read (\(String(cString: strerror(errno)))); check \(setting).")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw refuse(.ioFailure, "is not a regular file; check \(setting).")
        }
        let user = geteuid()
        let mode = status.st_mode & 0o777
        let octal = "0" + String(mode, radix: 8)
        guard status.st_uid == user || status.st_uid == 0 else {
            throw refuse(
                .insecurePermissions,
                "belongs to another user (uid \(status.st_uid)), who could replace the key; use a key file of your "
                    + "own: `chown $(id -un) \(path)` (or a copy you own), then `chmod 600 \(path)`.")
        }
        if status.st_uid == user, mode & 0o077 != 0 {
            throw refuse(
                .insecurePermissions,
                "may be used by users other than you (mode \(octal)), as libpq refuses for a private key; run "
                    + "`chmod 600 \(path)`.")
        }
        if status.st_uid == 0, mode & 0o037 != 0 {
            throw refuse(
                .insecurePermissions,
                "belongs to root and may be used by users other than root and its group (mode \(octal)), as libpq "
                    + "refuses for a private key; run `chmod 640 \(path)` (or 600).")
        }
        do {
            return try file.read(upToCount: 1 << 16) ?? Data()
        } catch {
            throw refuse(.ioFailure, "cannot be read (\(error.localizedDescription)); check its owner and mode.")
        }
    }

    private static func ioError(_ what: String, _ code: Int32) -> CredentialStoreError {
        CredentialStoreError(kind: .ioFailure, message: "Sesame \(what): \(String(cString: strerror(code))).")
    }

    /// A file that could not be made or replaced: a directory Sesame may not write (`EACCES`,
    /// `EPERM`, a read-only file system) is ``CredentialStoreError/Kind/cannotCreate``, with what to
    /// do; anything else is an I/O failure.
    private static func writeError(_ what: String, _ code: Int32) -> CredentialStoreError {
        guard [EACCES, EPERM, EROFS].contains(code) else { return ioError(what, code) }
        return CredentialStoreError(
            kind: .cannotCreate,
            message: "Sesame \(what): \(String(cString: strerror(code))). Make the directory writable, or set "
                + "XDG_STATE_HOME to one that is.")
    }
}

import CGPGME
import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension CredentialStoreError.Kind {
    /// A password-store entry is encrypted to a GnuPG key whose secret part is not here.
    public static let noSecretKey = Self(rawValue: "noSecretKey")
    /// The password store's `.gpg-id` names a key this GnuPG has no usable public key for.
    public static let unknownRecipient = Self(rawValue: "unknownRecipient")
}

/// Logins in the standard Unix password store, `pass`, encrypted with GnuPG through GPGME: the
/// store for a machine without a desktop keyring (an SSH session, a server, a container, WSL).
///
/// Each login is one entry, `sesame/<provider>/<app>/<account>.gpg` (and
/// `sesame/<provider>/<issuer>/<app>/<account>.gpg` for a login that has an issuer) under the
/// store's directory (`PASSWORD_STORE_DIR`, or `~/.password-store`). Each part of the name is
/// percent-encoded where it holds anything but letters, digits and `-_.@+=,` (a slash, a leading
/// dot, a `%`), so no key can name a path outside its place. An entry reads well with
/// `pass show`: the access token on the first line, the rest as `key: value` lines; an entry
/// written or edited with `pass insert -m` or `pass edit` is read back (see the module's
/// documentation for the format).
///
/// Entries are encrypted to the recipients of the nearest `.gpg-id`, the entry's folder's first
/// and then each parent's up to the store's root, as `pass` does. They are decrypted in memory;
/// no plaintext touches the disk. A save writes a temporary file beside the entry and renames it
/// over the old one, and removes it when anything fails. Saves and removals from several
/// processes take turns on a lock file, `sesame/.lock` in the store. gpg-agent keeps the
/// passphrase and asks for it (pinentry); Sesame never sees it.
///
/// Failures are `CredentialStoreError`s that say what to do: a wrong or cancelled passphrase is
/// `locked`; a store without `.gpg-id` and an agent that cannot be reached are `unavailable`; an
/// entry for a key whose secret part is not here is `noSecretKey`; a
/// `.gpg-id` naming a key GnuPG does not have is `unknownRecipient`.
/// An entry that cannot be read is never removed.
public final class PassCredentialStore: CredentialStore {
    /// The password store's directory.
    public let directory: URL
    /// GnuPG's home directory, or `nil` for GnuPG's own choice (`GNUPGHOME`, or `~/.gnupg`).
    public let gnupgHome: String?
    private let lock = Locked(())
    /// Called after the temporary file is written and flushed, before the rename: tests use it
    /// to fail a save at the worst moment.
    let beforeRename: (@Sendable (_ temporaryPath: String) throws -> Void)?

    /// The folder of the store that holds Sesame's entries.
    public static let folder = "sesame"

    /// Creates a store in `directory`, using the GnuPG home `gnupgHome` (`nil`: GnuPG's own
    /// choice, `GNUPGHOME` or `~/.gnupg`). Nothing is read or written until the first call.
    public init(directory: URL = PassCredentialStore.defaultDirectory(), gnupgHome: String? = nil) {
        self.directory = directory
        self.gnupgHome = gnupgHome
        self.beforeRename = nil
        // GPGME's one-time start (a `gpg --version`) overlaps whatever the program does before
        // its first read or write.
        GPGME.prepare()
    }

    init(
        directory: URL, gnupgHome: String?, beforeRename: @escaping @Sendable (_ temporaryPath: String) throws -> Void
    ) {
        self.directory = directory
        self.gnupgHome = gnupgHome
        self.beforeRename = beforeRename
    }

    /// The store `pass` uses: `PASSWORD_STORE_DIR`, or `~/.password-store`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let path = environment["PASSWORD_STORE_DIR"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".password-store")
    }

    /// Whether `directory` is an initialised password store: `pass init` has written its `.gpg-id`.
    public static func isInitialised(_ directory: URL) -> Bool {
        access(directory.appendingPathComponent(".gpg-id").path, R_OK) == 0
    }

    public var backendDescription: String { "pass (\(directory.path))" }

    // MARK: - CredentialStore

    public func save(_ credential: StoredCredential) async throws {
        let path = entryPath(credential.key)
        try await onOwnThread {
            let recipients = try self.recipients(for: path)
            let plaintext = Array(PassEntry.text(of: credential).utf8)
            let ciphertext: [UInt8]
            do throws(GPGME.Failure) {
                ciphertext = try GPGME.encrypt(plaintext, to: recipients.names, home: self.gnupgHome)
            } catch {
                throw self.explain(error, entry: path, gpgID: recipients.file)
            }
            try self.withWriteLock {
                try self.makeDirectories(for: path)
                try self.writeAtomically(ciphertext, to: path)
            }
        }
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        let path = entryPath(key)
        return try await onOwnThread { try self.read(path, key: key) }
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        let path = entryPath(key)
        return try await onOwnThread {
            try self.withWriteLock {
                let file = self.url(path)
                guard unlink(file.path) == 0 else {
                    if errno == ENOENT { return false }
                    throw Self.ioError("could not remove \(file.path)", errno)
                }
                self.removeEmptyFolders(above: path)
                return true
            }
        }
    }

    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        try await listing(provider: provider).credentials
    }

    /// Every entry under `sesame/` (or `sesame/<provider>/`) decrypted and read. An entry that is
    /// not where Sesame puts logins, cannot be decrypted with the keys here, or does not read as a
    /// login is reported unreadable, and the others are returned; a wrong or cancelled passphrase
    /// or an unreachable agent fails the whole listing.
    public func listing(provider: ProviderID?) async throws -> CredentialListing {
        try await onOwnThread {
            var credentials: [StoredCredential] = []
            var unreadable: [UnreadableCredential] = []
            for path in self.entryPaths(provider: provider) {
                guard let key = Self.key(forEntry: path) else {
                    unreadable.append(
                        UnreadableCredential(
                            key: nil,
                            problem: "\(path) is not where Sesame keeps a login (sesame/provider/app/account)"))
                    continue
                }
                do {
                    if let credential = try self.read(path, key: key) { credentials.append(credential) }
                } catch let error as CredentialStoreError where [.corrupt, .noSecretKey].contains(error.kind) {
                    unreadable.append(UnreadableCredential(key: key, problem: error.message))
                }
            }
            return CredentialListing(credentials: credentials.sorted { $0.key < $1.key }, unreadable: unreadable)
        }
    }

    /// The keys of the logins stored, optionally for one provider, from the entries' names alone:
    /// nothing is decrypted, so no passphrase is asked for (for a shell's completion).
    public func storedKeys(provider: ProviderID?) async -> [CredentialKey] {
        await onOwnThread { self.entryPaths(provider: provider).compactMap(Self.key(forEntry:)).sorted() }
    }

    public func containsEntries(provider: ProviderID?) async throws -> Bool {
        await onOwnThread { !self.entryPaths(provider: provider).isEmpty }
    }

    /// Checks that a login for `key` could be saved: the store has a `.gpg-id` whose keys GnuPG
    /// can encrypt to, and the entry's folder can be written.
    ///
    /// - Throws: the `CredentialStoreError` a save would throw.
    public func checkWritable(for key: CredentialKey) async throws {
        let probe = key.with(account: "\(key.account).sesame-write-check")
        let token = AccessToken(tokenString: "-", provider: key.provider, appID: key.appID)
        do {
            try await save(StoredCredential(key: probe, token: token))
            try await delete(probe)
        } catch var error as CredentialStoreError {
            error.message = error.message.replacingOccurrences(of: entryPath(probe), with: entryPath(key))
            throw error
        }
    }

    // MARK: - Entries and names

    /// The entry's name in the store, as `pass show` takes it: `sesame/github/github.com/alice`.
    public func entryName(_ key: CredentialKey) -> String { entryPath(key) }

    private func entryPath(_ key: CredentialKey) -> String {
        var parts = [Self.folder, key.provider.rawValue]
        if let issuer = key.issuer { parts.append(issuer) }
        parts += [key.appID, key.account]
        return ([parts[0]] + parts.dropFirst().map(Self.encode)).joined(separator: "/")
    }

    private func url(_ path: String) -> URL { directory.appendingPathComponent(path + ".gpg") }

    /// The key an entry's name stands for, or `nil` when the name is not one Sesame makes.
    static func key(forEntry path: String) -> CredentialKey? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.first == folder, parts.count == 4 || parts.count == 5 else { return nil }
        let decoded = parts.dropFirst().compactMap(decode)
        guard decoded.count == parts.count - 1, !decoded[0].isEmpty else { return nil }
        let provider = ProviderID(rawValue: decoded[0])
        if decoded.count == 4 {
            return CredentialKey(provider: provider, issuer: decoded[1], appID: decoded[2], account: decoded[3])
        }
        return CredentialKey(provider: provider, appID: decoded[1], account: decoded[2])
    }

    private static let plain = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+=,".utf8)

    /// One part of a name, percent-encoded so that it is one safe path component: no slash, no
    /// leading dot (so neither `.` nor `..`, nor a hidden file), nothing but `plain` bytes. An
    /// empty part is `%`.
    static func encode(_ part: String) -> String {
        if part.isEmpty { return "%" }
        var out = ""
        for (index, byte) in part.utf8.enumerated() {
            if plain.contains(byte), !(index == 0 && byte == UInt8(ascii: ".")) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// The part `encode` made `text` from, or `nil` when `text` is not percent-encoding of UTF-8.
    static func decode(_ text: String) -> String? {
        if text == "%" { return "" }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard iterator.count >= 2,
                    let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The names of the entries under `sesame/` (or one provider's folder), without `.gpg`,
    /// skipping hidden files and folders (the lock, temporary files).
    private func entryPaths(provider: ProviderID?) -> [String] {
        let start = provider.map { "\(Self.folder)/\(Self.encode($0.rawValue))" } ?? Self.folder
        var found: [String] = []
        func walk(_ relative: String, depth: Int) {
            guard depth < 8,
                let names = try? FileManager.default.contentsOfDirectory(
                    atPath: url(relative).deletingPathExtension().path)
            else { return }
            for name in names.sorted() where !name.hasPrefix(".") {
                let child = "\(relative)/\(name)"
                var info = stat()
                guard lstat(directory.appendingPathComponent(child).path, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFDIR {
                    walk(child, depth: depth + 1)
                } else if info.st_mode & S_IFMT == S_IFREG, name.hasSuffix(".gpg") {
                    found.append(String(child.dropLast(4)))
                }
            }
        }
        walk(start, depth: 0)
        return found
    }

    // MARK: - Reading

    private func read(_ path: String, key: CredentialKey) throws -> StoredCredential? {
        let file = url(path)
        let ciphertext: [UInt8]
        let fd = open(file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw Self.ioError("could not read \(file.path)", errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.ioError("could not read \(file.path)", errno)
            }
            if count == 0 { break }
            bytes += buffer[..<count]
            guard bytes.count <= 1 << 20 else {
                throw CredentialStoreError(
                    kind: .corrupt, message: "\(file.path) is larger than any login; it was left as it is.")
            }
        }
        ciphertext = bytes
        var plaintext: [UInt8]
        do throws(GPGME.Failure) {
            plaintext = try GPGME.decrypt(ciphertext, home: gnupgHome)
        } catch {
            throw explain(error, entry: path, gpgID: nil)
        }
        defer { plaintext.withUnsafeMutableBytes { if let base = $0.baseAddress { memset(base, 0, $0.count) } } }
        do throws(PassEntry.Problem) {
            return try PassEntry.credential(from: String(decoding: plaintext, as: UTF8.self), key: key)
        } catch {
            throw CredentialStoreError(
                kind: .corrupt,
                message: "The password-store entry \(path) is not a Sesame login: \(error.reason). It was left as it "
                    + "is; fix it with `pass edit \(path)`, or remove it with `pass rm \(path)` and log in again.")
        }
    }

    // MARK: - Recipients

    /// The recipients of the `.gpg-id` nearest the entry `path`, and that file.
    private func recipients(for path: String) throws -> (names: [String], file: String) {
        var folder = (path as NSString).deletingLastPathComponent
        while true {
            let file = folder.isEmpty ? ".gpg-id" : "\(folder)/.gpg-id"
            let full = directory.appendingPathComponent(file).path
            if let text = try? String(contentsOfFile: full, encoding: .utf8) {
                let names = text.split(whereSeparator: \.isNewline).compactMap { line -> String? in
                    let id = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                        .trimmingCharacters(in: .whitespaces)
                    return id.isEmpty ? nil : id
                }
                guard !names.isEmpty else {
                    throw CredentialStoreError(
                        kind: .unavailable,
                        message: "\(full) names no GnuPG key; run `pass init KEYID` with the key to encrypt to.")
                }
                return (names, full)
            }
            if folder.isEmpty { break }
            folder = (folder as NSString).deletingLastPathComponent
        }
        throw CredentialStoreError(
            kind: .unavailable,
            message: "The password store \(directory.path) is not initialised (it has no .gpg-id); run "
                + "`pass init KEYID` with your GnuPG key, or choose another store.")
    }

    // MARK: - Writing

    private func withWriteLock<T>(_ body: () throws -> T) throws -> T {
        try lock.withLock { _ in
            try makeFolder(directory.appendingPathComponent(Self.folder).path)
            let fd = try PrivateFiles.lock(directory.appendingPathComponent("\(Self.folder)/.lock").path)
            defer { close(fd) }
            return try body()
        }
    }

    private func makeFolder(_ path: String) throws {
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw CredentialStoreError(
                kind: .cannotCreate,
                message:
                    "Sesame could not make the folder \(path) in the password store: \(String(cString: strerror(errno)))."
            )
        }
    }

    private func makeDirectories(for path: String) throws {
        let parts = path.split(separator: "/").dropLast()
        var current = directory.path
        for part in parts {
            current += "/\(part)"
            try makeFolder(current)
        }
    }

    private func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let file = url(path)
        let folder = file.deletingLastPathComponent().path
        var template = Array("\(folder)/.\(file.lastPathComponent).tmp-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw Self.ioError("could not create a temporary file in \(folder)", errno) }
        let tempPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var renamed = false
        defer { if !renamed { unlink(tempPath) } }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { throw Self.ioError("could not set mode 0600 on \(tempPath)", errno) }
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Self.ioError("could not write \(tempPath)", errno)
                }
                offset += written
            }
        }
        guard fsync(fd) == 0 else { throw Self.ioError("could not flush \(tempPath) to disk", errno) }
        try beforeRename?(tempPath)
        guard rename(tempPath, file.path) == 0 else { throw Self.ioError("could not replace \(file.path)", errno) }
        renamed = true
        let folderFD = open(folder, O_RDONLY | O_DIRECTORY)
        if folderFD >= 0 {
            _ = fsync(folderFD)
            close(folderFD)
        }
    }

    /// Removes the folders a removed entry leaves empty, up to (not including) `sesame/`, as
    /// `pass rm` does.
    private func removeEmptyFolders(above path: String) {
        var folder = (path as NSString).deletingLastPathComponent
        while folder.contains("/") {
            guard rmdir(directory.appendingPathComponent(folder).path) == 0 else { return }
            folder = (folder as NSString).deletingLastPathComponent
        }
    }

    // MARK: - Errors

    private func explain(_ failure: GPGME.Failure, entry: String, gpgID: String?) -> CredentialStoreError {
        let home = (gnupgHome ?? ProcessInfo.processInfo.environment["GNUPGHOME"]).map { " (GNUPGHOME \($0))" } ?? ""
        if failure.is(GPG_ERR_BAD_PASSPHRASE) {
            return CredentialStoreError(
                kind: .locked,
                message: "The passphrase given for the GnuPG key of the password-store entry \(entry) was wrong; "
                    + "run the command again and type it when gpg-agent asks. Nothing was changed.")
        }
        if failure.is(GPG_ERR_CANCELED, GPG_ERR_FULLY_CANCELED, GPG_ERR_NO_PIN_ENTRY, GPG_ERR_NO_PASSPHRASE) {
            return CredentialStoreError(
                kind: .locked,
                message: "The passphrase for the password-store entry \(entry) was not given (the prompt was cancelled "
                    + "or no pinentry could ask: over SSH, `export GPG_TTY=$(tty)`). Nothing was changed.")
        }
        if failure.is(GPG_ERR_NO_AGENT, GPG_ERR_ASS_CONNECT_FAILED, GPG_ERR_AGENT)
            || (failure.is(GPG_ERR_NO_SECKEY) && GPGME.agentAnswers(home: gnupgHome) == false)
        {
            return CredentialStoreError(
                kind: .unavailable,
                message: "gpg-agent cannot be reached\(home), so the password store cannot be opened; start it with "
                    + "`gpgconf --launch gpg-agent` (or remove no-autostart from gpg.conf) and try again. Nothing was "
                    + "changed.")
        }
        if failure.is(GPG_ERR_NO_SECKEY) {
            return CredentialStoreError(
                kind: .noSecretKey,
                message: "The password-store entry \(entry) is encrypted to a GnuPG key whose secret key is not in "
                    + "this keyring\(home); import it (`gpg --import`), or log in again after `pass init KEYID` with a "
                    + "key you have. The entry was left as it is.")
        }
        if failure.is(GPG_ERR_ENOENT, GPG_ERR_INV_ENGINE, GPG_ERR_ENGINE_TOO_OLD) {
            return CredentialStoreError(
                kind: .unavailable,
                message: "GnuPG cannot be run (\(failure.text)); install gnupg (`apt-get install gnupg`).")
        }
        if let gpgID, !failure.invalidRecipients.isEmpty || failure.is(GPG_ERR_UNUSABLE_PUBKEY, GPG_ERR_NO_PUBKEY) {
            let names = failure.invalidRecipients.map {
                "'\(String(String.UnicodeScalarView($0.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F })))'"
            }.joined(separator: ", ")
            return CredentialStoreError(
                kind: .unknownRecipient,
                message: "\(gpgID) names \(names.isEmpty ? "a key" : names), for which GnuPG\(home) has no usable "
                    + "public key; import it (`gpg --import`) or run `pass init KEYID` with a key you have. Nothing "
                    + "was changed.")
        }
        return CredentialStoreError(
            kind: .ioFailure,
            message: "GnuPG could not \(gpgID == nil ? "decrypt" : "encrypt") the password-store entry \(entry): "
                + "\(failure.text). Nothing was changed.")
    }

    private static func ioError(_ what: String, _ code: Int32) -> CredentialStoreError {
        CredentialStoreError(kind: .ioFailure, message: "Sesame \(what): \(String(cString: strerror(code))).")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

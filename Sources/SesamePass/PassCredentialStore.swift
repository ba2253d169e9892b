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
    /// The password store's `.gpg-id` names a key that is not valid in this keyring (gpg has no
    /// assurance that it belongs to the person named), so gpg, like `pass insert`, refuses it.
    public static let untrustedRecipient = Self(rawValue: "untrustedRecipient")
    /// `PASSWORD_STORE_SIGNING_KEY` is set and the `.gpg-id` to use has no good signature
    /// (`.gpg-id.sig`) by one of its keys, so `pass` would refuse it too.
    public static let unsignedRecipients = Self(rawValue: "unsignedRecipients")
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
/// and then each parent's up to the store's root, as `pass` does, and only to keys that are
/// valid in the keyring (gpg's trust model decides, as for `pass insert`). When
/// ``signingKeys`` is set (`PASSWORD_STORE_SIGNING_KEY`), that `.gpg-id` must carry a good
/// signature (`.gpg-id.sig`) by one of those keys, as `pass` requires. A folder of the store, an
/// entry or a `.gpg-id` that another user could have changed (group or others may write it, or
/// it is not this user's) is refused, not repaired, and so is an entry that is a symbolic link:
/// a login planted there is never used. Entries are decrypted in memory;
/// no plaintext touches the disk. A save writes a temporary file beside the entry and renames it
/// over the old one, and removes it when anything fails. Saves and removals from several
/// processes take turns on a lock file, `sesame/.lock` in the store; a temporary file left by a
/// save that was killed is removed by the next save in its folder. gpg-agent keeps the
/// passphrase and asks for it (pinentry); Sesame never sees it. A decryption that fails because
/// gpg-agent's secure memory ran out for a moment (many processes at once) is tried once more.
///
/// Failures are `CredentialStoreError`s that say what to do: a wrong or cancelled passphrase is
/// `locked`; a store without `.gpg-id` and an agent that cannot be reached are `unavailable`; an
/// entry for a key whose secret part is not here is `noSecretKey`; a
/// `.gpg-id` naming a key GnuPG does not have is `unknownRecipient`, one naming a key that is not
/// valid in the keyring `untrustedRecipient`, one without the signature `pass` would require
/// `unsignedRecipients`; a store another user could change is `insecurePermissions`.
/// An entry that cannot be read is never removed.
public final class PassCredentialStore: CredentialStore {
    /// The password store's directory.
    public let directory: URL
    /// GnuPG's home directory, or `nil` for GnuPG's own choice (`GNUPGHOME`, or `~/.gnupg`).
    public let gnupgHome: String?
    /// The fingerprints of the keys that must have signed each `.gpg-id`, as
    /// `PASSWORD_STORE_SIGNING_KEY` lists them; empty: no signature is required.
    public let signingKeys: [String]
    private let lock = Locked(())
    let hooks: Hooks

    /// What tests change in a store.
    struct Hooks: Sendable {
        /// Called after the temporary file is written and flushed, before the rename: tests use
        /// it to fail a save at the worst moment.
        var beforeRename: (@Sendable (_ temporaryPath: String) throws -> Void)?
        /// Called before each decryption; a failure it returns stands for GPGME's.
        var beforeDecrypt: (@Sendable () -> GPGME.Failure?)?
        /// Waits before a decryption is tried again, on the store's own thread.
        var pause: @Sendable (Duration) -> Void = { duration in
            let (seconds, attoseconds) = duration.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }

    /// The folder of the store that holds Sesame's entries.
    public static let folder = "sesame"

    /// Creates a store in `directory`, using the GnuPG home `gnupgHome` (`nil`: GnuPG's own
    /// choice, `GNUPGHOME` or `~/.gnupg`), requiring `.gpg-id` files signed by one of
    /// `signingKeys` when there are any (by default `PASSWORD_STORE_SIGNING_KEY`'s, as `pass`
    /// does). Nothing is read or written until the first call.
    public init(
        directory: URL = PassCredentialStore.defaultDirectory(), gnupgHome: String? = nil,
        signingKeys: [String] = PassCredentialStore.defaultSigningKeys()
    ) {
        self.directory = directory
        self.gnupgHome = gnupgHome
        self.signingKeys = signingKeys
        self.hooks = Hooks()
        // GPGME's one-time start (a `gpg --version`) overlaps whatever the program does before
        // its first read or write.
        GPGME.prepare()
    }

    init(directory: URL, gnupgHome: String?, signingKeys: [String] = [], hooks: Hooks) {
        self.directory = directory
        self.gnupgHome = gnupgHome
        self.signingKeys = signingKeys
        self.hooks = hooks
    }

    convenience init(
        directory: URL, gnupgHome: String?, beforeRename: @escaping @Sendable (_ temporaryPath: String) throws -> Void
    ) {
        self.init(directory: directory, gnupgHome: gnupgHome, hooks: Hooks(beforeRename: beforeRename))
    }

    /// The keys `pass` requires `.gpg-id` files to be signed by: `PASSWORD_STORE_SIGNING_KEY`'s
    /// words (fingerprints), or none.
    public static func defaultSigningKeys(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String] {
        (environment["PASSWORD_STORE_SIGNING_KEY"] ?? "").split(whereSeparator: \.isWhitespace).map(String.init)
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

    /// The GnuPG home gpg uses in `environment`: `GNUPGHOME`, or `~/.gnupg`.
    public static func defaultGnuPGHome(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let path = environment["GNUPGHOME"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".gnupg")
    }

    /// Whether `gpg-agent.conf` in `gnupgHome` lets the agent's secure memory grow
    /// (`auto-expand-secmem`). Without it, the agent's fixed pool can run out when many processes
    /// decrypt at once, and some fail with "Cannot allocate memory" (Sesame tries such a
    /// decryption once more).
    public static func agentExpandsSecureMemory(gnupgHome: URL) -> Bool {
        let file = gnupgHome.appendingPathComponent("gpg-agent.conf").path
        guard let data = PrivateFiles.contents(atPath: file, limit: 1 << 20) else { return false }
        return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).contains { line in
            line.split(whereSeparator: \.isWhitespace).first == "auto-expand-secmem"
        }
    }

    // MARK: - CredentialStore

    public func save(_ credential: StoredCredential) async throws {
        try await SesameLogging.storeOperation("save", self, credential.key) {
            let path = entryPath(credential.key)
            try await onOwnThread {
                try self.checkFolders(of: path)
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
                    self.removeStaleTemporaryFiles(beside: path)
                    try self.writeAtomically(ciphertext, to: path)
                }
            }
        }
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        try await SesameLogging.storeOperation("load", self, key) {
            let path = entryPath(key)
            return try await onOwnThread {
                try self.checkFolders(of: path)
                return try self.read(path, key: key)
            }
        }
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        try await SesameLogging.storeOperation("delete", self, key) {
            let path = entryPath(key)
            return try await onOwnThread {
                try self.withWriteLock {
                    try self.checkFolders(of: path)
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
            let found = self.entries(provider: provider)
            if let unsafe = found.unsafe { throw unsafe }
            for path in found.paths {
                guard let key = Self.key(forEntry: path) else {
                    unreadable.append(
                        UnreadableCredential(
                            key: nil,
                            problem: "\(path) is not where Sesame keeps a login (sesame/provider/app/account)"))
                    continue
                }
                do {
                    if let credential = try self.read(path, key: key) { credentials.append(credential) }
                } catch let error as CredentialStoreError
                    where [.corrupt, .noSecretKey, .insecurePermissions].contains(error.kind)
                {
                    unreadable.append(UnreadableCredential(key: key, problem: error.message))
                }
            }
            return CredentialListing(credentials: credentials.sorted { $0.key < $1.key }, unreadable: unreadable)
        }
    }

    /// The keys of the logins stored, optionally for one provider, from the entries' names alone:
    /// nothing is decrypted, so no passphrase is asked for (for a shell's completion).
    public func storedKeys(provider: ProviderID?) async -> [CredentialKey] {
        await onOwnThread { self.entries(provider: provider).paths.compactMap(Self.key(forEntry:)).sorted() }
    }

    public func containsEntries(provider: ProviderID?) async throws -> Bool {
        await onOwnThread { !self.entries(provider: provider).paths.isEmpty }
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
    /// skipping hidden files and folders (the lock, temporary files), and the first folder on the
    /// way that another user could have changed. An entry that is a symbolic link is named, so
    /// that reading it reports it; a folder that is one is not entered.
    private func entries(provider: ProviderID?) -> (paths: [String], unsafe: CredentialStoreError?) {
        let start = provider.map { "\(Self.folder)/\(Self.encode($0.rawValue))" } ?? Self.folder
        var found: [String] = []
        var unsafe: CredentialStoreError?
        do { try checkFolders(of: "\(start)/-") } catch { unsafe = error }
        func walk(_ relative: String, depth: Int) {
            guard depth < 8,
                let names = try? FileManager.default.contentsOfDirectory(
                    atPath: url(relative).deletingPathExtension().path)
            else { return }
            for name in names.sorted() where !name.hasPrefix(".") {
                let child = "\(relative)/\(name)"
                let path = directory.appendingPathComponent(child).path
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFDIR {
                    if unsafe == nil { unsafe = Self.folderProblem(path, info) }
                    walk(child, depth: depth + 1)
                } else if [S_IFREG, S_IFLNK].contains(info.st_mode & S_IFMT), name.hasSuffix(".gpg") {
                    found.append(String(child.dropLast(4)))
                }
            }
        }
        walk(start, depth: 0)
        return (found, unsafe)
    }

    // MARK: - Who could have changed the store

    /// Checks the folders from the store's root down to the entry `path`'s, as far as they exist:
    /// each must be a folder (not a symbolic link, below the root) of this user that neither
    /// group nor others may write.
    ///
    /// - Throws: `insecurePermissions`, saying which folder and what to do.
    private func checkFolders(of path: String) throws(CredentialStoreError) {
        var current = directory.path
        var info = stat()
        guard stat(current, &info) == 0 else { return }
        if let problem = Self.folderProblem(current, info) { throw problem }
        for part in path.split(separator: "/").dropLast() {
            current += "/\(part)"
            guard lstat(current, &info) == 0 else { return }
            if let problem = Self.folderProblem(current, info) { throw problem }
        }
    }

    /// Why the store's folder `path`, whose `lstat` is `info`, is not to be trusted, or `nil`.
    private static func folderProblem(_ path: String, _ info: stat) -> CredentialStoreError? {
        if info.st_mode & S_IFMT == S_IFLNK {
            return CredentialStoreError(
                kind: .insecurePermissions,
                message: "The password-store folder \(path) is a symbolic link, which Sesame does not follow inside "
                    + "the store; replace it with a real folder.")
        }
        return ownershipProblem(path, info, what: "password-store folder")
    }

    /// Why the file or folder `path` of the store, whose `stat` is `info`, could have been
    /// changed by another user, or `nil`.
    private static func ownershipProblem(_ path: String, _ info: stat, what: String) -> CredentialStoreError? {
        let planted =
            "someone else could have put a login there, or changed a .gpg-id so that new logins are encrypted "
            + "to their key"
        if info.st_uid != geteuid() {
            return CredentialStoreError(
                kind: .insecurePermissions,
                message: "The \(what) \(path) belongs to another user (uid \(info.st_uid)), so Sesame will not use "
                    + "it: \(planted). Check what is in it, then make it yours (chown) or remove it.")
        }
        if info.st_mode & 0o022 != 0 {
            return CredentialStoreError(
                kind: .insecurePermissions,
                message: "The \(what) \(path) could be changed by other users (mode "
                    + "\(String(info.st_mode & 0o777, radix: 8))), so Sesame will not use it: \(planted). Check what "
                    + "is in it, then run `chmod go-w '\(path)'`.")
        }
        return nil
    }

    /// The first reason why the store could have been changed by another user, or `nil`: a
    /// folder from the store's root down through `sesame/` that another user owns, that group or
    /// others may write, or that is a symbolic link; a `.gpg-id` on that way that is not a
    /// regular file of this user that only this user may write; an entry that is a symbolic
    /// link or that others may write. What `sesame doctor` reports; loads and saves refuse the
    /// same.
    public func permissionProblem() -> CredentialStoreError? {
        let found = entries(provider: nil)
        if let unsafe = found.unsafe { return unsafe }
        var folders: Set<String> = [""]
        for path in found.paths {
            var info = stat()
            let file = url(path).path
            if lstat(file, &info) == 0 {
                if info.st_mode & S_IFMT == S_IFLNK {
                    return Self.symbolicLinkProblem(file, entry: path)
                } else if let problem = Self.ownershipProblem(file, info, what: "password-store entry") {
                    return problem
                }
            }
            var folder = (path as NSString).deletingLastPathComponent
            while !folder.isEmpty, folders.insert(folder).inserted {
                folder = (folder as NSString).deletingLastPathComponent
            }
        }
        for folder in folders.sorted() {
            let file = directory.appendingPathComponent(folder.isEmpty ? ".gpg-id" : "\(folder)/.gpg-id").path
            if case .untrusted(let reason) = PrivateFiles.trustedContents(atPath: file) {
                return Self.untrustedGPGID(file, reason: reason)
            }
        }
        return nil
    }

    private static func symbolicLinkProblem(_ file: String, entry: String) -> CredentialStoreError {
        CredentialStoreError(
            kind: .insecurePermissions,
            message: "The password-store entry \(file) is a symbolic link, which Sesame does not follow: a login "
                + "is read only from the store's own files. Remove it (`pass rm \(entry)`) and log in again.")
    }

    private static func untrustedGPGID(_ file: String, reason: String) -> CredentialStoreError {
        CredentialStoreError(
            kind: .insecurePermissions,
            message: "The password store's \(file) \(reason), so Sesame will not encrypt logins to the keys it names: "
                + "someone else could have put their key there. Check the keys it names, then make it a file of yours "
                + "that only you may write (`chmod 600 '\(file)'`).")
    }

    /// Removes the temporary files that saves killed before their rename left beside the entry
    /// `path` (`.NAME.gpg.tmp-XXXXXX`). Called with the write lock held: every save makes its
    /// temporary file under that lock, so any found then is a dead save's.
    private func removeStaleTemporaryFiles(beside path: String) {
        let folder = url(path).deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(".") {
            guard let range = name.range(of: ".gpg.tmp-", options: .backwards),
                name[range.upperBound...].count == 6
            else { continue }
            unlink("\(folder)/\(name)")
        }
    }

    // MARK: - Reading

    private func read(_ path: String, key: CredentialKey) throws -> StoredCredential? {
        let file = url(path)
        let ciphertext: [UInt8]
        let fd = open(file.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            if errno == ELOOP { throw Self.symbolicLinkProblem(file.path, entry: path) }
            throw Self.ioError("could not read \(file.path)", errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.ioError("could not inspect \(file.path)", errno) }
        if let problem = Self.ownershipProblem(file.path, info, what: "password-store entry") { throw problem }
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
            plaintext = try GPGME.retryingOnce(pause: hooks.pause) { () throws(GPGME.Failure) in
                if let failure = hooks.beforeDecrypt?() { throw failure }
                return try GPGME.decrypt(ciphertext, home: gnupgHome)
            }
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

    /// The recipients of the `.gpg-id` nearest the entry `path`, and that file: as `pass` finds
    /// it (the first folder, from the entry's up to the store's root, that has a `.gpg-id`), that
    /// only this user could have written, and signed as `pass` requires when ``signingKeys`` is set.
    private func recipients(for path: String) throws -> (names: [String], file: String) {
        var folder = (path as NSString).deletingLastPathComponent
        while true {
            let file = folder.isEmpty ? ".gpg-id" : "\(folder)/.gpg-id"
            let full = directory.appendingPathComponent(file).path
            var info = stat()
            if stat(full, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                let contents: Data
                switch PrivateFiles.trustedContents(atPath: full, limit: 1 << 20) {
                case .contents(let data): contents = data
                case .untrusted(let reason): throw Self.untrustedGPGID(full, reason: reason)
                case .missing:
                    throw CredentialStoreError(
                        kind: .unavailable, message: "Sesame could not read \(full); make it readable, and try again.")
                }
                try verifySignature(of: full, contents: contents)
                let text = String(decoding: contents, as: UTF8.self)
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

    /// Checks, when ``signingKeys`` is set, that the `.gpg-id` at `file` has a good signature
    /// (`file.sig`) by one of them, as `pass` does: the signing key's fingerprint or its primary
    /// key's must be one of the keys, and only keys written as 40 upper-case hexadecimal digits
    /// count.
    ///
    /// - Throws: `unsignedRecipients`, saying what to do.
    private func verifySignature(of file: String, contents: Data) throws {
        guard !signingKeys.isEmpty else { return }
        let keys = signingKeys.joined(separator: " ")
        let why =
            "PASSWORD_STORE_SIGNING_KEY (\(keys)) is set, so Sesame, like pass, encrypts only to the keys of a "
            + ".gpg-id signed by one of those keys"
        let fix =
            "If the keys it names are yours, sign it again: `pass init` with those keys (`-p FOLDER` for a "
            + "folder's .gpg-id) while PASSWORD_STORE_SIGNING_KEY is set. If you did not write it, someone may have "
            + "put their key there to read your logins: remove it. Nothing was changed."
        var info = stat()
        guard stat(file + ".sig", &info) == 0, info.st_mode & S_IFMT == S_IFREG,
            let signature = PrivateFiles.contents(atPath: file + ".sig", limit: 1 << 20)
        else {
            throw CredentialStoreError(
                kind: .unsignedRecipients, message: "\(file) has no signature (\(file).sig); \(why). \(fix)")
        }
        let wanted = signingKeys.filter { key in
            key.utf8.count == 40 && key.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) }
        }
        let signers = (try? GPGME.goodSignatures(Array(signature), over: Array(contents), home: gnupgHome)) ?? []
        guard wanted.contains(where: signers.contains) else {
            throw CredentialStoreError(
                kind: .unsignedRecipients,
                message: "The signature \(file).sig is not a good signature of \(file) by one of the keys; \(why). "
                    + fix)
        }
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

    /// Replaces the entry at `path` at once, 0600 whatever the umask (`PrivateFiles.replace`):
    /// a reader sees the old entry or the new, never a part.
    private func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try PrivateFiles.replace(atPath: url(path).path, with: bytes, beforeRename: hooks.beforeRename)
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
        if failure.isTransient {
            return CredentialStoreError(
                kind: .ioFailure,
                message: "GnuPG could not decrypt the password-store entry \(entry): gpg-agent ran out of secure "
                    + "memory (\(failure.text)), twice; many processes decrypting at once do that. Try again; to make it "
                    + "rare, add the line `auto-expand-secmem` to gpg-agent.conf and restart the agent (`gpgconf "
                    + "--kill gpg-agent`). Nothing was changed.")
        }
        func quoted(_ name: String) -> String {
            "'\(String(String.UnicodeScalarView(name.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F })))'"
        }
        let untrusted = failure.invalidRecipients.filter {
            Int32(GPG_ERR_PUBKEY_NOT_TRUSTED.rawValue) == sesame_gpgme_code($0.reason)
        }
        if let gpgID, let first = untrusted.first {
            let names = untrusted.map { quoted($0.name) }.joined(separator: ", ")
            return CredentialStoreError(
                kind: .untrustedRecipient,
                message: "\(gpgID) names \(names), whose key is not valid in your keyring\(home): nothing says it "
                    + "belongs to the person it names, so Sesame, like `pass insert`, will not encrypt logins to it. "
                    + "If it is the right key, certify it (`gpg --lsign-key \(quoted(first.name))`) or set how far you "
                    + "trust its owner (`gpg --edit-key \(quoted(first.name)) trust`); if you did not put it there, "
                    + "remove it from \(gpgID) (someone may have added it to read your logins). Nothing was changed.")
        }
        if let gpgID, !failure.invalidRecipients.isEmpty || failure.is(GPG_ERR_UNUSABLE_PUBKEY, GPG_ERR_NO_PUBKEY) {
            let names = failure.invalidRecipients.map { quoted($0.name) }.joined(separator: ", ")
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

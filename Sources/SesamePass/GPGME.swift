import CGPGME
import Foundation
import Sesame

/// GPGME's calls as SesamePass makes them: one context per operation (a context is not shared
/// between threads), OpenPGP, binary output as `pass` writes it, and the passphrase left to
/// gpg-agent and its pinentry (no passphrase callback: Sesame never sees the passphrase).
enum GPGME {
    /// What GPGME reported, with the code classified.
    struct Failure: Error {
        /// GPGME's error value.
        var error: gpgme_error_t
        /// The code without its source.
        var code: Int32 { sesame_gpgme_code(error) }
        /// GPGME's own words for it.
        var text: String { String(cString: gpgme_strerror(error)) }
        /// For encryption: the recipients gpg could not use, as `.gpg-id` named them, each with
        /// gpg's reason (`GPG_ERR_PUBKEY_NOT_TRUSTED` for a key that is not valid in the keyring).
        var invalidRecipients: [(name: String, reason: gpgme_error_t)] = []

        func `is`(_ codes: gpg_err_code_t...) -> Bool { codes.contains { Int32($0.rawValue) == code } }

        /// Whether trying once more may well succeed: gpg-agent's secure memory was exhausted for a
        /// moment ("Cannot allocate memory"), as it is when many processes decrypt at once and the
        /// agent runs without `auto-expand-secmem`.
        var isTransient: Bool { `is`(GPG_ERR_ENOMEM) }
    }

    /// Runs `body`, and once more after a short pause when it fails with a transient error
    /// (``Failure/isTransient``). `pause` waits on the calling thread, which is never one of the
    /// cooperative pool's; the pause is between 100 and 300 ms, so that processes which failed
    /// together do not all try again at the same instant.
    static func retryingOnce<T>(
        pause: (Duration) -> Void, _ body: () throws(Failure) -> T
    ) throws(Failure) -> T {
        do throws(Failure) {
            return try body()
        } catch {
            guard error.isTransient else { throw error }
            pause(.milliseconds(Int.random(in: 100...300)))
            return try body()
        }
    }

    /// Initialises GPGME once per process and checks that gpg is there.
    ///
    /// GPGME learns about every engine it knows (gpgconf, gpgsm...) by running each with
    /// `--version` when first used; Sesame needs only gpg, so it turns gpgconf's discovery off
    /// (`disable-gpgconf`), which leaves one `gpg --version` instead of five processes before the
    /// first decryption.
    private static let engine: Result<Void, Failure> = {
        _ = gpgme_set_global_flag("disable-gpgconf", "1")
        _ = sesame_gpgme_init()
        let error = gpgme_engine_check_version(GPGME_PROTOCOL_OpenPGP)
        return error == 0 ? .success(()) : .failure(Failure(error: error))
    }()

    /// Starts GPGME's initialisation (its `gpg --version`) on a thread of its own, so that it runs
    /// while the program does other work; the first operation waits for it if it has not ended.
    static func prepare() {
        detachThread { _ = engine }
    }

    /// Encrypts `plaintext` to `recipients` as `pass insert` does: `-r` for each, no `encrypt-to`
    /// of gpg.conf, and only to keys that are valid in the keyring by gpg's own trust model (gpg
    /// refuses one that is not, as it refuses it to `pass`; nothing is trusted on Sesame's say).
    static func encrypt(_ plaintext: [UInt8], to recipients: [String], home: String?) throws(Failure) -> [UInt8] {
        try engine.get()
        return try withContext(home: home) { context throws(Failure) in
            try withData(plaintext) { plain throws(Failure) in
                try withOutput { cipher throws(Failure) in
                    let flags = GPGME_ENCRYPT_NO_ENCRYPT_TO
                    let names = recipients.joined(separator: "\n")
                    let error = gpgme_op_encrypt_ext(context, nil, names, flags, plain, cipher)
                    guard error == 0 else {
                        var failure = Failure(error: error)
                        var invalid = gpgme_op_encrypt_result(context)?.pointee.invalid_recipients
                        while let recipient = invalid {
                            failure.invalidRecipients.append(
                                (recipient.pointee.fpr.map { String(cString: $0) } ?? "?", recipient.pointee.reason))
                            invalid = recipient.pointee.next
                        }
                        throw failure
                    }
                }
            }
        }
    }

    /// Decrypts `ciphertext` in memory.
    static func decrypt(_ ciphertext: [UInt8], home: String?) throws(Failure) -> [UInt8] {
        try engine.get()
        return try withContext(home: home) { context throws(Failure) in
            try withData(ciphertext) { cipher throws(Failure) in
                try withOutput { plain throws(Failure) in
                    let error = gpgme_op_decrypt(context, cipher, plain)
                    guard error == 0 else { throw Failure(error: error) }
                }
            }
        }
    }

    /// The fingerprints of the keys that made a good signature `signature` over `signed`: for
    /// each, the signing key's and its primary key's, as gpg's `VALIDSIG` status gives them to
    /// `pass` (upper-case hexadecimal). Empty when there is no good signature.
    static func goodSignatures(_ signature: [UInt8], over signed: [UInt8], home: String?) throws(Failure) -> [String] {
        try engine.get()
        return try withContext(home: home) { context throws(Failure) in
            try withData(signature) { signatureData throws(Failure) in
                try withData(signed) { signedData throws(Failure) in
                    let error = gpgme_op_verify(context, signatureData, signedData, nil)
                    guard error == 0 else { throw Failure(error: error) }
                    var fingerprints: [String] = []
                    var next = gpgme_op_verify_result(context)?.pointee.signatures
                    while let signature = next {
                        next = signature.pointee.next
                        guard sesame_gpgme_code(signature.pointee.status) == 0, let fpr = signature.pointee.fpr
                        else { continue }
                        fingerprints.append(String(cString: fpr).uppercased())
                        var key: gpgme_key_t?
                        if gpgme_get_key(context, fpr, &key, 0) == 0, let key {
                            if let primary = key.pointee.fpr {
                                fingerprints.append(String(cString: primary).uppercased())
                            }
                            gpgme_key_unref(key)
                        }
                    }
                    return fingerprints
                }
            }
        }
    }

    /// A context for OpenPGP, with GnuPG's home `home` (`nil`: `GNUPGHOME` or `~/.gnupg`).
    private static func withContext<T>(home: String?, _ body: (gpgme_ctx_t) throws(Failure) -> T) throws(Failure) -> T {
        var context: gpgme_ctx_t?
        let error = gpgme_new(&context)
        guard error == 0, let context else { throw Failure(error: error) }
        defer { gpgme_release(context) }
        let protocolError = gpgme_set_protocol(context, GPGME_PROTOCOL_OpenPGP)
        guard protocolError == 0 else { throw Failure(error: protocolError) }
        // Setting the home runs `gpg --version` again: only when gpg would not find it anyway.
        if let home, home != ProcessInfo.processInfo.environment["GNUPGHOME"] {
            let homeError = gpgme_ctx_set_engine_info(context, GPGME_PROTOCOL_OpenPGP, nil, home)
            guard homeError == 0 else { throw Failure(error: homeError) }
        }
        gpgme_set_armor(context, 0)
        return try body(context)
    }

    /// A data object reading `bytes` (copied by GPGME, so the buffer need not outlive the call).
    private static func withData<T>(
        _ bytes: [UInt8], _ body: (gpgme_data_t) throws(Failure) -> T
    ) throws(Failure)
        -> T
    {
        var data: gpgme_data_t?
        let error = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { gpgme_data_new_from_mem(&data, $0.baseAddress, buffer.count, 1) }
        }
        guard error == 0, let data else { throw Failure(error: error) }
        defer { gpgme_data_release(data) }
        return try body(data)
    }

    /// Runs `body` with an empty memory data object and returns what was written to it; the
    /// memory is cleared before it is freed, since it may hold a token.
    private static func withOutput(_ body: (gpgme_data_t) throws(Failure) -> Void) throws(Failure) -> [UInt8] {
        var data: gpgme_data_t?
        let error = gpgme_data_new(&data)
        guard error == 0, let data else { throw Failure(error: error) }
        var failure: Failure?
        do throws(Failure) { try body(data) } catch { failure = error }
        var length = 0
        let memory = gpgme_data_release_and_get_mem(data, &length)
        defer {
            if let memory {
                memset(memory, 0, length)
                gpgme_free(memory)
            }
        }
        if let failure { throw failure }
        guard let memory else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: memory, count: length))
    }

    /// Whether gpg-agent answers on its socket for `home`, asked only after a decryption failed
    /// for want of a secret key (gpg says "No secret key" also when it could not reach the agent):
    /// the socket's path from `gpgconf --list-dirs agent-socket`, then a `connect(2)` to it.
    /// `nil` when that cannot be told.
    static func agentAnswers(home: String?) -> Bool? {
        var environment = ProcessInfo.processInfo.environment
        // Setting the home runs `gpg --version` again: only when gpg would not find it anyway.
        if let home, home != ProcessInfo.processInfo.environment["GNUPGHOME"] { environment["GNUPGHOME"] = home }
        let output = Pipe()
        let child = ChildProcess(
            executableURL: URL(fileURLWithPath: "/usr/bin/gpgconf"), arguments: ["--list-dirs", "agent-socket"],
            environment: environment, standardInput: .null, standardOutput: .pipe(output), standardError: .null)
        guard (try? child.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        guard child.waitUntilExit() == 0 else { return nil }
        let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !path.isEmpty else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return connected == 0
    }
}

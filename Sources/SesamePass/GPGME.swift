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
        /// For encryption: the recipients gpg could not use, as `.gpg-id` named them.
        var invalidRecipients: [String] = []

        func `is`(_ codes: gpg_err_code_t...) -> Bool { codes.contains { Int32($0.rawValue) == code } }
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

    /// Encrypts `plaintext` to `recipients` (as `pass` does: `-r` for each, trusting them, no
    /// `encrypt-to` of gpg.conf).
    static func encrypt(_ plaintext: [UInt8], to recipients: [String], home: String?) throws(Failure) -> [UInt8] {
        try engine.get()
        return try withContext(home: home) { context throws(Failure) in
            try withData(plaintext) { plain throws(Failure) in
                try withOutput { cipher throws(Failure) in
                    let flags = gpgme_encrypt_flags_t(
                        GPGME_ENCRYPT_ALWAYS_TRUST.rawValue | GPGME_ENCRYPT_NO_ENCRYPT_TO.rawValue)
                    let names = recipients.joined(separator: "\n")
                    let error = gpgme_op_encrypt_ext(context, nil, names, flags, plain, cipher)
                    guard error == 0 else {
                        var failure = Failure(error: error)
                        var invalid = gpgme_op_encrypt_result(context)?.pointee.invalid_recipients
                        while let recipient = invalid {
                            failure.invalidRecipients.append(recipient.pointee.fpr.map { String(cString: $0) } ?? "?")
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

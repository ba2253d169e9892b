internal import CLibSecret

/// A Secret Service session of Sesame's own, opened to read secrets: the specification's
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7`, with a 256-bit private exponent where libsecret uses a
/// 1024-bit one, which takes about 2 ms of modular arithmetic off every read that has to open a
/// session (`sesame token`'s). The reasoning and the protocol are in `CLibSecret/shim.h`
/// ("A session of Sesame's own for reading secrets").
///
/// Used by one keyring worker call, on its thread. Anything that fails here (a service without
/// the algorithm, a malformed answer, a secret that does not decrypt) leaves the read to
/// libsecret's own session, as before. The read closes it when it is done (``close()``); going
/// away closes it too, if nothing did.
final class ReadingSession {
    let pointer: UnsafeMutablePointer<SesameSecretSession>
    private let connection: OpaquePointer

    init(on connection: OpaquePointer) {
        self.connection = connection
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: SesameSecretSession())
        g_object_ref(UnsafeMutableRawPointer(connection))
    }

    deinit {
        sesame_secret_session_free(pointer, connection)
        pointer.deallocate()
        g_object_unref(UnsafeMutableRawPointer(connection))
    }

    /// Closes the session on the service, once: the `Close` call is on the bus when this returns
    /// (it does not wait for the answer). Nothing is read through the session afterwards.
    ///
    /// Called by the read that opened the session before it returns, so that the `Close` does
    /// not wait for the moment the object goes away, which Swift does not promise. Before the
    /// call was flushed to the bus, `sesame token` printed its token and exited before GDBus's
    /// writer thread had sent it in 2 to 10 reads of 40 on a loaded machine (`dbus-monitor` of the
    /// service's calls, `strace -f` of the process; `scripts/check-keyring-sessions`).
    func close() { sesame_secret_session_close(pointer, connection) }

    /// Makes the key pair; `OpenSession`'s parameters, or nil when that failed.
    func request() -> OpaquePointer? { sesame_secret_session_request(pointer) }

    /// Completes the session from `OpenSession`'s reply; whether it is ready.
    func finish(_ reply: OpaquePointer) -> Bool { sesame_secret_session_finish(pointer, reply) != 0 }

    /// The secrets a `GetSecrets` reply sent through this session holds for `paths`.
    func secrets(in reply: OpaquePointer, of paths: [String]) -> [String: [UInt8]] {
        let table = sesame_secret_session_secrets_from_reply(pointer, reply)
        defer { g_hash_table_unref(table) }
        return LibSecretClient.secrets(in: table, of: paths)
    }
}

import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Answers, in libmicrohttpd's place, a request whose `Content-Length` it cannot read, so that
/// the answer goes out once.
///
/// libmicrohttpd 0.9.75 refuses such a request itself (`-5`, `abc`, `3,3`, a number past 2⁶⁴),
/// inside one pass of its connection state machine that calls no callback of Sesame's, and in
/// that pass builds its answer's head twice: the status line and headers go out twice, and a
/// client reads the second head as the first answer's body. The one thing it does call in that
/// pass is its error log, on the thread that handles the connection, with "Failed to parse
/// `Content-Length' header" or "Too large value of 'Content-Length' header".
///
/// So this type keeps the connections whose request line has arrived and whose head has not
/// reached the access handler yet (``began(_:descriptor:)``, ``ended(_:)``), with the daemon
/// thread that reads each. The refused request is one of them, on the thread that logs. When it
/// is the only one on that thread, the log is known to be about it: its answer is written on the
/// socket here, and the socket is shut down, so that libmicrohttpd's own answer fails to send and
/// it closes the connection. When several heads are in progress on that thread (clients sending
/// their heads slowly), it is not known which one was refused, and libmicrohttpd's answer goes
/// out as it is, to whichever client sent the bad request; nothing else is touched.
final class LengthRefusals: Sendable {
    private struct InProgress {
        var thread: pthread_t
        var descriptor: Int32
    }

    private let heads = Locked([UInt: InProgress]())
    private let malformed: [UInt8]
    private let tooLarge: [UInt8]

    init(maxBodyBytes: Int) {
        malformed = Self.closingAnswer(
            status: "400 Bad Request", body: "Bad request: the Content-Length is not a number of bytes.")
        tooLarge = Self.closingAnswer(
            status: "413 Content Too Large",
            body: "The request body is larger than this server accepts (\(maxBodyBytes) bytes).")
    }

    /// A whole answer that closes its connection, written on a socket directly.
    static func closingAnswer(status: String, body: String, extraHeaders: String = "") -> [UInt8] {
        Array(
            ("HTTP/1.1 \(status)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
                + extraHeaders + "Connection: close\r\n\r\n" + body).utf8)
    }

    /// A request line arrived on `connection` (on the daemon's thread, in its URI-log callback).
    func began(_ connection: UInt, descriptor: Int32) {
        let entry = InProgress(thread: pthread_self(), descriptor: descriptor)
        heads.withLock { $0[connection] = entry }
    }

    /// The connection's head reached the access handler, its request completed, or it closed.
    func ended(_ connection: UInt) {
        _ = heads.withLock { $0.removeValue(forKey: connection) }
    }

    /// libmicrohttpd logged `format` on this thread; a `Content-Length` refusal is answered here.
    func logged(_ format: UnsafePointer<CChar>) {
        guard strstr(format, "Content-Length") != nil else { return }
        let answer = strstr(format, "Too large") != nil ? tooLarge : malformed
        let thread = pthread_self()
        let descriptor = heads.withLock { heads -> Int32? in
            var found: Int32?
            for entry in heads.values where pthread_equal(entry.thread, thread) != 0 {
                guard found == nil else { return nil }  // Two heads in progress: which one is not known.
                found = entry.descriptor
            }
            return found
        }
        guard let descriptor, descriptor >= 0 else { return }
        // libmicrohttpd has written nothing of its answer yet: it is sent after this pass.
        _ = answer.withUnsafeBytes {
            send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

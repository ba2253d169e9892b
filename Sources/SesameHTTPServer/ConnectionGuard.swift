import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What libmicrohttpd does not do against slow clients and bad heads: a total deadline for each
/// request head, a `503` instead of a hang for a connection past the limit, and one answer to a
/// `Content-Length` it cannot read (``answerUnreadableLength(logged:)``).
///
/// libmicrohttpd tells it when a connection opens and closes (its notify-connection callback)
/// and the server core when a head is complete and a request is done. A thread of its own looks
/// every quarter second for connections whose head is overdue and shuts their socket down;
/// libmicrohttpd then sees the connection end and closes it. A connection whose bytes wait
/// unread is the server's delay, not the client's, and is left until they are read.
/// libmicrohttpd may close a descriptor before it reports the connection closed, and the number
/// is then reused by another socket of the process: so the socket's inode is recorded when it
/// opens, and a descriptor is shut down only when `fstat` still finds that inode behind it
/// (else the entry is dropped).
final class ConnectionGuard: Sendable {
    /// One open connection. libmicrohttpd keeps it as the connection's socket context, so that
    /// the three updates of each request (``requestLineArrived(_:)``, ``headReceived(_:)``,
    /// ``requestFinished(_:)``) take only this connection's lock, never the table's that every
    /// daemon thread shares.
    final class Connection: Sendable {
        let descriptor: Int32
        /// The socket's inode: the descriptor is shut down only while it still names this socket.
        let inode: UInt
        let progress: Locked<Progress>

        struct Progress {
            /// When the head being waited for must be complete; `nil` while a request is handled.
            var headDeadline: ContinuousClock.Instant?
            /// The daemon thread reading the connection's request head, from its request line
            /// until the head reaches the handler or the request ends; `nil` otherwise.
            var readingHead: pthread_t?
        }

        init(descriptor: Int32, inode: UInt, headDeadline: ContinuousClock.Instant?) {
            self.descriptor = descriptor
            self.inode = inode
            progress = Locked(Progress(headDeadline: headDeadline))
        }
    }

    private struct State {
        var connections: [UInt: Connection] = [:]
        var stopped = false
    }

    private let state = Locked(State())
    private let maxConnections: Int
    private let headTimeout: Duration?
    /// How long a kept-alive connection has, after a request, to send the whole head of its next
    /// one: the idle timeout plus the head timeout, or `nil` when either is off.
    private let nextHeadTimeout: Duration?
    private let refusedCount = Atomic<Int>(0)
    private let closedForSlowHead = Atomic<Int>(0)
    /// The answers to a `Content-Length` that is not a number, and to one past 2⁶⁴.
    private let malformedLength: [UInt8]
    private let tooLargeLength: [UInt8]

    init(maxConnections: Int, headTimeout: Duration, idleTimeout: Duration = .zero, maxBodyBytes: Int) {
        self.maxConnections = max(1, maxConnections)
        malformedLength = Self.closingAnswer(
            status: "400 Bad Request", body: "Bad request: the Content-Length is not a number of bytes.")
        tooLargeLength = Self.closingAnswer(
            status: "413 Content Too Large",
            body: "The request body is larger than this server accepts (\(maxBodyBytes) bytes).")
        self.headTimeout = headTimeout > .zero ? headTimeout : nil
        self.nextHeadTimeout = headTimeout > .zero && idleTimeout > .zero ? idleTimeout + headTimeout : nil
    }

    /// Starts the watchdog thread; it ends after ``stop()``.
    func start() {
        guard headTimeout != nil else { return }
        let thread = Thread { [self] in
            while sweep() { usleep(250_000) }
        }
        thread.name = "sesame-httpserver-deadlines"
        thread.start()
    }

    func stop() { state.withLock { $0.stopped = true } }

    /// How many connections were refused for being past the limit, and closed for a late head.
    var counts: (refused: Int, slowHeads: Int) {
        (refusedCount.load(ordering: .relaxed), closedForSlowHead.load(ordering: .relaxed))
    }

    /// A whole answer that closes its connection, written on a socket directly.
    private static func closingAnswer(status: String, body: String, extraHeaders: String = "") -> [UInt8] {
        Array(
            ("HTTP/1.1 \(status)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
                + extraHeaders + "Connection: close\r\n\r\n" + body).utf8)
    }

    private static let refusal = closingAnswer(
        status: "503 Service Unavailable", body: "The server has too many connections open; try again shortly.\n",
        extraHeaders: "Retry-After: 1\r\n")

    /// A connection opened (on libmicrohttpd's thread): the object to keep as its socket context,
    /// or nil when it is past the limit, answered 503 and shut.
    func opened(_ key: UInt, descriptor: Int32) -> Connection? {
        guard descriptor >= 0 else { return nil }
        let connection = Connection(
            descriptor: descriptor, inode: Self.inode(of: descriptor) ?? 0,
            headDeadline: headTimeout.map { ContinuousClock.now + $0 })
        let refuse = state.withLock { state -> Bool in
            if state.connections.count >= maxConnections {
                // At the limit: first forget connections whose socket is gone (a close that was
                // not reported), so that they are not counted against the new one.
                state.connections = state.connections.filter { Self.inode(of: $0.value.descriptor) == $0.value.inode }
            }
            guard state.connections.count < maxConnections else { return true }
            state.connections[key] = connection
            return false
        }
        guard refuse else { return connection }
        refusedCount.add(1, ordering: .relaxed)
        // Nothing has been read or written on it yet: the answer goes out whole or not at all.
        _ = Self.refusal.withUnsafeBytes {
            send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        shutdown(descriptor, Int32(SHUT_RDWR))
        return nil
    }

    /// The connection's request head is complete: no deadline while the request is handled.
    func headReceived(_ connection: Connection?) {
        connection?.progress.withLock { progress in
            progress.headDeadline = nil
            progress.readingHead = nil
        }
    }

    /// The connection's request line arrived (on the daemon thread that reads it, in the
    /// URI-log callback): its head is being read until ``headReceived(_:)``.
    func requestLineArrived(_ connection: Connection?) {
        guard let connection else { return }
        let thread = pthread_self()
        connection.progress.withLock { $0.readingHead = thread }
    }

    /// A request finished. The connection's next head must be complete within the idle timeout
    /// plus the head timeout: a client that keeps the connection for reuse and falls silent is
    /// closed first by libmicrohttpd's idle timeout, as before, so only one that dribbles its next
    /// head (each byte resetting idleness) meets this deadline. With no idle timeout, a kept-alive
    /// connection has no deadline.
    func requestFinished(_ connection: Connection?) {
        guard let connection else { return }
        let deadline = nextHeadTimeout.map { ContinuousClock.now + $0 }
        connection.progress.withLock { progress in
            progress.readingHead = nil
            if let deadline { progress.headDeadline = deadline }
        }
    }

    /// libmicrohttpd logged `format` on this thread; its refusal of a `Content-Length` it cannot
    /// read is answered here, once.
    ///
    /// libmicrohttpd 0.9.75 refuses such a request itself (`-5`, `abc`, `3,3`, a number past
    /// 2⁶⁴), inside one pass of its connection state machine that calls no callback of Sesame's,
    /// and in that pass builds its answer's head twice: the status line and headers go out twice,
    /// and a client reads the second head as the first answer's body. The one thing it does call
    /// in that pass is its error log, on the thread that handles the connection, with "Failed to
    /// parse `Content-Length' header" or "Too large value of 'Content-Length' header".
    ///
    /// The refused request is one of the connections whose head this thread is reading. When it
    /// is the only one, the log is known to be about it: its answer is written on the socket
    /// here (libmicrohttpd has written nothing of its own yet) and the socket is shut down, so
    /// that libmicrohttpd's answer fails to send and it closes the connection. When this thread
    /// is reading several heads (clients sending theirs slowly), which one was refused is not
    /// known, and libmicrohttpd's answer goes out as it is, to the client that sent the bad
    /// request; nothing else is touched.
    func answerUnreadableLength(logged format: UnsafePointer<CChar>) {
        guard strstr(format, "Content-Length") != nil else { return }
        let answer = strstr(format, "Too large") != nil ? tooLargeLength : malformedLength
        let thread = pthread_self()
        let descriptor = state.withLock { state -> Int32? in
            var found: Int32?
            for tracked in state.connections.values {
                guard let reader = tracked.progress.withLock({ $0.readingHead }), pthread_equal(reader, thread) != 0
                else { continue }
                guard found == nil else { return nil }  // Two heads in progress: which one is not known.
                found = tracked.descriptor
            }
            return found
        }
        guard let descriptor else { return }
        _ = answer.withUnsafeBytes {
            send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Shuts down the socket of every open connection (one whose descriptor still names its
    /// socket): libmicrohttpd then sees each end and closes it. For a stop, once nothing new
    /// can be accepted.
    func shutDownAll() {
        state.withLock { state in
            for (key, tracked) in state.connections {
                guard Self.isStillOpen(tracked) else {
                    state.connections.removeValue(forKey: key)
                    continue
                }
                shutdown(tracked.descriptor, Int32(SHUT_RDWR))
            }
        }
    }

    /// The connection closed (libmicrohttpd calls this before it closes the descriptor).
    func closed(_ key: UInt) {
        _ = state.withLock { $0.connections.removeValue(forKey: key) }
    }

    /// The inode of the socket behind `descriptor`, or nil when it is not an open socket.
    private static func inode(of descriptor: Int32) -> UInt? {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return UInt(info.st_ino)
    }

    /// How many received bytes wait in the socket's queue, unread by the server.
    private static func unreadBytes(_ descriptor: Int32) -> Int32 {
        var count: Int32 = 0
        return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? count : 0
    }

    /// Whether `tracked`'s descriptor still names its socket (not closed, nor reused since).
    private static func isStillOpen(_ tracked: Connection) -> Bool {
        tracked.inode != 0 && inode(of: tracked.descriptor) == tracked.inode
    }

    /// Shuts down connections whose head is overdue; `false` once stopped.
    private func sweep() -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard !state.stopped else { return false }
            for (key, tracked) in state.connections {
                guard let deadline = tracked.progress.withLock({ $0.headDeadline }), deadline <= now else { continue }
                guard Self.isStillOpen(tracked) else {
                    // Closed already (its close not reported yet), perhaps reused: not ours to touch.
                    state.connections.removeValue(forKey: key)
                    continue
                }
                // Bytes the server has not read yet: the server is behind (its thread held up on
                // a loaded machine), not the client. A client that dribbles has each byte read as
                // it comes, so it still meets the deadline; this one is looked at again later.
                guard Self.unreadBytes(tracked.descriptor) == 0 else { continue }
                shutdown(tracked.descriptor, Int32(SHUT_RDWR))
                tracked.progress.withLock { $0.headDeadline = nil }
                closedForSlowHead.add(1, ordering: .relaxed)
            }
            return true
        }
    }
}

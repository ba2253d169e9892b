import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What libmicrohttpd does not do against slow clients: a total deadline for each request head,
/// and a `503` instead of a hang for a connection past the limit.
///
/// libmicrohttpd tells it when a connection opens and closes (its notify-connection callback)
/// and the server core when a head is complete and a request is done. A thread of its own looks
/// every quarter second for connections whose head is overdue and shuts their socket down;
/// libmicrohttpd then sees the connection end and closes it. libmicrohttpd may close a descriptor
/// before it reports the connection closed, and the number is then reused by another socket of
/// the process: so the socket's inode is recorded when it opens, and a descriptor is shut down
/// only when `fstat` still finds that inode behind it (else the entry is dropped).
final class ConnectionGuard: Sendable {
    private struct Tracked {
        var descriptor: Int32
        /// The socket's inode: the descriptor is shut down only while it still names this socket.
        var inode: UInt
        /// When the head being waited for must be complete; `nil` while a request is handled.
        var headDeadline: ContinuousClock.Instant?
    }

    private struct State {
        var connections: [UInt: Tracked] = [:]
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

    init(maxConnections: Int, headTimeout: Duration, idleTimeout: Duration = .zero) {
        self.maxConnections = max(1, maxConnections)
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

    private static let refusal = LengthRefusals.closingAnswer(
        status: "503 Service Unavailable", body: "The server has too many connections open; try again shortly.\n",
        extraHeaders: "Retry-After: 1\r\n")

    /// A connection opened (on libmicrohttpd's thread). Past the limit it is answered 503 and shut.
    func opened(_ key: UInt, descriptor: Int32) {
        guard descriptor >= 0 else { return }
        let inode = Self.inode(of: descriptor)
        let refuse = state.withLock { state -> Bool in
            if state.connections.count >= maxConnections {
                // At the limit: first forget connections whose socket is gone (a close that was
                // not reported), so that they are not counted against the new one.
                state.connections = state.connections.filter { Self.inode(of: $0.value.descriptor) == $0.value.inode }
            }
            guard state.connections.count < maxConnections else { return true }
            state.connections[key] = Tracked(
                descriptor: descriptor, inode: inode ?? 0, headDeadline: headTimeout.map { ContinuousClock.now + $0 })
            return false
        }
        guard refuse else { return }
        refusedCount.add(1, ordering: .relaxed)
        // Nothing has been read or written on it yet: the answer goes out whole or not at all.
        _ = Self.refusal.withUnsafeBytes {
            send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// The connection's request head is complete: no deadline while the request is handled.
    func headReceived(_ key: UInt) {
        state.withLock { state in state.connections[key]?.headDeadline = nil }
    }

    /// A request finished. The connection's next head must be complete within the idle timeout
    /// plus the head timeout: a client that keeps the connection for reuse and falls silent is
    /// closed first by libmicrohttpd's idle timeout, as before, so only one that dribbles its next
    /// head (each byte resetting idleness) meets this deadline. With no idle timeout, a kept-alive
    /// connection has no deadline.
    func requestFinished(_ key: UInt) {
        guard let nextHeadTimeout else { return }
        let deadline = ContinuousClock.now + nextHeadTimeout
        state.withLock { state in state.connections[key]?.headDeadline = deadline }
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

    /// Shuts down connections whose head is overdue; `false` once stopped.
    private func sweep() -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard !state.stopped else { return false }
            for (key, tracked) in state.connections {
                guard let deadline = tracked.headDeadline, deadline <= now else { continue }
                guard tracked.inode != 0, Self.inode(of: tracked.descriptor) == tracked.inode else {
                    // Closed already (its close not reported yet), perhaps reused: not ours to touch.
                    state.connections.removeValue(forKey: key)
                    continue
                }
                shutdown(tracked.descriptor, Int32(SHUT_RDWR))
                state.connections[key]?.headDeadline = nil
                closedForSlowHead.add(1, ordering: .relaxed)
            }
            return true
        }
    }
}

internal import CMicroHTTPD
import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Accepts one listening socket's connections on a thread of its own and hands them in turn to
/// several libmicrohttpd daemons, each with one thread: how a server with several threads shares
/// its connections.
///
/// A daemon with a thread pool that accepts for itself has every thread poll the listening
/// socket, and the first one awake takes what is waiting: a burst of connections (wrk opening 32
/// at once, a browser opening six) could all land on one thread while the others idle. Measured
/// with `sesame-bench emulator`, some runs served every connection on one of two threads, at the
/// throughput of one. Handing a pool connections with `MHD_add_connection` is no cure: it picks
/// the thread by descriptor number, and a client in the same process (the Graph benchmark's
/// transport, a test) takes every other number, so all its connections landed on one thread.
///
/// The acceptor owns the listening socket and a socket pair that wakes it. ``stop()`` wakes it,
/// waits for its thread to end, and closes both; it must be called before the daemon is stopped,
/// so that nothing is handed to a daemon that is gone. ``requestStop()`` is the part that does
/// not wait, for a stop that begins on the cooperative pool.
final class Acceptor: @unchecked Sendable {
    // @unchecked: `daemons` is written once, in init, and only read after.
    /// The daemons, as the C array the accepting loop reads.
    private let daemons: UnsafeMutablePointer<OpaquePointer?>
    private let daemonCount: Int
    private let listenDescriptor: Int32
    /// A connected pair of sockets: a byte written to the first wakes the thread polling the second.
    private let wakeDescriptors: (write: Int32, read: Int32)
    private let finished = DispatchSemaphore(value: 0)
    /// Whether the thread was started, and whether ``stop()`` has run.
    private let phase = Locked((started: false, stopped: false))

    /// Takes ownership of `listenDescriptor`: it is closed by ``stop()``, or now if this throws.
    init(daemons: [OpaquePointer], listenDescriptor: Int32, display: String) throws {
        precondition(!daemons.isEmpty, "an acceptor needs a daemon")
        var pair: [Int32] = [-1, -1]
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        guard socketpair(AF_UNIX, kind, 0, &pair) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listenDescriptor)
            throw HTTPServerError.bindFailed(display, reason: "socketpair() failed: \(reason)")
        }
        self.daemons = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: daemons.count)
        self.daemons.initialize(from: daemons.map { Optional($0) }, count: daemons.count)
        daemonCount = daemons.count
        self.listenDescriptor = listenDescriptor
        self.wakeDescriptors = (pair[0], pair[1])
    }

    /// Starts accepting, on a thread named `sesame-httpserver-accept`.
    func start() {
        phase.withLock { $0.started = true }
        let thread = Thread { [self] in
            sesame_mhd_accept_loop(daemons, UInt32(daemonCount), listenDescriptor, wakeDescriptors.read)
            finished.signal()
        }
        thread.name = "sesame-httpserver-accept"
        thread.start()
    }

    /// Tells the thread to stop accepting, without waiting for it (``stop()`` waits).
    func requestStop() {
        // Under the lock: once ``stop()`` has begun, it wakes the thread and closes the pair.
        phase.withLock { phase in if !phase.stopped { wake() } }
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeDescriptors.write, &one, 1)
    }

    /// Stops accepting and waits for the accepting thread to end, then closes the listening
    /// socket (connections waiting in its queue are refused) and the socket pair. Only the first call
    /// does anything.
    func stop() {
        let (started, first) = phase.withLock { phase in
            defer { phase.stopped = true }
            return (phase.started, !phase.stopped)
        }
        guard first else { return }
        if started {
            wake()
            finished.wait()
        }
        close(listenDescriptor)
        close(wakeDescriptors.write)
        close(wakeDescriptors.read)
    }

    deinit { daemons.deallocate() }
}

internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame
import Synchronization

/// The libcurl multi handle of a ``CurlTransport``, the thread that waits on its sockets, and
/// the shortcut that lets a lone caller skip that thread.
///
/// Threads. Every libcurl call on the multi handle, the share handle and the easy handles runs
/// with `lock` held, on whichever thread holds it, and every variable below is guarded by it.
/// libcurl's socket and timer callbacks (``socketChanged(easy:socket:what:)``,
/// ``timerChanged(milliseconds:)``) and the transfers' data callbacks run inside those calls, so
/// under the same lock. Continuations are resumed only after the lock is released.
///
/// - The engine thread sleeps in `epoll_wait` on the sockets libcurl asks for (through
///   `CURLMOPT_SOCKETFUNCTION`), a `timerfd` for libcurl's timeouts (`CURLMOPT_TIMERFUNCTION`)
///   and an `eventfd` to wake it. Changing the epoll set or the timer from another thread takes
///   effect at once. When a socket is ready it runs libcurl, and resumes the callers whose
///   transfers finished.
/// - A caller with nothing else outstanding adds its transfer and runs libcurl right away on its
///   own thread (`start`): on a kept connection the request is written before `start` returns,
///   with no thread hand-over. When others are in flight, the engine thread is busy with their
///   sockets anyway, so the caller leaves the transfer to it (`delegated`), to start with the
///   rest of its batch, and wakes it only if it is asleep: many callers never contend for the
///   lock, and 32 requests in flight cost one thread's batches, as a multi loop's would.
/// - A lone caller whose previous lone request was answered within ``inlineBudget``, on a
///   transport that has had one caller at a time for ``quietPeriod``, waits for
///   its answer on its own thread, in `ppoll` on its own sockets (kept out of the epoll set
///   meanwhile), for at most ``inlineBudget``; then, or as soon as another request is started
///   or its transfer is cancelled or timed out, it hands the sockets to the engine thread and
///   suspends. On loopback and fast networks a sequential caller so gets its answer with no
///   thread hand-over at all, as a blocking libcurl loop does, while a slow server never holds a
///   pool thread longer than the budget, and a server that is slow only when a pool thread waits
///   for it (one in the same process, whose handlers need that thread) makes the caller back off.
///
/// - Tasks that prefer the engine as their executor (``CurlTransport/executor``) have their
///   jobs run by the engine thread after each round, outside the lock; their transfers are left
///   to the thread like any other, and they never wait inline.
///
/// Files, by job: this one holds the state and what callers call; `CurlEngine+InlineWait` the
/// lone caller's wait; `CurlEngine+Thread` the engine thread and the bookkeeping of transfers
/// (lock held); `CurlEngine+Executor` the jobs of tasks that prefer the engine thread;
/// `CurlEngine+Callbacks` libcurl's socket and timer callbacks and the epoll set;
/// `CurlEngine+Options` the easy handles' options. Members are internal rather than private so
/// that those extensions reach them; nothing outside this type uses them.
final class CurlEngine: @unchecked Sendable {  // every var is guarded by `lock`; see "Threads" above
    typealias Resumption = (UnsafeContinuation<Void, any Error>, Result<Void, any Error>)

    let lock = Locked<Void>(())
    let configuration: CurlTransport.Configuration
    let multi: UnsafeMutableRawPointer
    let share: UnsafeMutableRawPointer
    let epollFD: Int32
    /// An eventfd in the epoll set that wakes the engine thread: for delegated work, and shutdown.
    let wakeFD: Int32
    let timerFD: Int32
    var thread = pthread_t()

    // Guarded by `lock`.
    /// Set by ``shutDown()``, or when the engine thread stops on a failure: no transfer starts.
    var stopping = false
    /// Why the engine thread stopped, when it was not shut down.
    var stopReason: TransportError?
    /// The multi and share handles have been freed: no libcurl call may be made.
    var released = false
    var idleHandles: [CurlEasyHandle] = []
    var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// libcurl asked (timeout 0) for `sesame_curl_multi_socket_action(CURL_SOCKET_TIMEOUT)` as soon as possible.
    var timeoutDue = false
    /// The sockets in the epoll set, with the events asked for.
    var watched: [Int32: UInt32] = [:]
    /// Sockets still in the epoll set that libcurl no longer needs (a connection kept for
    /// reuse). They stay there, with the events last asked for, so that reusing the connection
    /// costs no `epoll_ctl` when it asks for the same events (as an HTTP/1.1 request on a kept
    /// connection does), until an event shows up for one (the server closed it). Only
    /// connections' sockets, which the engine opens and closes itself (``openSocket(_:)``,
    /// ``closeSocket(_:)``) and takes out of the set before they are closed, become dormant: a
    /// number here always names the socket registered under it.
    var dormant: Set<Int32> = []
    /// The sockets of connections libcurl opened through the engine and has not closed yet.
    var connectionSockets: Set<Int32> = []
    /// The easy handle a lone caller is driving on its own thread, if any.
    var inlineHandle: UnsafeMutableRawPointer?
    /// That transfer's sockets and what libcurl wants on them (`CURL_POLL_*`), kept out of the epoll set.
    var inlineSockets: [Int32: Int32] = [:]
    /// How long the last lone request took, start to finish, in nanoseconds.
    var lastLoneLatency = UInt64.max
    /// How many more lone requests go to the engine thread before one is waited for inline again,
    /// and how many the next inline wait that runs out of budget adds: 1, 2, 4, … up to
    /// ``maximumInlinePenalty``, back to 0 after an inline wait that is answered. A server that
    /// is fast through the engine thread but slow when a pool thread waits for it (one in the
    /// same process, whose handlers need that thread) so costs a budget only now and then.
    var inlineSkips = 0
    var inlinePenalty = 0
    static let maximumInlinePenalty = 1024
    /// Callers to resume once the lock is released.
    var resumptions: [Resumption] = []
    /// When the timer fires, in CLOCK_MONOTONIC nanoseconds (`.max`: not armed).
    var timerDeadline = UInt64.max

    /// Jobs of tasks that prefer the engine as their executor, for the engine thread to run
    /// (see `CurlEngine+Executor`), and how many there are.
    let jobs = Locked<[UnownedJob]>([])
    let jobCount = Atomic<Int>(0)
    /// The engine thread's `pthread_self()`, stored by the thread itself as it starts (0 before).
    let engineThreadID = Atomic<UInt>(0)

    /// Transfers left for the engine thread to start; see `start`.
    let delegated = Locked<[CurlTransfer]>([])
    let delegatedCount = Atomic<Int>(0)
    /// Transfers from the moment `start` takes them until they are finished, whether running,
    /// left for the engine thread, or being started: a caller that finds none is alone.
    let outstanding = Atomic<Int>(0)
    /// When a caller last found others in flight (CLOCK_MONOTONIC nanoseconds).
    let lastCrowded = Atomic<UInt64>(0)
    /// How long a transport must have had one caller at a time before a lone caller waits
    /// inline, in nanoseconds.
    let quietPeriod: UInt64

    /// The default ``quietPeriod``: 20 ms, many times a loopback request.
    static let defaultQuietPeriod: Duration = .milliseconds(20)
    /// Whether the engine thread is awake (not in, or about to enter, `epoll_wait`).
    let engineBusy = Atomic<Bool>(false)
    /// The engine thread has stopped and freed libcurl's handles; nothing left for it is started.
    let stopped = Atomic<Bool>(false)

    /// Idle easy handles kept for reuse; more than this in flight at once are freed when done.
    static let idleHandleLimit = 64

    /// The longest a lone caller waits for its answer on its own thread before handing the wait
    /// to the engine thread, and the latency a lone request must have stayed within for the next
    /// one to try, in nanoseconds.
    let inlineBudget: UInt64

    /// The default ``inlineBudget``: 500 µs, a few loopback or LAN round trips, and short enough
    /// that holding a pool thread that long is like a small piece of work, not a blocking call.
    static let defaultInlineBudget: Duration = .microseconds(500)

    /// Wakes a lone caller's `ppoll` when another thread takes its transfer away (a second
    /// request, a cancellation, a timeout the engine thread ran).
    let inlineWakeFD: Int32
    /// Whether the lone caller is in `ppoll` now (guarded by `lock`).
    var inlinePolling = false

    /// How transfers ended up being waited for; for tests and diagnostics.
    let counters = Counters()

    /// For tests: as if the last crowd were long past, so that the next lone caller may wait
    /// inline without the test sleeping through ``quietPeriod`` (and a loaded machine deciding
    /// whether it has passed).
    func forgetCrowds() { lastCrowded.store(0, ordering: .relaxed) }

    /// For tests: makes the engine thread's next `epoll_wait` fail (`EINVAL`), as it would on a
    /// descriptor gone wrong, by putting one that is not an epoll instance in its place.
    func breakEventLoop() {
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        _ = dup2(null, epollFD)
        close(null)
        wakeEngine()
    }

    /// Whether a lone caller is waiting inline (in `ppoll`) now; for tests that start a second
    /// request during that wait.
    var isWaitingInline: Bool { lock.withLock { _ in inlinePolling } }

    /// Counts of how transfers were waited for.
    final class Counters: Sendable {
        /// Transfers answered while their caller waited on its own thread.
        let finishedInline = Atomic<Int>(0)
        /// Inline waits that ran out of budget, or were interrupted, and went to the engine thread.
        let handedOver = Atomic<Int>(0)
        /// Sockets added to the epoll set, or whose events changed there.
        let epollChanges = Atomic<Int>(0)
        /// Sockets libcurl closed (through ``closeSocket(_:)``).
        let socketsClosed = Atomic<Int>(0)
    }

    init(
        configuration: CurlTransport.Configuration, inlineBudget: Duration = CurlEngine.defaultInlineBudget,
        quietPeriod: Duration = CurlEngine.defaultQuietPeriod
    ) {
        CurlGlobal.initialize()
        self.configuration = configuration
        self.inlineBudget = Self.nanoseconds(inlineBudget)
        self.quietPeriod = Self.nanoseconds(quietPeriod)
        guard let multi = sesame_curl_multi_init(), let share = sesame_curl_share_init() else {
            fatalError("curl_multi_init or curl_share_init failed: out of memory")
        }
        self.multi = multi
        self.share = share
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        timerFD = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        inlineWakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard epollFD >= 0, wakeFD >= 0, timerFD >= 0, inlineWakeFD >= 0 else {
            fatalError(
                "CurlTransport could not create its epoll, eventfds or timerfd: \(String(cString: strerror(errno)))")
        }
        for fd in [wakeFD, timerFD] {
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.fd = fd
            _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
        }

        // Every use of the share handle happens under `lock`, so it needs no lock callbacks.
        _ = sesame_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        _ = sesame_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        _ = sesame_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // libcurl's default keeps 4 idle connections for each easy handle in the multi handle at
        // the moment one is returned: with callers' handles removed as their answers come back,
        // that is often 4 or 8, and eight callers' kept connections are closed and made again
        // (5% of requests, measured). Keep as many as handles are kept for reuse.
        _ = sesame_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.idleHandleLimit)
        // Unretained: the engine outlives the multi handle, which tearDown() frees.
        let unretained = Unmanaged.passUnretained(self).toOpaque()
        _ = sesame_multi_setopt_socket_callback(multi, Self.socketCallback)
        _ = sesame_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, unretained)
        _ = sesame_multi_setopt_timer_callback(multi, Self.timerCallback)
        _ = sesame_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, unretained)

        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { context in
                let engine = Unmanaged<CurlEngine>.fromOpaque(context!).takeRetainedValue()
                engine.run()
                return nil
            }, context)
        guard created == 0 else {
            fatalError("CurlTransport could not start its thread: pthread_create returned \(created)")
        }
    }

    deinit {
        close(timerFD)
        close(wakeFD)
        close(inlineWakeFD)
        close(epollFD)
    }

    // MARK: Any thread

    /// Adds `transfer` to the multi handle and runs libcurl on the calling thread, which on a
    /// kept connection writes the request. Returns whether the caller should now wait for the
    /// answer itself with ``driveInline(_:)``; either way ``park(_:continuation:)`` picks up the
    /// result, which may already be there (a request refused at once, or cancelled).
    func start(_ transfer: CurlTransfer) -> Bool {
        let alone = outstanding.wrappingAdd(1, ordering: .sequentiallyConsistent).oldValue == 0
        guard alone else {
            // Others are in flight, so the engine thread has sockets to watch and is, or soon
            // will be, busy with them: leave the transfer to it, to start with the rest of its
            // batch, rather than contend for the lock. An engine about to sleep sees it (the
            // fences pair with the ones in `run`); one asleep is woken.
            lastCrowded.store(Self.now(), ordering: .relaxed)
            delegated.withLock { $0.append(transfer) }
            delegatedCount.add(1, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            if !engineBusy.load(ordering: .sequentiallyConsistent) { wakeEngine() }
            // A thread that has stopped no longer looks at what is left for it: fail it here
            // (the store in `tearDown` comes before its last look, so one of the two sees it).
            if stopped.load(ordering: .sequentiallyConsistent) {
                resume(
                    lock.withLock { _ in
                        startDelegatedLocked()
                        return takeResumptions()
                    })
            }
            return false
        }
        // Nothing in flight: whatever the engine thread is doing (a timer) is short; start it
        // here. Only a caller that has been alone for a while waits inline: many callers whose
        // answers came back in one batch all find nothing in flight for a moment, and the first
        // of them must not hold a pool thread the others need.
        // Never on the engine thread (a task that prefers it as its executor): waiting there
        // would keep it from every other socket.
        let quiet = Self.now() &- lastCrowded.load(ordering: .relaxed) > quietPeriod && !isEngineThread
        let (inline, resumptions) = lock.withLock { _ in
            let inline = startLocked(transfer, mayDriveInline: quiet)
            runDueTimeouts()
            collectFinished()
            // Answered before libcurl even returned: the fastest inline wait there is.
            if inline && transfer.isFinished { inlineWaitAnswered() }
            return (inline && !transfer.isFinished, takeResumptions())
        }
        resume(resumptions)
        startDelegated()
        return inline
    }

    /// Wakes the engine thread from `epoll_wait`.
    func wakeEngine() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Starts the transfers callers left for the engine thread, if the lock is free (whoever
    /// holds it does it otherwise: everyone calls this after releasing the lock). The engine
    /// thread gets to them first in practice; this only saves a caller that releases the lock
    /// right after another left one from waiting for the engine thread's next round.
    func startDelegated() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        while delegatedCount.load(ordering: .sequentiallyConsistent) > 0 {
            let resumptions = lock.withLockIfAvailable { _ in
                startDelegatedLocked()
                runDueTimeouts()
                collectFinished()
                return takeResumptions()
            }
            guard let resumptions else { return }
            resume(resumptions)
        }
    }

    /// Resumes `continuation` when `transfer` finishes, or at once if it has.
    func park(_ transfer: CurlTransfer, continuation: UnsafeContinuation<Void, any Error>) {
        if !transfer.park(continuation), let result = transfer.result { continuation.resume(with: result) }
    }

    /// Aborts `transfer` (closing its connection) and fails it with `CancellationError`;
    /// harmless if it has finished, and makes ``start(_:)`` refuse it if it has not started.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .relaxed)
        let resumptions = lock.withLock { _ in
            guard !stopping, !transfer.isFinished, let easy = transfer.easy,
                running.removeValue(forKey: easy.raw) != nil
            else { return takeResumptions() }
            if inlineHandle == easy.raw { handOverInline() }
            sesame_curl_multi_remove_handle(multi, easy.raw)
            transfer.easy = nil
            recycle(easy)
            complete(transfer, with: .failure(CancellationError()))
            return takeResumptions()
        }
        resume(resumptions)
        startDelegated()
    }

    /// Stops the thread, waits for it to free every handle, and returns.
    func shutDown() {
        lock.withLock { _ in stopping = true }
        wakeEngine()
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    func resume(_ resumptions: [Resumption]) {
        for (continuation, result) in resumptions { continuation.resume(with: result) }
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// CLOCK_MONOTONIC in nanoseconds, the clock of the timerfd.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    static let shutDownError = TransportError(
        kind: .other, message: "The CurlTransport was shut down while this request was in flight.")
}

internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame
import Synchronization

/// A libcurl easy handle and its error buffer, owned by the engine thread, freed in `deinit`.
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let raw = sesame_curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        sesame_curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// libcurl's message for the last failure, or `nil` when it left none.
    var errorMessage: String? {
        let message = String(cString: errorBuffer).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.isEmpty ? nil : message
    }
}

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
final class CurlEngine: @unchecked Sendable {  // every var is guarded by `lock`; see "Threads" above
    private typealias Resumption = (UnsafeContinuation<Void, any Error>, Result<Void, any Error>)

    private let lock = Mutex<Void>(())
    private let configuration: CurlTransport.Configuration
    private let multi: UnsafeMutableRawPointer
    private let share: UnsafeMutableRawPointer
    private let epollFD: Int32
    /// An eventfd in the epoll set that wakes the engine thread: for delegated work, and shutdown.
    private let wakeFD: Int32
    private let timerFD: Int32
    private var thread = pthread_t()

    // Guarded by `lock`.
    private var stopping = false
    private var idleHandles: [CurlEasyHandle] = []
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// libcurl asked (timeout 0) for `sesame_curl_multi_socket_action(CURL_SOCKET_TIMEOUT)` as soon as possible.
    private var timeoutDue = false
    /// The sockets in the epoll set, with the events asked for.
    private var watched: [Int32: UInt32] = [:]
    /// Sockets still in the epoll set that libcurl no longer needs (a connection kept for
    /// reuse). They stay there, so that reusing the connection costs one `epoll_ctl` rather
    /// than two, until an event shows up for one (the server closed it). libcurl may close one
    /// meanwhile, and the kernel drop it from the set and hand the number out again, so a
    /// dormant socket asked for again is always re-registered (see ``watch(_:what:)``).
    private var dormant: Set<Int32> = []
    /// The easy handle a lone caller is driving on its own thread, if any.
    private var inlineHandle: UnsafeMutableRawPointer?
    /// That transfer's sockets and what libcurl wants on them (`CURL_POLL_*`), kept out of the epoll set.
    private var inlineSockets: [Int32: Int32] = [:]
    /// How long the last lone request took, start to finish, in nanoseconds.
    private var lastLoneLatency = UInt64.max
    /// How many more lone requests go to the engine thread before one is waited for inline again,
    /// and how many the next inline wait that runs out of budget adds: 1, 2, 4, … up to
    /// ``maximumInlinePenalty``, back to 0 after an inline wait that is answered. A server that
    /// is fast through the engine thread but slow when a pool thread waits for it (one in the
    /// same process, whose handlers need that thread) so costs a budget only now and then.
    private var inlineSkips = 0
    private var inlinePenalty = 0
    private static let maximumInlinePenalty = 1024
    /// Callers to resume once the lock is released.
    private var resumptions: [Resumption] = []
    /// When the timer fires, in CLOCK_MONOTONIC nanoseconds (`.max`: not armed).
    private var timerDeadline = UInt64.max

    /// Transfers left for the engine thread to start; see `start`.
    private let delegated = Mutex<[CurlTransfer]>([])
    private let delegatedCount = Atomic<Int>(0)
    /// Transfers from the moment `start` takes them until they are finished, whether running,
    /// left for the engine thread, or being started: a caller that finds none is alone.
    private let outstanding = Atomic<Int>(0)
    /// When a caller last found others in flight (CLOCK_MONOTONIC nanoseconds).
    private let lastCrowded = Atomic<UInt64>(0)
    /// How long a transport must have had one caller at a time before a lone caller waits
    /// inline, in nanoseconds.
    let quietPeriod: UInt64

    /// The default ``quietPeriod``: 20 ms, many times a loopback request.
    static let defaultQuietPeriod: Duration = .milliseconds(20)
    /// Whether the engine thread is awake (not in, or about to enter, `epoll_wait`).
    private let engineBusy = Atomic<Bool>(false)

    /// Idle easy handles kept for reuse; more than this in flight at once are freed when done.
    private static let idleHandleLimit = 64

    /// The longest a lone caller waits for its answer on its own thread before handing the wait
    /// to the engine thread, and the latency a lone request must have stayed within for the next
    /// one to try, in nanoseconds.
    let inlineBudget: UInt64

    /// The default ``inlineBudget``: 500 µs, a few loopback or LAN round trips, and short enough
    /// that holding a pool thread that long is like a small piece of work, not a blocking call.
    static let defaultInlineBudget: Duration = .microseconds(500)

    /// Wakes a lone caller's `ppoll` when another thread takes its transfer away (a second
    /// request, a cancellation, a timeout the engine thread ran).
    private let inlineWakeFD: Int32
    /// Whether the lone caller is in `ppoll` now (guarded by `lock`).
    private var inlinePolling = false

    /// How transfers ended up being waited for; for tests and diagnostics.
    let counters = Counters()

    /// For tests: as if the last crowd were long past, so that the next lone caller may wait
    /// inline without the test sleeping through ``quietPeriod`` (and a loaded machine deciding
    /// whether it has passed).
    func forgetCrowds() { lastCrowded.store(0, ordering: .relaxed) }

    /// Whether a lone caller is waiting inline (in `ppoll`) now; for tests that start a second
    /// request during that wait.
    var isWaitingInline: Bool { lock.withLock { _ in inlinePolling } }

    /// Counts of how transfers were waited for.
    final class Counters: Sendable {
        /// Transfers answered while their caller waited on its own thread.
        let finishedInline = Atomic<Int>(0)
        /// Inline waits that ran out of budget, or were interrupted, and went to the engine thread.
        let handedOver = Atomic<Int>(0)
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
            return false
        }
        // Nothing in flight: whatever the engine thread is doing (a timer) is short; start it
        // here. Only a caller that has been alone for a while waits inline: many callers whose
        // answers came back in one batch all find nothing in flight for a moment, and the first
        // of them must not hold a pool thread the others need.
        let quiet = Self.now() &- lastCrowded.load(ordering: .relaxed) > quietPeriod
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
    private func wakeEngine() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Starts the transfers callers left for the engine thread, if the lock is free (whoever
    /// holds it does it otherwise: everyone calls this after releasing the lock). The engine
    /// thread gets to them first in practice; this only saves a caller that releases the lock
    /// right after another left one from waiting for the engine thread's next round.
    private func startDelegated() {
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

    /// Waits on the calling thread, for at most ``inlineBudget``, for the transfer ``start(_:)``
    /// chose to drive inline; returns whether it finished. When it has not, its sockets are back
    /// with the engine thread and the caller should ``park(_:continuation:)``.
    func driveInline(_ transfer: CurlTransfer) -> Bool {
        let deadline = Self.now() + inlineBudget
        var fds: [pollfd] = []
        while true {
            let waits = lock.withLock { _ -> Bool in
                guard !transfer.isFinished, let easy = transfer.easy, inlineHandle == easy.raw else { return false }
                guard Self.now() < deadline else {
                    // The server is slower than it was: back off before waiting inline again.
                    inlinePenalty = min(max(1, inlinePenalty * 2), Self.maximumInlinePenalty)
                    inlineSkips = inlinePenalty
                    handOverInline()
                    return false
                }
                guard !inlineSockets.isEmpty else {
                    handOverInline()  // libcurl waits on a timer, not a socket (a name lookup, say)
                    return false
                }
                fds.removeAll(keepingCapacity: true)
                fds.append(pollfd(fd: inlineWakeFD, events: Int16(POLLIN), revents: 0))
                for (socket, what) in inlineSockets {
                    var events: Int16 = 0
                    if what & CURL_POLL_IN != 0 { events |= Int16(POLLIN) }
                    if what & CURL_POLL_OUT != 0 { events |= Int16(POLLOUT) }
                    fds.append(pollfd(fd: socket, events: events, revents: 0))
                }
                inlinePolling = true
                return true
            }
            guard waits else { break }
            let now = Self.now()
            let ready = sesame_poll_nanoseconds(&fds, nfds_t(fds.count), Int64(deadline > now ? deadline - now : 0))
            if ready > 0 && fds[0].revents != 0 {
                var count: UInt64 = 0
                _ = read(inlineWakeFD, &count, MemoryLayout<UInt64>.size)
            }
            let resumptions = lock.withLock { _ in
                inlinePolling = false
                if ready > 0, !transfer.isFinished, let easy = transfer.easy, inlineHandle == easy.raw {
                    for fd in fds.dropFirst() where fd.revents != 0 {
                        var mask: Int32 = 0
                        if fd.revents & Int16(POLLIN) != 0 { mask |= CURL_CSELECT_IN }
                        if fd.revents & Int16(POLLOUT) != 0 { mask |= CURL_CSELECT_OUT }
                        if fd.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { mask |= CURL_CSELECT_ERR }
                        socketAction(fd.fd, mask)
                    }
                    runDueTimeouts()
                    collectFinished()
                }
                return takeResumptions()
            }
            resume(resumptions)
            startDelegated()
        }
        startDelegated()
        let finished = transfer.isFinished
        if finished {
            lock.withLock { _ in inlineWaitAnswered() }
        } else {
            counters.handedOver.add(1, ordering: .relaxed)
        }
        return finished
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

    private func resume(_ resumptions: [Resumption]) {
        for (continuation, result) in resumptions { continuation.resume(with: result) }
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// CLOCK_MONOTONIC in nanoseconds, the clock of the timerfd.
    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private static let shutDownError = TransportError(
        kind: .other, message: "The CurlTransport was shut down while this request was in flight.")

    // MARK: Engine thread

    private func run() {
        Thread.current.name = "sesame-curl"
        let capacity = 64
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while true {
            // Asleep from here: callers start their own transfers. Work left while the thread
            // was busy is seen here (the fences pair with the ones in `start`).
            engineBusy.store(false, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            let waitMilliseconds: Int32 = delegatedCount.load(ordering: .sequentiallyConsistent) > 0 ? 0 : -1
            let count = epoll_wait(epollFD, events, Int32(capacity), waitMilliseconds)
            engineBusy.store(true, ordering: .sequentiallyConsistent)
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("CurlTransport's epoll_wait failed: \(String(cString: strerror(errno)))")
            }
            let (stop, resumptions) = lock.withLock { _ in
                if stopping { return (true, [Resumption]()) }
                for index in 0..<Int(count) {
                    let event = events[index]
                    let fd = event.data.fd
                    if fd == wakeFD {
                        var count: UInt64 = 0
                        _ = read(wakeFD, &count, MemoryLayout<UInt64>.size)
                        continue
                    }
                    if fd == timerFD {
                        var expirations: UInt64 = 0
                        _ = read(timerFD, &expirations, MemoryLayout<UInt64>.size)
                        timerDeadline = .max
                        socketAction(sesame_curl_socket_timeout(), 0)
                        continue
                    }
                    // libcurl may have dropped the socket while handling an earlier event of this batch.
                    guard watched[fd] != nil else { continue }
                    if dormant.contains(fd) {
                        unwatch(fd)  // a kept connection the server closed, or sent something unasked
                        continue
                    }
                    var mask: Int32 = 0
                    if event.events & EPOLLIN.rawValue != 0 { mask |= CURL_CSELECT_IN }
                    if event.events & EPOLLOUT.rawValue != 0 { mask |= CURL_CSELECT_OUT }
                    if event.events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { mask |= CURL_CSELECT_ERR }
                    socketAction(fd, mask)
                }
                startDelegatedLocked()
                runDueTimeouts()
                collectFinished()
                return (false, takeResumptions())
            }
            resume(resumptions)
            if stop { break }
        }
        tearDown()
    }

    // MARK: Lock held

    private func socketAction(_ socket: Int32, _ mask: Int32) {
        var stillRunning: Int32 = 0
        _ = sesame_curl_multi_socket_action(multi, socket, mask, &stillRunning)
    }

    /// Runs libcurl's timeouts for as long as it asks for one right away.
    private func runDueTimeouts() {
        var rounds = 0
        while timeoutDue && rounds < 16 {
            timeoutDue = false
            rounds += 1
            socketAction(sesame_curl_socket_timeout(), 0)
        }
        if timeoutDue {
            // Still asking: let the engine thread go on with it rather than holding this caller.
            timeoutDue = false
            arm(at: Self.now())
        }
    }

    private func collectFinished() {
        var queued: Int32 = 0
        while let message = sesame_curl_multi_info_read(multi, &queued) {
            guard sesame_multi_message_is_done(message) != 0 else { continue }
            finish(sesame_multi_message_handle(message), result: sesame_multi_message_result(message))
        }
    }

    private func takeResumptions() -> [Resumption] {
        guard !resumptions.isEmpty else { return [] }
        defer { resumptions.removeAll() }
        return resumptions
    }

    /// An inline wait got its answer: no more back-off, and one more for the counters.
    private func inlineWaitAnswered() {
        inlinePenalty = 0
        counters.finishedInline.add(1, ordering: .relaxed)
    }

    /// Gives the lone caller's sockets to the engine thread's epoll set, and wakes the caller if
    /// it is waiting in `ppoll` (it then finds its transfer gone, and parks).
    private func handOverInline() {
        if inlinePolling {
            var one: UInt64 = 1
            _ = write(inlineWakeFD, &one, MemoryLayout<UInt64>.size)
        }
        inlineHandle = nil
        for (socket, what) in inlineSockets { watch(socket, what: what) }
        inlineSockets.removeAll()
    }

    /// CURLMOPT_SOCKETFUNCTION: what libcurl wants to hear about `socket` now.
    fileprivate func socketChanged(easy: UnsafeMutableRawPointer?, socket: Int32, what: Int32) {
        if what == CURL_POLL_REMOVE {
            inlineSockets[socket] = nil
            if watched[socket] != nil { dormant.insert(socket) }
        } else if let inlineHandle, easy == inlineHandle {
            unwatch(socket)  // the lone caller polls it itself
            inlineSockets[socket] = what
        } else {
            inlineSockets[socket] = nil
            watch(socket, what: what)
        }
    }

    /// CURLMOPT_TIMERFUNCTION: when libcurl next needs `sesame_curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`.
    ///
    /// The timer is only ever moved earlier: one that fires before libcurl needs it costs a
    /// `curl_multi_socket_action` that finds nothing due (and sets the timer again), which is
    /// cheaper than a system call for every request that moves the deadline later.
    fileprivate func timerChanged(milliseconds: Int) {
        if milliseconds < 0 {
            timeoutDue = false
        } else if milliseconds == 0 {
            timeoutDue = true  // run by whoever holds the lock, before releasing it
        } else {
            timeoutDue = false
            let deadline = Self.now() + UInt64(milliseconds) * 1_000_000
            if deadline < timerDeadline { arm(at: deadline) }
        }
    }

    /// Sets the timer to fire once at `deadline` (CLOCK_MONOTONIC nanoseconds).
    private func arm(at deadline: UInt64) {
        timerDeadline = deadline
        var setting = itimerspec()
        setting.it_value.tv_sec = Int(deadline / 1_000_000_000)
        setting.it_value.tv_nsec = max(1, Int(deadline % 1_000_000_000))
        _ = timerfd_settime(timerFD, Int32(TFD_TIMER_ABSTIME), &setting, nil)
    }

    private func watch(_ socket: Int32, what: Int32) {
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= EPOLLIN.rawValue }
        if what & CURL_POLL_OUT != 0 { events |= EPOLLOUT.rawValue }
        // A dormant socket may have been closed and its number reused: register it again.
        let wasDormant = dormant.remove(socket) != nil
        if !wasDormant && watched[socket] == events { return }
        var event = epoll_event()
        event.events = events
        event.data.fd = socket
        let known = watched[socket] != nil
        if epoll_ctl(epollFD, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket, &event) != 0 {
            // The kernel forgets a socket when it is closed, and a number can come back for a new
            // one: whichever way the set and `watched` disagree, the other operation fixes it.
            _ = epoll_ctl(epollFD, known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event)
        }
        watched[socket] = events
    }

    private func unwatch(_ socket: Int32) {
        dormant.remove(socket)
        guard watched.removeValue(forKey: socket) != nil else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, nil)
    }

    /// Adds `transfer` and decides whether its caller drives it inline; the caller then runs
    /// libcurl's due timeouts, which writes the request.
    private func startLocked(_ transfer: CurlTransfer, mayDriveInline: Bool) -> Bool {
        if stopping {
            complete(transfer, with: .failure(Self.shutDownError))
            return false
        }
        if transfer.cancelRequested.load(ordering: .relaxed) {
            complete(transfer, with: .failure(CancellationError()))
            return false
        }
        // A second request in flight: the lone caller's sockets go back to the engine thread.
        if inlineHandle != nil { handOverInline() }
        let lone = mayDriveInline && running.isEmpty
        transfer.isLone = lone
        transfer.startedAt = Self.now()
        guard add(transfer), let easy = transfer.easy else { return false }
        guard lone && lastLoneLatency <= inlineBudget else { return false }
        if inlineSkips > 0 {
            inlineSkips -= 1
            return false
        }
        inlineHandle = easy.raw
        return true
    }

    private func startDelegatedLocked() {
        let transfers = delegated.withLock { delegated in
            defer { delegated.removeAll(keepingCapacity: true) }
            return delegated
        }
        guard !transfers.isEmpty else { return }
        delegatedCount.subtract(transfers.count, ordering: .sequentiallyConsistent)
        for transfer in transfers { _ = startLocked(transfer, mayDriveInline: false) }
    }

    /// Adds `transfer` to the multi handle on a pooled easy handle; whether that worked (when it
    /// did not, the transfer is completed with the error).
    private func add(_ transfer: CurlTransfer) -> Bool {
        guard let easy = idleHandles.popLast() ?? makeHandle() else {
            complete(
                transfer,
                with: .failure(
                    TransportError(
                        kind: .invalidRequest,
                        message: "CurlTransport's configuration was refused by libcurl \(CurlTransport.libcurlVersion) "
                            + "(an option it does not support, or a malformed proxy or CA path); check the "
                            + "configuration.",
                        host: transfer.host)))
            return false
        }
        let configured = configure(easy, for: transfer)
        guard configured == CURLE_OK else {
            recycle(easy)
            complete(transfer, with: .failure(CurlErrors.error(for: configured, message: nil, transfer: transfer)))
            return false
        }
        let added = sesame_curl_multi_add_handle(multi, easy.raw)
        guard added == CURLM_OK else {
            recycle(easy)
            let message = String(cString: sesame_curl_multi_strerror(added))
            complete(
                transfer,
                with: .failure(
                    TransportError(
                        kind: .other,
                        message: "\(transfer.method) \(transfer.redactedURL) could not start: \(message).",
                        host: transfer.host)))
            return false
        }
        transfer.easy = easy
        running[easy.raw] = transfer
        return true
    }

    /// A new easy handle with the options every request of this engine shares already set.
    private func makeHandle() -> CurlEasyHandle? {
        let easy = CurlEasyHandle()
        let handle = easy.raw
        var result = CURLE_OK
        func check(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        func set(_ option: CURLoption, _ value: Int) { check(sesame_easy_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, _ value: String) { check(sesame_easy_setopt_string(handle, option, value)) }

        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_NOSIGNAL, 1)
        // Removing a transfer still resolving a name must not wait, with the lock held, for the
        // resolver thread to finish (libcurl 7.87+; not checked, so an older libcurl still works).
        _ = sesame_easy_setopt_long(handle, CURLOPT_QUICK_EXIT, 1)
        check(sesame_easy_setopt_pointer(handle, CURLOPT_SHARE, share))
        check(sesame_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(easy.errorBuffer)))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, CurlTransfer.writeCallback))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, CurlTransfer.headerCallback))
        set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        set(CURLOPT_PIPEWAIT, 1)  // HTTP/2: wait to share a connection rather than open another
        set(CURLOPT_CONNECTTIMEOUT_MS, CurlTransfer.milliseconds(configuration.connectTimeout))
        check(
            sesame_easy_setopt_off_t(
                handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(max(0, configuration.maximumResponseBodySize))))
        set(CURLOPT_USERAGENT, configuration.userAgent)
        if configuration.acceptsCompressedResponses { set(CURLOPT_ACCEPT_ENCODING, "") }
        set(CURLOPT_MAXREDIRS, configuration.redirects.maximumRedirects)

        switch configuration.tlsVerification.mode {
        case .system:
            break  // libcurl's defaults: VERIFYPEER 1, VERIFYHOST 2, the distribution's CA bundle
        case .certificateAuthorities(let path):
            set(CURLOPT_CAINFO, path)
        case .disabled:
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }

        switch configuration.proxy.mode {
        case .environment:
            break
        case .direct:
            set(CURLOPT_PROXY, "")
        case .url(let proxy):
            set(CURLOPT_PROXY, proxy)
            set(CURLOPT_NOPROXY, "")
        }
        return result == CURLE_OK ? easy : nil
    }

    /// Sets the options that differ between requests. Every one of them is set for every
    /// request, so nothing carries over from the handle's previous request.
    private func configure(_ easy: CurlEasyHandle, for transfer: CurlTransfer) -> CURLcode {
        let handle = easy.raw
        var result = CURLE_OK
        func check(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        func set(_ option: CURLoption, _ value: Int) { check(sesame_easy_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) {
            check(sesame_easy_setopt_pointer(handle, option, pointer))
        }

        easy.errorBuffer[0] = 0
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        check(sesame_easy_setopt_string(handle, CURLOPT_URL, transfer.url))
        set(CURLOPT_WRITEDATA, pointer: context)
        set(CURLOPT_HEADERDATA, pointer: context)
        set(CURLOPT_TIMEOUT_MS, transfer.timeoutMilliseconds)
        check(sesame_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, transfer.headerList))

        // The method and body: back to a plain GET first (POSTFIELDS before HTTPGET, as setting
        // it selects POST), then whatever this request needs.
        set(CURLOPT_POSTFIELDS, pointer: nil)
        check(sesame_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, -1))
        set(CURLOPT_HTTPGET, 1)
        set(CURLOPT_CUSTOMREQUEST, pointer: nil)
        if transfer.method == .head {
            set(CURLOPT_NOBODY, 1)
        } else if let body = transfer.requestBody {
            set(CURLOPT_POST, 1)
            check(sesame_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(transfer.requestBodyCount)))
            set(CURLOPT_POSTFIELDS, pointer: body.baseAddress)
        }
        if transfer.method != .get && transfer.method != .head && transfer.method != .post
            || (transfer.method == .get && transfer.requestBody != nil)
        {
            check(sesame_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, transfer.method.rawValue))
        }

        // Redirects: never from https down to http.
        set(CURLOPT_FOLLOWLOCATION, transfer.followsRedirects ? 1 : 0)
        if transfer.followsRedirects {
            check(
                sesame_easy_setopt_string(
                    handle, CURLOPT_REDIR_PROTOCOLS_STR, transfer.isHTTPS ? "https" : "http,https"))
        }
        return result
    }

    private func finish(_ handle: UnsafeMutableRawPointer?, result: CURLcode) {
        guard let handle, let transfer = running.removeValue(forKey: handle), let easy = transfer.easy else { return }
        if inlineHandle == handle { handOverInline() }
        sesame_curl_multi_remove_handle(multi, handle)
        transfer.easy = nil
        if result == CURLE_OK {
            var status = 0
            _ = sesame_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            transfer.status = status
            recycle(easy)
            complete(transfer, with: .success(()))
        } else {
            let error = CurlErrors.error(for: result, message: easy.errorMessage, transfer: transfer)
            recycle(easy)
            complete(transfer, with: .failure(error))
        }
    }

    /// Records the outcome, and queues the caller's resumption if it is already waiting.
    private func complete(_ transfer: CurlTransfer, with result: Result<Void, any Error>) {
        guard !transfer.isFinished else { return }
        outstanding.subtract(1, ordering: .sequentiallyConsistent)
        if transfer.isLone { lastLoneLatency = Self.now() - transfer.startedAt }
        if let continuation = transfer.finish(with: result) { resumptions.append((continuation, result)) }
    }

    private func recycle(_ easy: CurlEasyHandle) {
        if idleHandles.count < Self.idleHandleLimit { idleHandles.append(easy) }
    }

    /// Fails whatever is left (nothing, in practice: a caller keeps the transport alive while it
    /// waits) and frees the handles: easy handles first, then the multi, then the share handle.
    private func tearDown() {
        let resumptions = lock.withLock { _ in
            for (handle, transfer) in running {
                sesame_curl_multi_remove_handle(multi, handle)
                transfer.easy = nil
                complete(transfer, with: .failure(Self.shutDownError))
            }
            running.removeAll()
            let leftovers = delegated.withLock { delegated in
                defer { delegated.removeAll() }
                return delegated
            }
            for transfer in leftovers { complete(transfer, with: .failure(Self.shutDownError)) }
            inlineHandle = nil
            idleHandles.removeAll()
            sesame_curl_multi_cleanup(multi)
            sesame_curl_share_cleanup(share)
            return takeResumptions()
        }
        resume(resumptions)
        close(timerFD)
        close(wakeFD)
        close(inlineWakeFD)
        close(epollFD)
    }
}

// MARK: libcurl's multi callbacks (run inside libcurl calls, so with the engine's lock held)

extension CurlEngine {
    fileprivate static let socketCallback: sesame_curl_socket_callback = { easy, socket, what, userp, _ in
        let engine = Unmanaged<CurlEngine>.fromOpaque(userp!).takeUnretainedValue()
        engine.socketChanged(easy: easy, socket: socket, what: what)
        return 0
    }

    fileprivate static let timerCallback: sesame_curl_timer_callback = { _, milliseconds, userp in
        let engine = Unmanaged<CurlEngine>.fromOpaque(userp!).takeUnretainedValue()
        engine.timerChanged(milliseconds: milliseconds)
        return 0
    }
}

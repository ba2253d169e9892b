internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame
import Synchronization

extension CurlEngine {
    // MARK: Engine thread

    /// The engine thread: waits for libcurl's sockets, its timer and wake-ups, and runs libcurl
    /// on what is ready, until ``shutDown()``; or until `epoll_wait` fails, when every transfer,
    /// in flight or started later, fails with ``TransportError`` rather than the process ending.
    func run() {
        Thread.current.name = "sesame-curl"
        engineThreadID.store(UInt(pthread_self()), ordering: .relaxed)
        let capacity = 64
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        var failure: TransportError?
        while true {
            // Asleep from here: callers start their own transfers. Work left while the thread
            // was busy is seen here (the fences pair with the ones in `start`).
            engineBusy.store(false, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            let pending =
                delegatedCount.load(ordering: .sequentiallyConsistent) > 0
                || jobCount.load(ordering: .sequentiallyConsistent) > 0
            let waitMilliseconds: Int32 = pending ? 0 : -1
            let count = epoll_wait(epollFD, events, Int32(capacity), waitMilliseconds)
            engineBusy.store(true, ordering: .sequentiallyConsistent)
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                failure = Self.eventLoopError(code)
                break
            }
            let (stop, resumptions) = lock.withLock { _ in
                if stopping { return (true, [Resumption]()) }
                handle(UnsafeBufferPointer(start: events, count: Int(count)))
                startDelegatedLocked()
                runDueTimeouts()
                collectFinished()
                return (false, takeResumptions())
            }
            resume(resumptions)
            if stop { break }
            runJobs()
        }
        tearDown(failure: failure)
    }

    /// Runs libcurl on the sockets `epoll_wait` found ready, and empties the wake-up eventfd and
    /// the timer.
    private func handle(_ events: UnsafeBufferPointer<epoll_event>) {
        for event in events {
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
    }

    /// What every transfer of an engine whose `epoll_wait` failed with `code` ends with.
    static func eventLoopError(_ code: Int32) -> TransportError {
        TransportError(
            kind: .other,
            message: "CurlTransport's event loop stopped: epoll_wait failed (\(String(cString: strerror(code)))); "
                + "this transport makes no more requests. Make a new CurlTransport.")
    }

    // MARK: Lock held

    func socketAction(_ socket: Int32, _ mask: Int32) {
        guard !released else { return }
        var stillRunning: Int32 = 0
        _ = sesame_curl_multi_socket_action(multi, socket, mask, &stillRunning)
    }

    /// Runs libcurl's timeouts for as long as it asks for one right away.
    func runDueTimeouts() {
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

    func collectFinished() {
        guard !released else { return }
        var queued: Int32 = 0
        while let message = sesame_curl_multi_info_read(multi, &queued) {
            guard sesame_multi_message_is_done(message) != 0 else { continue }
            finish(sesame_multi_message_handle(message), result: sesame_multi_message_result(message))
        }
    }

    func takeResumptions() -> [Resumption] {
        guard !resumptions.isEmpty else { return [] }
        defer { resumptions.removeAll() }
        return resumptions
    }

    /// Adds `transfer` and decides whether its caller drives it inline; the caller then runs
    /// libcurl's due timeouts, which writes the request.
    func startLocked(_ transfer: CurlTransfer, mayDriveInline: Bool) -> Bool {
        if stopping {
            complete(transfer, with: .failure(stopReason ?? Self.shutDownError))
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

    func startDelegatedLocked() {
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
    func add(_ transfer: CurlTransfer) -> Bool {
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

    func finish(_ handle: UnsafeMutableRawPointer?, result: CURLcode) {
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
    func complete(_ transfer: CurlTransfer, with result: Result<Void, any Error>) {
        guard !transfer.isFinished else { return }
        outstanding.subtract(1, ordering: .sequentiallyConsistent)
        if transfer.isLone { lastLoneLatency = Self.now() - transfer.startedAt }
        if let continuation = transfer.finish(with: result) { resumptions.append((continuation, result)) }
    }

    func recycle(_ easy: CurlEasyHandle) {
        if idleHandles.count < Self.idleHandleLimit { idleHandles.append(easy) }
    }

    /// Fails whatever is left and frees the handles: easy handles first, then the multi, then the
    /// share handle. After ``shutDown()`` nothing is left in practice (a caller keeps the
    /// transport alive while it waits); after a `failure` of the event loop, the transfers in
    /// flight and every one started later fail with it. The descriptors stay open until `deinit`:
    /// ``shutDown()`` may still wake a thread that has already stopped.
    func tearDown(failure: TransportError?) {
        let resumptions = lock.withLock { _ in
            stopping = true
            stopReason = failure
            for (handle, transfer) in running {
                sesame_curl_multi_remove_handle(multi, handle)
                transfer.easy = nil
                complete(transfer, with: .failure(failure ?? Self.shutDownError))
            }
            running.removeAll()
            inlineHandle = nil
            idleHandles.removeAll()
            sesame_curl_multi_cleanup(multi)
            sesame_curl_share_cleanup(share)
            released = true
            // Transfers left for this thread from now on are failed by whoever leaves them (see
            // `start`); those left before are failed here.
            stopped.store(true, ordering: .sequentiallyConsistent)
            startDelegatedLocked()
            return takeResumptions()
        }
        resume(resumptions)
        // Tasks that prefer this executor and were queued before the stop run elsewhere.
        runElsewhere(takeJobs())
    }
}

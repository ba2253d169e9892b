internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame
import Synchronization

// MARK: A lone caller's wait on its own thread

extension CurlEngine {
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
        // A wait given to the engine thread counts as handed over even when the answer has come
        // by the time this thread sees it (on a loaded machine it may have): what is counted is
        // where the wait ended, not how quickly this thread looked.
        let answeredHere = lock.withLock { _ -> Bool in
            guard finished, !transfer.wasHandedOver else { return false }
            inlineWaitAnswered()
            return true
        }
        if !answeredHere { counters.handedOver.add(1, ordering: .relaxed) }
        return finished
    }

    /// An inline wait got its answer: no more back-off, and one more for the counters.
    func inlineWaitAnswered() {
        inlinePenalty = 0
        counters.finishedInline.add(1, ordering: .relaxed)
    }

    /// Gives the lone caller's sockets to the engine thread's epoll set, and wakes the caller if
    /// it is waiting in `ppoll` (it then finds its transfer gone, and parks).
    func handOverInline() {
        // A transfer still running is handed over; one that finished or was cancelled has left
        // `running` already, and its wait simply ends.
        if let handle = inlineHandle, let transfer = running[handle] { transfer.wasHandedOver = true }
        if inlinePolling {
            var one: UInt64 = 1
            _ = write(inlineWakeFD, &one, MemoryLayout<UInt64>.size)
        }
        inlineHandle = nil
        for (socket, what) in inlineSockets { watch(socket, what: what) }
        inlineSockets.removeAll()
    }
}

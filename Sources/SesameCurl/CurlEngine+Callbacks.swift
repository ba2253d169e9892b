internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame

// MARK: libcurl's multi callbacks (run inside libcurl calls, so with the engine's lock held)

extension CurlEngine {
    static let socketCallback: sesame_curl_socket_callback = { easy, socket, what, userp, _ in
        let engine = Unmanaged<CurlEngine>.fromOpaque(userp!).takeUnretainedValue()
        engine.socketChanged(easy: easy, socket: socket, what: what)
        return 0
    }

    static let timerCallback: sesame_curl_timer_callback = { _, milliseconds, userp in
        let engine = Unmanaged<CurlEngine>.fromOpaque(userp!).takeUnretainedValue()
        engine.timerChanged(milliseconds: milliseconds)
        return 0
    }
}

extension CurlEngine {
    /// CURLMOPT_SOCKETFUNCTION: what libcurl wants to hear about `socket` now.
    func socketChanged(easy: UnsafeMutableRawPointer?, socket: Int32, what: Int32) {
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
    func timerChanged(milliseconds: Int) {
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
    func arm(at deadline: UInt64) {
        timerDeadline = deadline
        var setting = itimerspec()
        setting.it_value.tv_sec = Int(deadline / 1_000_000_000)
        setting.it_value.tv_nsec = max(1, Int(deadline % 1_000_000_000))
        _ = timerfd_settime(timerFD, Int32(TFD_TIMER_ABSTIME), &setting, nil)
    }

    func watch(_ socket: Int32, what: Int32) {
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

    func unwatch(_ socket: Int32) {
        dormant.remove(socket)
        guard watched.removeValue(forKey: socket) != nil else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, nil)
    }
}

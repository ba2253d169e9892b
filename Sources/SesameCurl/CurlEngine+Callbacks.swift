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

    static let openSocketCallback: sesame_curl_open_socket_callback = { clientp, _, address in
        let engine = Unmanaged<CurlEngine>.fromOpaque(clientp!).takeUnretainedValue()
        return engine.openSocket(address!.pointee)
    }

    static let closeSocketCallback: sesame_curl_close_socket_callback = { clientp, socket in
        let engine = Unmanaged<CurlEngine>.fromOpaque(clientp!).takeUnretainedValue()
        return engine.closeSocket(socket)
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
            // A kept connection stays in the set (see `dormant`); any other socket (a resolver's,
            // which libcurl closes itself) leaves it now.
            if connectionSockets.contains(socket) {
                if watched[socket] != nil { dormant.insert(socket) }
            } else {
                unwatch(socket)
            }
        } else if let inlineHandle, easy == inlineHandle {
            unwatch(socket)  // the lone caller polls it itself
            inlineSockets[socket] = what
        } else {
            inlineSockets[socket] = nil
            watch(socket, what: what)
        }
    }

    /// CURLOPT_OPENSOCKETFUNCTION: a socket for a connection, as libcurl would open it, but
    /// close-on-exec (a program that runs another must not hand it its connections).
    func openSocket(_ address: curl_sockaddr) -> curl_socket_t {
        let socket = Glibc.socket(address.family, address.socktype | Int32(SOCK_CLOEXEC.rawValue), address.protocol)
        guard socket >= 0 else { return sesame_curl_socket_bad() }
        connectionSockets.insert(socket)
        return socket
    }

    /// CURLOPT_CLOSESOCKETFUNCTION: libcurl is done with a connection's `socket`. It leaves the
    /// epoll set before it is closed, so that no number in the set, nor in `watched`, ever
    /// names a socket other than the one registered under it.
    func closeSocket(_ socket: Int32) -> Int32 {
        connectionSockets.remove(socket)
        inlineSockets[socket] = nil
        dormant.remove(socket)
        if watched.removeValue(forKey: socket) != nil { _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, nil) }
        counters.socketsClosed.add(1, ordering: .relaxed)
        return close(socket)
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
        // A kept connection used again: still registered (sockets leave the set as they are
        // closed, in `closeSocket`), so only a change of events costs a system call.
        dormant.remove(socket)
        if watched[socket] == events { return }
        var event = epoll_event()
        event.events = events
        event.data.fd = socket
        let known = watched[socket] != nil
        if epoll_ctl(epollFD, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket, &event) != 0 {
            // Defensive: should the set and `watched` ever disagree, the other operation fixes it.
            _ = epoll_ctl(epollFD, known ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event)
        }
        counters.epollChanges.add(1, ordering: .relaxed)
        watched[socket] = events
    }

    func unwatch(_ socket: Int32) {
        dormant.remove(socket)
        guard watched.removeValue(forKey: socket) != nil else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, nil)
    }
}

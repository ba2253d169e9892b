import Foundation
import Sesame
import SesameTestSupport

/// A bare TCP listener on 127.0.0.1 for the cases a well-behaved HTTP server never produces:
/// accepting and never answering, resetting the connection, or sending hand-written bytes.
///
/// It serves on its own thread (blocking socket calls stay off the cooperative pool) and
/// closes every socket in ``stop()``.
final class RawListener: Sendable {
    /// What the listener does with each connection.
    enum Behaviour: Sendable {
        /// Reads the request and never answers, keeping the connection open until stop.
        case silent
        /// Reads the request, then resets the connection (RST, by SO_LINGER 0).
        case resetAfterRequest
        /// Reads the request, then closes the connection without a byte of answer.
        case closeAfterRequest
        /// Reads the request, writes these bytes, then closes the connection.
        case respond(Data)
        /// Keep-alive HTTP/1.1: every `GET` is answered with its request target as a
        /// `text/plain` body, on the same connection; `/delay/<ms>…` answers that many
        /// milliseconds late; `/hold…` answers once the test calls ``releaseHeld()``
        /// (one answer per call); `/stall…` never answers; `/close…` answers with
        /// `Connection: close` and closes the connection. Answers come from this listener's own
        /// threads, never from Swift's cooperative pool, so a test holding a pool thread cannot
        /// slow them.
        case keepAliveEcho
    }

    let port: Int
    private let listenSocket: Int32
    private let behaviour: Behaviour
    private let state = Locked(State())
    /// The target of every request head read, in order ("" for behaviours that do not parse it).
    private let seen = Observed<[String]>([])
    /// Signalled once per `/hold` answer the test lets go.
    private let holdGate = DispatchSemaphore(value: 0)

    private struct State {
        var stopped = false
        var connections: [Int32] = []
        var accepted = 0
    }

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        let (socket, port) = try Sockets.bindLoopback()
        listenSocket = socket
        self.port = port
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// `http://127.0.0.1:<port>`.
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// `http://127.0.0.1:<port><pathAndQuery>`.
    func url(_ pathAndQuery: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")! }

    /// How many connections the listener has accepted.
    var connectionsAccepted: Int { state.withLock { $0.accepted } }

    /// How many complete request heads the listener has read.
    var requestsSeen: Int { seen.value.count }

    /// How many request heads the listener has read, once it has read `count` of them or a
    /// minute has passed. The client may be done (a timeout) before this listener's thread has
    /// read what was sent; this waits for the listener, however loaded the machine is.
    func requestsSeen(atLeast count: Int) async throws -> Int {
        _ = await seen.wait(limit: .seconds(60)) { $0.count >= count }
        return requestsSeen
    }

    /// Whether a request for `target` (path and query) has been read, once it has or a minute
    /// has passed (`.keepAliveEcho` only).
    func requestSeen(_ target: String) async -> Bool {
        await seen.wait(limit: .seconds(60)) { $0.contains(target) }
    }

    /// Lets one held `/hold` request be answered (or the next one, when none is held yet).
    func releaseHeld() { holdGate.signal() }

    /// Stops accepting and ends every connection.
    ///
    /// Connections are shut down, which wakes the thread serving each, and that thread closes
    /// its own descriptor: closing it here would let the number be given to another socket of
    /// this process while the serving thread still reads from it.
    func stop() {
        let connections = state.withLock { state in
            state.stopped = true
            return state.connections
        }
        shutdown(listenSocket, Int32(SHUT_RDWR))
        for _ in 0..<64 { holdGate.signal() }  // frees threads serving held requests
        for connection in connections {
            shutdown(connection, Int32(SHUT_RDWR))  // wakes a serving thread blocked in recv
        }
    }

    deinit {
        stop()
        close(listenSocket)
    }

    /// Starts a server that a child process runs on a port of `Sockets.unusedPort()`'s, and returns
    /// once it accepts connections, however long the start takes on a loaded machine. A server
    /// that exits first (another process took the port) is started again on another port, up
    /// to five times; one that neither accepts nor exits within a minute is killed, and the
    /// start fails. It waits without holding a thread of the cooperative pool (which has one
    /// per CPU, and which the servers of other tests running meanwhile need).
    ///
    /// - Parameter start: starts the server on the port it is given, and returns it running.
    static func startServer(
        _ start: (Int) async throws -> ChildProcess
    ) async throws -> (port: Int, process: ChildProcess) {
        var lastStatus: Int32?
        for _ in 0..<5 {
            let port = try Sockets.unusedPort()
            let process = try await start(port)
            let deadline = ContinuousClock.now + .seconds(60)
            while process.isRunning && ContinuousClock.now < deadline {
                if accepts(port: port) { return (port, process) }
                // Polling another process's server, which says nothing when it is ready; not timing it.
                try await Task.sleep(for: .milliseconds(10))
            }
            if process.isRunning {
                process.terminate(signal: SIGKILL)
                _ = await process.exitStatus()
                throw ServerDidNotStart(
                    description: "\(process.executableURL.lastPathComponent) did not accept connections on port "
                        + "\(port) within a minute")
            }
            lastStatus = await process.exitStatus()
        }
        throw ServerDidNotStart(
            description: "the server exited at each of five starts (last exit status \(lastStatus ?? -1)); "
                + "run it by hand to see why")
    }

    struct ServerDidNotStart: Error, CustomStringConvertible { var description: String }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listenSocket, nil, nil)
            guard connection >= 0 else { return }  // shut down by stop()
            let accepted = state.withLock { state in
                guard !state.stopped else { return false }
                state.connections.append(connection)
                state.accepted += 1
                return true
            }
            guard accepted else {
                close(connection)
                return
            }
            let behaviour = self.behaviour
            Thread { [self] in serve(connection, behaviour) }.start()
        }
    }

    private func serve(_ connection: Int32, _ behaviour: Behaviour) {
        if case .keepAliveEcho = behaviour {
            echoKeepAlive(connection)
            closeOnce(connection)
            return
        }
        guard readRequestHead(connection) else {
            closeOnce(connection)
            return
        }
        seen.change { $0.append("") }
        switch behaviour {
        case .silent:
            // Never answers: waits until the client goes away or stop() shuts the connection down.
            var buffer = [UInt8](repeating: 0, count: 1024)
            while recv(connection, &buffer, buffer.count, 0) > 0 {}
            closeOnce(connection)
        case .resetAfterRequest:
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            closeOnce(connection)
        case .closeAfterRequest:
            closeOnce(connection)
        case .keepAliveEcho:
            return  // handled above
        case .respond(let bytes):
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = send(
                        connection, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                    if written <= 0 { break }
                    offset += written
                }
            }
            closeOnce(connection)
        }
    }

    /// Serves `.keepAliveEcho` on `connection` until the peer or stop() ends it.
    private func echoKeepAlive(_ connection: Int32) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            while received.headEnd == nil {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                received += buffer[0..<count]
            }
            let end = received.headEnd!
            let head = String(decoding: received[0..<end], as: UTF8.self)
            received.removeFirst(end + 4)
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            seen.change { $0.append(target) }
            if target.hasPrefix("/stall") {
                while recv(connection, &buffer, buffer.count, 0) > 0 {}
                return
            }
            if target.hasPrefix("/hold") {
                holdGate.wait()
                if state.withLock({ $0.stopped }) { return }
            }
            if target.hasPrefix("/delay/"),
                let milliseconds = Int(target.dropFirst("/delay/".count).prefix { $0.isNumber })
            {
                usleep(useconds_t(milliseconds * 1000))
            }
            let closes = target.hasPrefix("/close")
            let response = Array(
                ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(target.utf8.count)\r\n"
                    + (closes ? "Connection: close\r\n" : "") + "\r\n\(target)").utf8)
            var offset = 0
            while offset < response.count {
                let written = response[offset...].withUnsafeBytes {
                    send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard written > 0 else { return }
                offset += written
            }
            if closes { return }
        }
    }

    /// Closes `connection` (its serving thread is the only one that does) and forgets it.
    private func closeOnce(_ connection: Int32) {
        let owned = state.withLock { state in
            guard let index = state.connections.firstIndex(of: connection) else { return false }
            state.connections.remove(at: index)
            return true
        }
        if owned { close(connection) }
    }

    /// Reads until the blank line that ends a request head; false if the peer went away first.
    private func readRequestHead(_ connection: Int32) -> Bool {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while received.headEnd == nil {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            received += buffer[0..<count]
        }
        return true
    }
}

/// A port on 127.0.0.1 that refuses connections for as long as it is held: its socket is bound
/// and never listens, so the kernel answers every connection with a reset and no other process
/// can take the port (a port bound and closed again may be anyone's a moment later).
final class RefusingPort: Sendable {
    let port: Int
    private let socket: Locked<Int32?>

    init() throws {
        let (socket, port) = try Sockets.bindLoopback(listening: nil)
        self.socket = Locked(socket)
        self.port = port
    }

    /// Lets the port go; call it when the test is done with it.
    func release() {
        if let descriptor = socket.withLock({ $0.take() }) { close(descriptor) }
    }

    deinit { release() }
}

extension [UInt8] {
    /// Where the blank line that ends a request head starts, if it has arrived.
    fileprivate var headEnd: Int? {
        guard count >= 4 else { return nil }
        for start in 0...(count - 4)
        where self[start] == 13 && self[start + 1] == 10 && self[start + 2] == 13 && self[start + 3] == 10 {
            return start
        }
        return nil
    }
}

internal import CMicroHTTPD
import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A libmicrohttpd object pointer that may be kept in locked state.
struct MHDHandle: @unchecked Sendable {  // Used only under ServerCore.state's lock or on libmicrohttpd's thread.
    let pointer: OpaquePointer
}

/// One request's state, shared between libmicrohttpd's callbacks (on its polling thread) and
/// the task that runs the handler.
final class RequestContext: Sendable {
    enum Phase {
        /// The request line and headers arrived; the handler has not been called yet.
        case new
        /// The body is arriving.
        case receiving
        /// The handler runs in a task; the connection is suspended.
        case running
        /// A response was queued.
        case answered
    }

    struct State {
        var phase: Phase = .new
        var target: String
        var method = HTTPMethod.get
        var version = ""
        var headers = HTTPHeaders()
        var body = Data()
        var bodyTooLarge = false
        var dispatched = false
        var response: HTTPServerResponse?
        var task: Task<Void, Never>?
        var connection: MHDHandle?
    }

    let state: Locked<State>
    private let liveCount: LiveCount

    init(target: String, liveCount: LiveCount) {
        state = Locked(State(target: target))
        self.liveCount = liveCount
        liveCount.value.add(1, ordering: .relaxed)
    }

    deinit { liveCount.value.subtract(1, ordering: .relaxed) }
}

/// How many request contexts of one server are alive: zero once it is stopped, or one leaked.
final class LiveCount: Sendable {
    let value = Atomic<Int>(0)
}

/// The libmicrohttpd daemons of one running ``HTTPServer`` and the bookkeeping that lets it
/// run handlers off libmicrohttpd's thread and stop cleanly.
///
/// How a request goes: libmicrohttpd calls the URI-log callback (a ``RequestContext`` is made
/// and retained), then the access handler several times (headers, body chunks, end of body).
/// At the end of the body the handler is called on libmicrohttpd's thread. An answer it gives
/// now is queued at once. Work it gives for later runs in a `Task` while the connection is
/// suspended; when it returns, the connection is resumed, libmicrohttpd calls the access handler
/// once more and the response is queued. The request-completed callback releases the context.
final class ServerCore: Sendable {
    struct State {
        var daemons: [MHDHandle] = []
        /// With several threads, the acceptor of each socket (see ``Acceptor``); none with one.
        var acceptors: [Acceptor] = []
        /// Requests whose handler is running, by context.
        var running: [ObjectIdentifier: RequestContext] = [:]
        /// Requests handed to a handler and not yet completed (answer sent or connection gone).
        var inFlight = 0
        /// The daemons are being or have been stopped: nothing may be resumed any more.
        var stopped = false
        var drainWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    let handler: @Sendable (HTTPServerRequest) -> HTTPServerAnswer
    let liveContexts = LiveCount()
    let maxBodyBytes: Int
    let port: Int
    let state: Locked<State>
    /// No new request is handed to a handler; answers close their connections. An atomic, so that
    /// each request reads it without the lock every daemon thread shares; a stop sets it while
    /// holding ``state``'s lock, so a check made under that lock (``dispatch``) sees it in order.
    let isStopping = Atomic<Bool>(false)
    /// Head deadlines, the 503 past the connection limit, the one answer to an unreadable length.
    let connectionGuard: ConnectionGuard

    /// Connections libmicrohttpd accepts past ``HTTPServer/Configuration/maxConnections``, so that
    /// they can be answered 503 rather than left in the listen queue.
    static let refusalHeadroom = 64

    private init(
        port: Int, maxBodyBytes: Int, connectionGuard: ConnectionGuard,
        handler: @escaping @Sendable (HTTPServerRequest) -> HTTPServerAnswer
    ) {
        self.port = port
        self.maxBodyBytes = maxBodyBytes
        self.connectionGuard = connectionGuard
        self.handler = handler
        self.state = Locked(State())
    }

    // MARK: Starting and stopping

    /// Binds the sockets and starts a daemon on each.
    static func start(
        _ configuration: HTTPServer.Configuration,
        handler: @escaping @Sendable (HTTPServerRequest) -> HTTPServerAnswer
    ) throws -> ServerCore {
        guard let address = ListenSocket.Address(configuration.host) else {
            throw HTTPServerError.invalidHost(configuration.host)
        }
        guard (0...65535).contains(configuration.port) else { throw HTTPServerError.invalidPort(configuration.port) }
        let display = { (host: String, port: Int) in host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
        let backlog = Int32(max(16, min(configuration.maxConnections, Int(SOMAXCONN))))
        let wantsIPv6 = configuration.alsoListenOnIPv6Loopback && !address.isIPv6

        var sockets: [ListenSocket] = []
        // With port 0 the IPv6 socket must get the port the IPv4 one was given; if another
        // program holds it on ::1, try again with a new port.
        for attempt in 1...8 {
            let first = try ListenSocket.open(
                address, port: configuration.port, backlog: backlog,
                display: display(configuration.host, configuration.port))
            guard wantsIPv6 else {
                sockets = [first]
                break
            }
            do {
                let second = try ListenSocket.open(
                    .ipv6Loopback, port: first.port, backlog: backlog, display: display("::1", first.port))
                sockets = [first, second]
                break
            } catch is HTTPServerError where configuration.port == 0 && attempt < 8 {
                close(first.descriptor)
            } catch {
                close(first.descriptor)
                throw error
            }
        }

        let connectionGuard = ConnectionGuard(
            maxConnections: configuration.maxConnections, headTimeout: configuration.requestHeadTimeout,
            idleTimeout: configuration.connectionIdleTimeout, maxBodyBytes: configuration.maxBodyBytes)
        let core = ServerCore(
            port: sockets[0].port, maxBodyBytes: configuration.maxBodyBytes, connectionGuard: connectionGuard,
            handler: handler)
        let opaque = Unmanaged.passRetained(core).toOpaque()
        let timeout = configuration.connectionIdleTimeout
        let timeoutSeconds =
            timeout <= .zero
            ? 0
            : UInt32(
                clamping: Int(
                    (Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18).rounded(.up)))
        if let failure = sesame_mhd_failure() {
            for socket in sockets { close(socket.descriptor) }
            Unmanaged<ServerCore>.fromOpaque(opaque).release()
            throw HTTPServerError.libraryUnavailable(
                display(configuration.host, sockets[0].port), reason: String(cString: failure))
        }
        // With several threads, each socket gets one single-threaded daemon per thread, accepting
        // nothing itself: an acceptor hands them its connections in turn (see ``Acceptor``).
        let threads = min(64, max(1, configuration.threads))
        // Each daemon counts its own connections from a client: with several, each takes its
        // share of the limit, rounded up (the connections of one client are handed round, so a
        // client reaches the limit rounded up to a multiple of the threads).
        let perClient = max(0, configuration.maxConnectionsPerClient)
        let perClientPerDaemon = perClient == 0 ? 0 : max(1, (perClient + threads - 1) / threads)
        func startDaemon(listening descriptor: Int32, isIPv6: Bool, perClient: Int) -> OpaquePointer? {
            sesame_mhd_start_daemon(
                sesame_mhd_flags(isIPv6 ? 1 : 0),
                descriptor,
                accessHandlerCallback,
                requestCompletedCallback,
                uriLogCallback,
                opaque,
                UInt32(
                    clamping: max(1, configuration.maxConnections).addingReportingOverflow(Self.refusalHeadroom)
                        .partialValue),
                max(4096, min(configuration.maxHeaderBytes, HTTPServer.Configuration.largestHeaderLimit) * 2),
                timeoutSeconds,
                UInt32(clamping: perClient),
                notifyConnectionCallback,
                logCallback)
        }
        var daemons: [OpaquePointer] = []
        var acceptors: [Acceptor] = []
        for (index, socket) in sockets.enumerated() {
            let address = display(socket.isIPv6 ? "::1" : configuration.host, socket.port)
            do {
                if threads == 1 {
                    // The daemon owns the socket once it has started.
                    guard
                        let daemon = startDaemon(
                            listening: socket.descriptor, isIPv6: socket.isIPv6, perClient: perClient)
                    else {
                        close(socket.descriptor)
                        throw HTTPServerError.daemonFailed(address)
                    }
                    daemons.append(daemon)
                    continue
                }
                var shared: [OpaquePointer] = []
                for _ in 0..<threads {
                    guard let daemon = startDaemon(listening: -1, isIPv6: socket.isIPv6, perClient: perClientPerDaemon)
                    else {
                        for started in shared { sesame_mhd_stop_daemon(started) }
                        close(socket.descriptor)
                        throw HTTPServerError.daemonFailed(address)
                    }
                    shared.append(daemon)
                }
                daemons += shared
                // The acceptor owns the socket, and closes it if it cannot be made.
                acceptors.append(try Acceptor(daemons: shared, listenDescriptor: socket.descriptor, display: address))
            } catch {
                for acceptor in acceptors { acceptor.stop() }
                for started in daemons { sesame_mhd_stop_daemon(started) }
                // The sockets after this one are still this function's.
                for unowned in sockets[(index + 1)...] { close(unowned.descriptor) }
                Unmanaged<ServerCore>.fromOpaque(opaque).release()
                throw error
            }
        }
        for acceptor in acceptors { acceptor.start() }
        core.state.withLock { state in
            state.daemons = daemons.map(MHDHandle.init)
            state.acceptors = acceptors
        }
        connectionGuard.start()
        return core
    }

    /// Stops accepting connections, waits up to `gracePeriod` for the requests being handled
    /// to be answered, then closes everything.
    func stop(gracePeriod: Duration) async {
        let (daemons, acceptors) = state.withLock { state in
            isStopping.store(true, ordering: .releasing)
            return (state.daemons, state.acceptors)
        }
        for acceptor in acceptors { acceptor.requestStop() }
        for daemon in daemons {
            let listening = sesame_mhd_quiesce_daemon(daemon.pointer)
            if listening >= 0 { close(listening) }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilDrained() }
            group.addTask { try? await Task.sleep(for: gracePeriod) }
            await group.next()
            group.cancelAll()
        }
        let stopping = abandonRunningRequests()
        connectionGuard.stop()
        // MHD_stop_daemon joins libmicrohttpd's thread: keep it off the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                stopping.stop()
                continuation.resume()
            }
            thread.name = "sesame-httpserver-stop"
            thread.start()
        }
    }

    /// Stops at once, from a synchronous context (the server's `deinit`).
    func stopNow() {
        state.withLock { _ in isStopping.store(true, ordering: .releasing) }
        connectionGuard.stop()
        abandonRunningRequests().stop()
    }

    /// Daemons to stop, with the core's retain to give back afterwards.
    struct Stopping: Sendable {
        var acceptors: [Acceptor] = []
        let daemons: [MHDHandle]
        var connections: ConnectionGuard?
        let core: Unmanaged<ServerCore>?

        /// How long a stop waits for libmicrohttpd to let go of the connections it shut down.
        static let connectionsClosingTime: Duration = .seconds(2)

        func stop() {
            // Nothing may be handed to a daemon once it is stopped.
            for acceptor in acceptors { acceptor.stop() }
            // No connection may be left for the daemon's thread to work on when it is stopped:
            // libmicrohttpd 0.9.75 answers a request it refuses itself (an unreadable
            // Content-Length) by queuing an error answer and building its head, and once
            // MHD_stop_daemon has begun the queuing "succeeds" without an answer, whose head it
            // then builds from nothing (a SIGSEGV on the daemon's thread). The sockets are shut
            // down, so that libmicrohttpd closes each connection as it would a client's hang-up,
            // and the stop waits for it to have done so.
            if !daemons.isEmpty, let connections {
                connections.shutDownAll()
                let deadline = ContinuousClock.now + Self.connectionsClosingTime
                while daemons.contains(where: { sesame_mhd_connection_count($0.pointer) > 0 }),
                    ContinuousClock.now < deadline
                {
                    usleep(1000)
                }
            }
            for daemon in daemons { sesame_mhd_stop_daemon(daemon.pointer) }
            core?.release()
        }
    }

    /// Marks the core stopped, cancels handlers still running and resumes their connections
    /// to be dropped (libmicrohttpd must not be stopped with suspended connections).
    private func abandonRunningRequests() -> Stopping {
        state.withLock { state in
            guard !state.stopped else { return Stopping(daemons: [], core: nil) }
            state.stopped = true
            for context in state.running.values {
                let (connection, task) = context.state.withLock { request in
                    request.response = .dropConnection
                    return (request.connection, request.task)
                }
                task?.cancel()
                if let connection { sesame_mhd_resume_connection(connection.pointer) }
            }
            state.running.removeAll()
            let stopping = Stopping(
                acceptors: state.acceptors, daemons: state.daemons, connections: connectionGuard,
                core: Unmanaged.passUnretained(self))
            state.daemons = []
            state.acceptors = []
            return stopping
        }
    }

    private func waitUntilDrained() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.inFlight == 0 || Task.isCancelled { return true }
                    state.drainWaiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.drainWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// How many connections are open now, on every daemon.
    var connectionCount: Int {
        state.withLock { state in
            state.stopped ? 0 : state.daemons.reduce(0) { $0 + Int(sesame_mhd_connection_count($1.pointer)) }
        }
    }

    // MARK: Callbacks from libmicrohttpd (on its thread)

    func access(
        connection: OpaquePointer, context: RequestContext, method: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        let phase = context.state.withLock { $0.phase }
        switch phase {
        case .new:
            connectionGuard.headReceived(trackedConnection(connection))
            var fields: [HTTPHeaders.Field] = []
            withUnsafeMutablePointer(to: &fields) { pointer in
                _ = sesame_mhd_get_connection_values_n(connection, .HEADER_KIND, headerIterator, pointer)
            }
            let headers = HTTPHeaders(fields)
            context.state.withLock { request in
                request.connection = MHDHandle(pointer: connection)
                request.method = HTTPMethod(rawValue: method.map { String(cString: $0) } ?? "GET")
                request.version = version.map { String(cString: $0) } ?? ""
                request.headers = headers
                request.phase = .receiving
            }
            if let problem = RequestFraming.problem(
                method: method.map { String(cString: $0) } ?? "", version: version.map { String(cString: $0) } ?? "",
                headers: headers)
            {
                return answer(connection, context, .text("Bad request: \(problem).", status: 400), close: true)
            }
            if let declared = headers["Content-Length"].flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
                declared > maxBodyBytes
            {
                // A client that waits for "100 Continue" gets the 413 at once and sends nothing. One
                // that is already sending would see its connection reset mid-upload (a broken pipe,
                // not the 413), so a body of reasonable size is read and dropped first.
                let waitsForContinue = headers["Expect"]?.lowercased().contains("100-continue") == true
                if waitsForContinue || declared > Self.discardLimit(maxBodyBytes) {
                    return answer(connection, context, tooLarge(), close: true)
                }
                context.state.withLock { $0.bodyTooLarge = true }
            }
            return .YES

        case .receiving:
            let size = uploadDataSize.pointee
            if size > 0 {
                context.state.withLock { request in
                    if request.bodyTooLarge || request.body.count + size > maxBodyBytes {
                        // Keep reading and discarding, so that the client gets its 413.
                        request.bodyTooLarge = true
                        request.body = Data()
                    } else if let uploadData {
                        request.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: size))
                    }
                }
                uploadDataSize.pointee = 0
                return .YES
            }
            if context.state.withLock({ $0.bodyTooLarge }) {
                return answer(connection, context, tooLarge(), close: true)
            }
            return dispatch(connection, context)

        case .running:
            guard let response = context.state.withLock({ $0.response }) else { return .YES }
            if response.dropsConnection {
                context.state.withLock { $0.phase = .answered }
                return .NO
            }
            return answer(connection, context, response, close: isStopping.load(ordering: .acquiring))

        case .answered:
            uploadDataSize.pointee = 0
            return .YES
        }
    }

    private func dispatch(_ connection: OpaquePointer, _ context: RequestContext) -> MHD_Result {
        // The parts are taken under the context's lock, and the target split and decoded after it.
        let (method, target, headers, body, version) = context.state.withLock { request in
            request.phase = .running
            return (request.method, request.target, request.headers, request.body, request.version)
        }
        let request = HTTPServerRequest(
            method: method, target: target, headers: headers, body: body, httpVersion: version)
        guard !isStopping.load(ordering: .acquiring) else { return shuttingDown(connection, context) }
        let work: @Sendable () async -> HTTPServerResponse
        switch handler(request) {
        case .now(let response):
            // Answered on this thread: no task, no suspension.
            if response.dropsConnection {
                context.state.withLock { $0.phase = .answered }
                return .NO
            }
            // A stop that began while the handler ran closes the connection after this answer.
            return answer(connection, context, response, close: isStopping.load(ordering: .acquiring))
        case .later(let later):
            work = later
        }
        let accepted = state.withLock { state in
            guard !isStopping.load(ordering: .acquiring) else { return false }
            state.running[ObjectIdentifier(context)] = context
            state.inFlight += 1
            return true
        }
        guard accepted else { return shuttingDown(connection, context) }
        context.state.withLock { $0.dispatched = true }
        sesame_mhd_suspend_connection(connection)
        let task = Task { [self] in
            let response = await work()
            finish(context, with: response)
        }
        context.state.withLock { $0.task = task }
        return .YES
    }

    private func shuttingDown(_ connection: OpaquePointer, _ context: RequestContext) -> MHD_Result {
        answer(connection, context, .text("The server is shutting down; try again later.", status: 503), close: true)
    }

    /// Hands the handler's answer to the connection and wakes it up.
    private func finish(_ context: RequestContext, with response: HTTPServerResponse) {
        state.withLock { state in
            // Not running any more: the server was stopped or the connection went away.
            guard state.running.removeValue(forKey: ObjectIdentifier(context)) != nil, !state.stopped else { return }
            let connection = context.state.withLock { request in
                request.response = response
                request.task = nil
                return request.connection
            }
            if let connection { sesame_mhd_resume_connection(connection.pointer) }
        }
    }

    func completed(_ context: RequestContext) {
        let dispatched = context.state.withLock { request in
            request.task = nil
            return request.dispatched
        }
        // A request answered on the server's thread was never in `running` nor counted in flight
        // (dispatch marks a request dispatched on this thread, right after adding it), so the
        // lock every daemon thread shares is not taken for it.
        guard dispatched else { return }
        state.withLock { state in
            state.running.removeValue(forKey: ObjectIdentifier(context))
            state.inFlight -= 1
            if state.inFlight == 0 {
                for waiter in state.drainWaiters.values { waiter.resume() }
                state.drainWaiters.removeAll()
            }
        }
    }

    /// The largest over-limit body read and dropped so that its sender gets the 413.
    static func discardLimit(_ maxBodyBytes: Int) -> Int {
        max(maxBodyBytes.multipliedReportingOverflow(by: 4).partialValue, 16 << 20)
    }

    private func tooLarge() -> HTTPServerResponse {
        .text("The request body is larger than this server accepts (\(maxBodyBytes) bytes).", status: 413)
    }

    private func answer(
        _ connection: OpaquePointer, _ context: RequestContext, _ response: HTTPServerResponse, close: Bool
    ) -> MHD_Result {
        context.state.withLock { $0.phase = .answered }
        let status = (100...999).contains(response.status) ? response.status : 500
        let made = response.body.withUnsafeBytes { buffer in
            sesame_mhd_create_response_from_buffer(
                buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return .NO }
        defer { sesame_mhd_destroy_response(made) }
        var closes = close
        for field in response.headers {
            if HTTPHeaders.sameName(field.name, "Connection") {
                if field.value.lowercased().contains("close") { closes = true }
                continue
            }
            // libmicrohttpd writes these itself.
            if HTTPHeaders.sameName(field.name, "Content-Length")
                || HTTPHeaders.sameName(field.name, "Transfer-Encoding")
            {
                continue
            }
            // libmicrohttpd refuses names and values with line breaks, which keeps a handler
            // from splitting the response; such a field is left out.
            _ = sesame_mhd_add_response_header(made, field.name, field.value)
        }
        if closes { _ = sesame_mhd_add_response_header(made, "Connection", "close") }
        return sesame_mhd_queue_response(connection, UInt32(status), made)
    }
}

// MARK: - C callbacks

private func core(_ cls: UnsafeMutableRawPointer?) -> ServerCore? {
    cls.map { Unmanaged<ServerCore>.fromOpaque($0).takeUnretainedValue() }
}

private let uriLogCallback: sesame_mhd_uri_log_callback = { cls, uri, connection in
    guard let core = core(cls) else { return nil }
    if let connection { core.connectionGuard.requestLineArrived(trackedConnection(connection)) }
    let context = RequestContext(target: uri.map { String(cString: $0) } ?? "/", liveCount: core.liveContexts)
    return Unmanaged.passRetained(context).toOpaque()
}

private let accessHandlerCallback: MHD_AccessHandlerCallback = {
    cls, connection, _, method, version, uploadData, uploadDataSize, contextPointer in
    guard let core = core(cls), let connection, let uploadDataSize,
        let raw = contextPointer?.pointee
    else { return .NO }
    let context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
    return core.access(
        connection: connection, context: context, method: method, version: version, uploadData: uploadData,
        uploadDataSize: uploadDataSize)
}

private let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, connection, contextPointer, _ in
    if let connection { core(cls)?.connectionGuard.requestFinished(trackedConnection(connection)) }
    guard let contextPointer, let raw = contextPointer.pointee else { return }
    contextPointer.pointee = nil
    let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
    core(cls)?.completed(context)
}

private let notifyConnectionCallback: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let core = core(cls), let connection else { return }
    let key = UInt(bitPattern: connection)
    if code.rawValue == 0 {  // MHD_CONNECTION_NOTIFY_STARTED
        let tracked = core.connectionGuard.opened(key, descriptor: sesame_mhd_connection_fd(connection))
        // The guard's record of the connection rides on it, retained, until it closes.
        socketContext?.pointee = tracked.map { Unmanaged.passRetained($0).toOpaque() }
    } else {
        core.connectionGuard.closed(key)
        if let socketContext, let retained = socketContext.pointee {
            socketContext.pointee = nil
            Unmanaged<ConnectionGuard.Connection>.fromOpaque(retained).release()
        }
    }
}

/// The guard's record of `connection`, kept as its socket context; nil for one refused at the limit.
private func trackedConnection(_ connection: OpaquePointer) -> ConnectionGuard.Connection? {
    sesame_mhd_socket_context(connection).map {
        Unmanaged<ConnectionGuard.Connection>.fromOpaque($0).takeUnretainedValue()
    }
}

private let logCallback: sesame_mhd_log_handler = { cls, format in
    guard let format, let core = core(cls) else { return }
    core.connectionGuard.answerUnreadableLength(logged: format)
}

private let headerIterator: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
    guard let cls, let key else { return .YES }
    let fields = cls.assumingMemoryBound(to: [HTTPHeaders.Field].self)
    let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self)
    let text = value.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self) } ?? ""
    fields.pointee.append(HTTPHeaders.Field(name: name, value: text))
    return .YES
}

import Foundation
import Sesame
import Testing

@testable import SesameCurl

/// `CurlTransport.executor`: tasks that prefer it run on the transport's own thread, get their
/// answers there, never wait inline there, can be cancelled, and still run once the transport
/// is gone. The servers answer from their own threads.
@Suite("CurlTransport's executor", .timeLimit(.minutes(2)))
struct CurlExecutorTests {
    @Test("callers that prefer the executor run on the transport's thread, each with its own answers")
    func callersRunOnTheEngineThread() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        // A lone caller anywhere else would wait inline: a long budget and no quiet period.
        let transport = CurlTransport(inlineBudget: .seconds(5), quietPeriod: .zero)
        let engine = transport.engine
        try await withTaskExecutorPreference(transport.executor) {
            #expect(engine.isEngineThread)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for caller in 0..<8 {
                    group.addTask {
                        for index in 0..<25 {
                            let target = "/delay/0?caller=\(caller)&index=\(index)"
                            let response = try await transport.send(HTTPRequest(url: server.url(target)))
                            #expect(engine.isEngineThread)
                            #expect(String(decoding: response.body, as: UTF8.self) == target)
                        }
                    }
                }
                try await group.waitForAll()
            }
            for index in 0..<5 {
                let response = try await transport.send(HTTPRequest(url: server.url("/delay/0?lone=\(index)")))
                #expect(response.status == 200)
                #expect(engine.isEngineThread)
            }
        }
        // A lone caller on the transport's thread never waits for its answer inline there,
        // which would keep the thread from every other socket.
        #expect(engine.counters.finishedInline.load(ordering: .relaxed) == 0)
        // The same transport, the same lone requests, from other threads: after the first (whose
        // latency the transport learns, as lone requests on its own thread are not timed), inline.
        for index in 0..<2 {
            _ = try await BlockingWaitExecutor.run {
                try await transport.send(HTTPRequest(url: server.url("/delay/0?elsewhere=\(index)")))
            }
        }
        #expect(engine.counters.finishedInline.load(ordering: .relaxed) == 1)
    }

    @Test("a caller on the executor whose request is held can be cancelled, and the next request works")
    func cancellation() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        let transport = CurlTransport()
        let held = Task(executorPreference: transport.executor) {
            try await transport.send(HTTPRequest(url: server.url("/hold?cancelled")))
        }
        #expect(try await server.requestsSeen(atLeast: 1) == 1)
        held.cancel()
        await #expect(throws: CancellationError.self) { try await held.value }
        server.releaseHeld()
        let response = try await withTaskExecutorPreference(transport.executor) {
            try await transport.send(HTTPRequest(url: server.url("/delay/0?next")))
        }
        #expect(String(decoding: response.body, as: UTF8.self) == "/delay/0?next")
    }

    @Test("tasks that prefer the executor of a transport that is gone still run, on other threads")
    func executorOutlivesItsThread() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        var transport: CurlTransport? = CurlTransport()
        let executor = try #require(transport).executor
        let engine = try #require(transport).engine
        _ = try await withTaskExecutorPreference(executor) {
            try await transport?.send(HTTPRequest(url: server.url("/delay/0")))
        }
        transport = nil  // stops the thread, and waits for it
        let stopped = engine.stopped.load(ordering: .acquiring)
        #expect(stopped)
        let value = try await withTaskExecutorPreference(executor) {
            #expect(!engine.isEngineThread)
            // Not synchronisation: a suspension, and a job queued after it.
            try await Task.sleep(for: .milliseconds(1))
            #expect(!engine.isEngineThread)
            return 42
        }
        #expect(value == 42)
    }

    @Test("a kept connection used again is still in the epoll set: no change to the set per request")
    func keptConnectionStaysWatched() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        let transport = CurlTransport()
        let engine = transport.engine
        try await sendInTurn((0..<50).map { "/delay/0?index=\($0)" }, to: server, on: transport)
        #expect(server.connectionsAccepted == 1)
        // Registering the new connection, and perhaps a change between writing and reading while
        // it connects; re-registering it for every request made 50 and more.
        let changes = engine.counters.epollChanges.load(ordering: .relaxed)
        #expect(changes <= 3, "50 requests on one kept connection changed the epoll set \(changes) times")
    }

    @Test("connections the server closes, their socket numbers handed out again, are watched again")
    func closedConnectionsNumbersReused() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        let transport = CurlTransport()
        let engine = transport.engine
        // Each answer closes its connection, and the next connection's socket usually gets the
        // closed one's number: the engine must forget the old socket as libcurl closes it and
        // register the new one, or a request waits for events that never come, until its limit.
        try await sendInTurn((0..<30).map { "/close?index=\($0)" }, to: server, on: transport)
        #expect(server.connectionsAccepted == 30)
        #expect(engine.counters.socketsClosed.load(ordering: .relaxed) >= 29)
    }

    @Test("connections' sockets are close-on-exec: a program that starts another does not hand it its connections")
    func connectionSocketsCloseOnExec() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        let transport = CurlTransport()
        let engine = transport.engine
        _ = try await transport.send(HTTPRequest(url: server.url("/delay/0")))
        let sockets = engine.lock.withLock { _ in engine.connectionSockets }
        #expect(sockets.count == 1, "one kept connection, its socket opened through the engine: \(sockets)")
        for socket in sockets {
            let flags = fcntl(socket, F_GETFD)
            #expect(flags >= 0 && flags & FD_CLOEXEC != 0, "socket \(socket) has descriptor flags \(flags)")
        }
    }

    /// Sends `targets` one after another from a task on `transport`'s executor, so that every
    /// wait is the engine thread's (none inline), and checks that each answer echoes its target.
    private func sendInTurn(_ targets: [String], to server: RawListener, on transport: CurlTransport) async throws {
        try await withTaskExecutorPreference(transport.executor) {
            for target in targets {
                let response = try await transport.send(HTTPRequest(url: server.url(target), timeout: .seconds(20)))
                #expect(String(decoding: response.body, as: UTF8.self) == target)
            }
        }
    }
}

import Dispatch
import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("A handler that answers on the server's thread")
struct AnsweringHandlerTests {
    /// Where each request's handler and work ran: in a task or not.
    final class Places: Sendable {
        let handlerInTask = Locked<[Bool]>([])
        let workInTask = Locked<[Bool]>([])
    }

    static func inTask() -> Bool { withUnsafeCurrentTask { $0 != nil } }

    @Test("an answer given now is sent without a task; work given for later runs in one, and may wait")
    func nowAndLater() async throws {
        let places = Places()
        let server = HTTPServer(answering: { request in
            places.handlerInTask.withLock { $0.append(Self.inTask()) }
            switch request.path {
            case "/now": return .now(.text("now \(request.queryValue("n") ?? "")"))
            case "/drop": return .now(.dropConnection)
            default:
                return .later {
                    places.workInTask.withLock { $0.append(Self.inTask()) }
                    // Not synchronisation: work that waits, as work given for later may.
                    try? await Task.sleep(for: .milliseconds(50))
                    return .text("later", status: 202)
                }
            }
        })
        try server.start()
        let connection = try await RawHTTPConnection.connect(port: server.port)
        for index in 0..<3 {
            let answer = try await connection.request("GET", "/now?n=\(index)")
            #expect(answer.status == 200)
            #expect(answer.text == "now \(index)")
        }
        let later = try await connection.request("GET", "/later")
        #expect(later.status == 202 && later.text == "later")
        #expect(try await connection.request("GET", "/now?n=after").text == "now after", "kept alive after the wait")
        let dropped = try await RawHTTPConnection.connect(port: server.port)
        try await dropped.send("GET /drop HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .closed = try await dropped.read() else {
            Issue.record("a dropped connection got an answer")
            await server.stop()
            return
        }
        await server.stop()
        #expect(places.handlerInTask.withLock { $0 } == Array(repeating: false, count: 6))
        #expect(places.workInTask.withLock { $0 } == [true])
        #expect(server.liveRequestCount == 0)
    }

    @Test("while one connection's work waits for later, answers given now go on being sent on others")
    func laterDoesNotHoldOthers() async throws {
        let release = Observed<CheckedContinuation<Void, Never>?>(nil)
        let server = HTTPServer(answering: { request in
            guard request.path == "/wait" else { return .now(.text("quick")) }
            return .later {
                await withCheckedContinuation { continuation in release.change { $0 = continuation } }
                return .text("released")
            }
        })
        try server.start()
        let waiting = try await RawHTTPConnection.connect(port: server.port)
        try await waiting.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await release.wait { $0 != nil }, "the work for later never began")
        let other = try await RawHTTPConnection.connect(port: server.port)
        for _ in 0..<20 { #expect(try await other.request("GET", "/quick").text == "quick") }
        release.value?.resume()
        guard case .response(let answer) = try await waiting.read() else {
            Issue.record("the waiting request got no answer")
            await server.stop()
            return
        }
        #expect(answer.text == "released")
        await server.stop()
    }

    @Test("a server stopping answers a request given now with 503 and closes its connection")
    func stoppingAnswers503() async throws {
        let entered = Observed(false)
        let door = Gate()
        let server = HTTPServer(answering: { request in
            if request.path == "/hold" {
                return .later {
                    entered.change { $0 = true }
                    await door.wait()  // until the test has its answer: the stop waits for this one
                    return .text("held")
                }
            }
            return .now(.text("quick"))
        })
        try server.start()
        let held = try await RawHTTPConnection.connect(port: server.port)
        try await held.send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        let second = try await RawHTTPConnection.connect(port: server.port)
        #expect(try await second.request("GET", "/quick").text == "quick")
        #expect(await entered.wait { $0 }, "the held request's work never began")
        async let stopped: Void = server.stop()
        #expect(await waitUntil { !server.isRunning }, "the stop never began")
        // The kept-alive connection is still open while the held request is answered.
        try await second.send("GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .response(let answer) = try await second.read() else {
            Issue.record("the request sent while stopping got no answer")
            door.open()
            await stopped
            return
        }
        #expect(answer.status == 503, "\(answer.text)")
        #expect(answer.header("Connection")?.lowercased() == "close")
        door.open()
        await stopped
    }
}

@Suite("A server on several threads")
struct ServerThreadsTests {
    @Test("three server threads: every connection is served, counted, and refused only once for a bad length")
    func threeThreads() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 3
        let threadIDs = Locked(Set<UInt>())
        let server = HTTPServer(
            configuration: configuration,
            answering: { request in
                threadIDs.withLock { _ = $0.insert(UInt(pthread_self())) }
                return .now(.text("served \(request.path)"))
            })
        try server.start()
        var connections: [RawHTTPConnection] = []
        for index in 0..<30 {
            let connection = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await connection.request("GET", "/\(index)").text == "served /\(index)")
            connections.append(connection)
        }
        #expect(server.connectionCount == 30)
        // The connections are handed to the threads in turn, however they arrive.
        #expect(threadIDs.withLock { $0.count } == 3, "answered on \(threadIDs.withLock { $0.count })")
        for _ in 0..<6 {
            let bad = try await RawHTTPConnection.connect(port: server.port)
            try await bad.send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n")
            guard case .response(let refusal) = try await bad.read() else {
                Issue.record("no answer to a bad Content-Length")
                continue
            }
            #expect(refusal.status == 400)
            #expect(refusal.text == "Bad request: the Content-Length is not a number of bytes.")
        }
        await server.stop()
    }

    @Test("connections opened while a thread is busy are still shared by every thread")
    func connectionsAreSharedWhileAThreadIsBusy() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.threads = 2
        let threadIDs = Locked([UInt: Int]())
        let release = DispatchSemaphore(value: 0)
        let holding = Observed(false)
        let server = HTTPServer(
            configuration: configuration,
            answering: { request in
                // Holds its thread, as a slow answer does, until the connections below are open.
                if request.path == "/hold" {
                    holding.change { $0 = true }
                    _ = release.wait(timeout: .now() + 10)
                    return .now(.text("held"))
                }
                threadIDs.withLock { $0[UInt(pthread_self()), default: 0] += 1 }
                return .now(.text("served \(request.path)"))
            })
        try server.start()
        let held = try await RawHTTPConnection.connect(port: server.port)
        try await held.send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await holding.wait { $0 }, "the held request never reached its handler")
        // A thread that accepted for itself would leave every one of these to the idle thread.
        var connections: [RawHTTPConnection] = []
        for _ in 0..<8 { connections.append(try await RawHTTPConnection.connect(port: server.port)) }
        // Handed out in turn: the idle thread has opened its four (libmicrohttpd counts the busy
        // thread's only once that thread is free), with the held one five.
        #expect(await waitUntil { server.connectionCount >= 5 }, "open: \(server.connectionCount)")
        release.signal()
        guard case .response(let heldAnswer) = try await held.read() else {
            Issue.record("the held request got no answer")
            return
        }
        #expect(heldAnswer.text == "held")
        for (index, connection) in connections.enumerated() {
            #expect(try await connection.request("GET", "/\(index)").text == "served /\(index)")
        }
        // Each connection is served by the thread it was given to.
        let perThread = threadIDs.withLock { $0 }
        #expect(perThread.count == 2, "served on \(perThread.count) thread(s): \(perThread.values.sorted())")
        #expect(perThread.values.allSatisfy { $0 >= 3 }, "connections per thread: \(perThread.values.sorted())")
        await server.stop()
    }
}

import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

@Suite("HTTPServer responses, limits and lifecycle", .timeLimit(.minutes(2)))
struct HTTPServerLifecycleTests {
    @Test("status, headers, redirect and JSON answers go out as set")
    func responses() async throws {
        try await withServer(handler: { request in
            switch request.path {
            case "/created":
                var response = HTTPServerResponse(status: 201, headers: ["X-Custom": "1"], body: Data("made".utf8))
                response.headers.add(name: "Set-Cookie", value: "a=1")
                response.headers.add(name: "Set-Cookie", value: "b=2")
                return response
            case "/redirect": return .redirect(to: URL(string: "http://127.0.0.1:1/next?x=1")!)
            case "/json": return .json(JSONValue.object(["ok": .bool(true)]), status: 202)
            case "/html": return .html("<p>hi</p>", status: 404)
            case "/encodable": return .json(["b": 2, "a": 1])
            case "/empty": return HTTPServerResponse(status: 204)
            default: return .text("?", status: 500)
            }
        }) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let created = try await connection.request("GET", "/created")
            #expect(created.status == 201)
            #expect(created.header("X-Custom") == "1")
            #expect(created.headers.filter { $0.0.lowercased() == "set-cookie" }.map(\.1) == ["a=1", "b=2"])
            #expect(created.text == "made")
            let redirect = try await connection.request("GET", "/redirect")
            #expect(redirect.status == 302)
            #expect(redirect.header("Location") == "http://127.0.0.1:1/next?x=1")
            let json = try await connection.request("GET", "/json")
            #expect(json.status == 202)
            #expect(json.header("Content-Type")?.hasPrefix("application/json") == true)
            #expect(JSONValue(parsing: json.body)?["ok"]?.boolValue == true)
            let html = try await connection.request("GET", "/html")
            #expect(html.status == 404)
            #expect(html.header("Content-Type") == "text/html; charset=utf-8")
            let encodable = try await connection.request("GET", "/encodable")
            #expect(encodable.text == #"{"a":1,"b":2}"#)
            let empty = try await connection.request("GET", "/empty")
            #expect(empty.status == 204)
            #expect(empty.body.isEmpty)
            // HEAD gets the headers of GET and no body; the connection stays usable.
            try await connection.send("HEAD /created HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try await connection.readHead()
            #expect(head.status == 201)
            #expect(head.header("Content-Length") == "4")
            #expect(try await connection.request("GET", "/created").text == "made")
        }
    }

    @Test("a handler's Connection: close closes the connection after the answer")
    func connectionClose() async throws {
        try await withServer(handler: { _ in
            var response = HTTPServerResponse.text("bye")
            response.headers["Connection"] = "close"
            return response
        }) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let response = try await connection.request("GET", "/")
            #expect(response.text == "bye")
            #expect(try await connection.waitForClose())
        }
    }

    @Test(
        "a handler's Connection and Content-Length fields count in any case: close is honoured, a wrong length is not sent",
        arguments: ["CONNECTION", "connection", "Connection"])
    func managedFieldsInAnyCase(_ name: String) async throws {
        try await withServer(handler: { _ in
            var response = HTTPServerResponse.text("bye")
            response.headers.add(name: name, value: "Close")
            response.headers.add(name: name == "CONNECTION" ? "CONTENT-LENGTH" : "content-length", value: "999")
            response.headers.add(name: "Transfer-ENCODING", value: "chunked")
            return response
        }) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let response = try await connection.request("GET", "/")
            #expect(response.text == "bye")
            #expect(response.header("Content-Length") == "3")
            #expect(response.header("Transfer-Encoding") == nil)
            #expect(try await connection.waitForClose())
        }
    }

    @Test("dropConnection closes the connection without any answer")
    func dropConnection() async throws {
        try await withServer(handler: { request in
            request.path == "/drop" ? .dropConnection : .text("fine")
        }) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            try await connection.send("GET /drop HTTP/1.1\r\nHost: x\r\n\r\n")
            guard case .closed = try await connection.read() else {
                Issue.record("the server answered instead of dropping the connection")
                return
            }
            let next = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await next.request("GET", "/ok").text == "fine")
        }
    }

    @Test("an idle connection is closed after the idle timeout")
    func idleTimeout() async throws {
        try await withServer(.init(connectionIdleTimeout: .seconds(10)), handler: { _ in .text("x") }) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port, readTimeout: 20)
            #expect(try await connection.request("GET", "/").status == 200)
            // The idle timeout is long enough that a loaded machine still sends the first request in
            // time; the read gives up after 20 s, and the server must close before that.
            #expect(try await connection.waitForClose())
        }
    }

    @Test("a connection over the limit is answered 503 at once; once another closes, a new one is served")
    func connectionLimit() async throws {
        let calls = Locked(0)
        try await withServer(
            .init(maxConnections: 2),
            handler: counting(calls) { _ in .text("x") }
        ) { server in
            let first = try await RawHTTPConnection.connect(port: server.port)
            let second = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await first.request("GET", "/").status == 200)
            #expect(try await second.request("GET", "/").status == 200)
            // Issue 17: waiting in the listen queue let slow clients starve everyone; refuse instead.
            let third = try await RawHTTPConnection.connect(port: server.port)
            try await third.send("GET /third HTTP/1.1\r\nHost: x\r\n\r\n")
            guard case .response(let refused) = try await third.read() else {
                Issue.record("the third connection was closed without an answer")
                return
            }
            #expect(refused.status == 503)
            #expect(refused.header("Retry-After") == "1")
            #expect(calls.withLock { $0 } == 2)
            first.shutDown()
            // The first one's slot comes back once the server has seen it close.
            #expect(await waitUntil { server.connectionCount < 2 }, "the server never saw the first connection close")
            let fourth = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await fourth.request("GET", "/fourth").status == 200)
        }
    }

    @Test("starting on a port in use fails with an error that says so")
    func portInUse() async throws {
        try await withServer(handler: { _ in .text("x") }) { server in
            let second = HTTPServer(configuration: .init(port: server.port)) { _ in .text("y") }
            let error = #expect(throws: HTTPServerError.self) { try second.start() }
            #expect(error == .addressInUse("127.0.0.1:\(server.port)"))
            #expect(error?.description.contains("already in use") == true)
        }
    }

    @Test("a host that is not an address literal is refused")
    func invalidHost() {
        let server = HTTPServer(configuration: .init(host: "localhost")) { _ in .text("x") }
        #expect(throws: HTTPServerError.invalidHost("localhost")) { try server.start() }
    }

    @Test("a server starts once")
    func startsOnce() async throws {
        try await withServer(handler: { _ in .text("x") }) { server in
            #expect(throws: HTTPServerError.self) { try server.start() }
        }
    }

    @Test(
        "with alsoListenOnIPv6Loopback the same port answers on ::1",
        .enabled(if: HTTPServerLifecycleTests.hasIPv6Loopback, "this machine has no IPv6 loopback (::1)"))
    func ipv6Loopback() async throws {
        try await withServer(.init(alsoListenOnIPv6Loopback: true), handler: { _ in .text("both") }) { server in
            let v4 = try await RawHTTPConnection.connect(host: "127.0.0.1", port: server.port)
            let v6 = try await RawHTTPConnection.connect(host: "::1", port: server.port)
            #expect(try await v4.request("GET", "/").text == "both")
            #expect(try await v6.request("GET", "/").text == "both")
        }
    }

    static var hasIPv6Loopback: Bool {
        let lines = (try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8)) ?? ""
        let found = lines.split(separator: "\n").contains { $0.hasPrefix("00000000000000000000000000000001") }
        if !found { print("Skipping the IPv6 test: this machine has no IPv6 loopback (::1).") }
        return found
    }

    @Test("stop waits for a request being handled, which is answered; new connections are refused")
    func stopWaitsForInFlight() async throws {
        let entered = Latch()
        let release = Latch()
        let server = HTTPServer { _ in
            entered.open()
            await release.wait()
            return .text("finished")
        }
        try server.start()
        let port = server.port
        let connection = try await RawHTTPConnection.connect(port: port)
        try await connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        await entered.wait()

        let stopped = Latch()
        let stopping = Task {
            await server.stop()
            stopped.open()
        }
        // Once new connections are refused, stop is under way and waiting for the handler. (A
        // minute's limit: should another process be given the freed port, this fails, not hangs.)
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? await RawHTTPConnection.connect(port: port)) != nil {
            guard ContinuousClock.now < deadline else {
                Issue.record("port \(port) still accepted connections a minute after stop() began")
                release.open()
                return
            }
            await Task.yield()
        }
        #expect(!server.isRunning)
        release.open()
        guard case .response(let response) = try await connection.read() else {
            Issue.record("the in-flight request was cut off by stop()")
            return
        }
        #expect(response.text == "finished")
        #expect(response.header("Connection")?.lowercased() == "close")
        await stopping.value
        await stopped.wait()
    }

    @Test("a handler still running after the grace period is cancelled and its connection closed")
    func stopGracePeriod() async throws {
        let entered = Latch()
        let sawCancellation = Locked(false)
        let server = HTTPServer(configuration: .init(stopGracePeriod: .milliseconds(50))) { _ in
            entered.open()
            // Waits until cancelled.
            await withTaskCancellationHandler {
                await Latch().wait()
            } onCancel: {
                sawCancellation.withLock { $0 = true }
            }
            return .text("never sent")
        }
        try server.start()
        let connection = try await RawHTTPConnection.connect(port: server.port)
        try await connection.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await entered.wait()
        await server.stop()
        guard case .closed = try await connection.read() else {
            Issue.record("a response was sent after the grace period")
            return
        }
        #expect(sawCancellation.withLock { $0 })
    }

    @Test("stop twice, or before start, does nothing")
    func stopIsIdempotent() async throws {
        let never = HTTPServer { _ in .text("x") }
        await never.stop()
        #expect(!never.isRunning)
        let server = HTTPServer { _ in .text("x") }
        try server.start()
        let port = server.port
        await server.stop()
        await server.stop()
        #expect(server.port == port)
        // Not "connecting to the port fails": once closed, the port may be handed to a server of
        // another test running at the same time.
        #expect(!server.isRunning)
    }

    @Test("a server dropped without stop() stops itself")
    func deinitStops() async throws {
        let marker = UUID().uuidString
        var server: HTTPServer? = HTTPServer { _ in .text(marker) }
        try server!.start()
        let port = server!.port
        #expect(try await RawHTTPConnection.connect(port: port).request("GET", "/").text == marker)
        server = nil
        // Nothing answers on the port any more, or, if a concurrent test's server was given the
        // same port meanwhile, it is not this one.
        if let connection = try? await RawHTTPConnection.connect(port: port),
            let answer = try? await connection.request("GET", "/")
        {
            #expect(answer.text != marker)
        }
    }

    @Test("every request's state is released: answered, refused, dropped, malformed or cut off")
    func releasesRequestState() async throws {
        let server = HTTPServer(configuration: .init(maxHeaderBytes: 4096, maxBodyBytes: 100)) { request in
            request.path == "/drop" ? .dropConnection : .text("ok")
        }
        try server.start()
        let port = server.port
        let keepAlive = try await RawHTTPConnection.connect(port: port)
        for index in 0..<20 { #expect(try await keepAlive.request("GET", "/\(index)").status == 200) }
        #expect(try await keepAlive.request("POST", "/big", body: Data(count: 101)).status == 413)
        let raw: [String] = [
            "GET /drop HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n",
            "GET / HTTP/1.1\r\nX-Big: \(String(repeating: "v", count: 10_000))\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nonly part of the body",
        ]
        for bytes in raw {
            let connection = try await RawHTTPConnection.connect(port: port)
            try await connection.send(bytes)
            if bytes.contains("only part") {
                connection.shutDown()  // the client goes away mid-body
            } else {
                _ = try await connection.read()
            }
        }
        await server.stop()
        #expect(server.liveRequestCount == 0)
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCurl

/// Failures below HTTP, against a bare TCP listener on loopback.
@Suite("CurlTransport failures")
struct CurlFailureTests {
    let transport = CurlTransport()

    @Test("a refused connection is a connectionFailed error that the core retries")
    func refused() async throws {
        let refusing = try RefusingPort()
        defer { refusing.release() }
        let error = try await #require(throws: TransportError.self) {
            try await transport.send(HTTPRequest(url: URL(string: "http://127.0.0.1:\(refusing.port)/me")!))
        }
        #expect(error.kind == .connectionFailed)
        #expect(error.host == "127.0.0.1")
        #expect(error.message.contains("libcurl error 7"))
        #expect(AuthError.transport(error).category == .retry)
    }

    @Test("a server that accepts and never answers gives a timeout, not a hang")
    func silentServer() async throws {
        let listener = try RawListener(.silent)
        defer { listener.stop() }
        let request = HTTPRequest(url: listener.baseURL.appending(path: "slow"), timeout: .milliseconds(300))
        let error = try await #require(throws: TransportError.self) { try await transport.send(request) }
        #expect(error.kind == .timedOut)
        #expect(try await listener.requestsSeen(atLeast: 1) == 1)
        #expect(AuthError.transport(error).category == .retry)
    }

    /// The engine only ever moves its timer earlier, and leaves it when libcurl reports a later
    /// deadline; it relies on libcurl reporting that deadline again when the earlier timer
    /// fires and finds nothing due (libcurl forgets the deadline it last reported when it is run
    /// for a timeout). Were it not reported again, the request waiting on it (here, for its
    /// timeout) would wait for an unrelated event, perhaps for ever.
    @Test("a request's timeout fires after an earlier request's timer went with its cancelled request")
    func timeoutAfterAnEarlierTimerIsCancelled() async throws {
        let listener = try RawListener(.silent)
        defer { listener.stop() }
        let transport = CurlTransport()
        let long = Task {
            try await transport.send(HTTPRequest(url: listener.baseURL.appending(path: "long"), timeout: .seconds(4)))
        }
        #expect(try await listener.requestsSeen(atLeast: 1) == 1)
        let shortStarted = CurlEngine.now()
        let short = Task {
            try await transport.send(
                HTTPRequest(url: listener.baseURL.appending(path: "short"), timeout: .seconds(3)))
        }
        #expect(try await listener.requestsSeen(atLeast: 2) == 2)
        // Once libcurl's connection timers (200 ms) have passed, the engine's timer is the short
        // request's timeout (a deadline seconds after it started, not milliseconds). Cancelling
        // it moves libcurl's earliest deadline to the long request's, reported while the timer
        // is set earlier: libcurl must report it again when that timer fires. (The timeouts
        // leave seconds for a loaded machine to get here.)
        let engine = transport.engine
        let armedForTimeout = await waitUntil(limit: .seconds(60)) {
            let deadline = engine.lock.withLock { _ in engine.timerDeadline }
            return deadline != .max && deadline >= shortStarted + 1_000_000_000
        }
        #expect(armedForTimeout, "the engine's timer never moved past libcurl's connection timers")
        short.cancel()
        await #expect(throws: CancellationError.self) { try await short.value }
        // Without that deadline set, the long request would wait until the listener closes its
        // connection: the watchdog does that after a minute, and the request then fails otherwise.
        let watchdog = Task {
            // Not synchronisation: a watchdog that turns a hang into a failure, far past the 4 s timeout.
            try await Task.sleep(for: .seconds(60))
            listener.stop()
        }
        defer { watchdog.cancel() }
        let error = try await #require(throws: TransportError.self) { try await long.value }
        #expect(error.kind == .timedOut, "the long request ended with \(error.kind), not its own timeout")
    }

    @Test("a first request to an http host that is slow to answer does not hold the others to that host")
    func slowFirstAnswerHoldsNoOne() async throws {
        let listener = try RawListener(.keepAliveEcho)
        defer { listener.stop() }
        let transport = CurlTransport()
        let stalled = Task { try await transport.send(HTTPRequest(url: listener.url("/stall"), timeout: .seconds(30))) }
        defer { stalled.cancel() }
        #expect(try await listener.requestsSeen(atLeast: 1) == 1)
        // Waiting to share the first connection (HTTP/2's way) would hold these until the first
        // answer, here until their timeouts: http: is HTTP/1.1, so each opens its own.
        try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<4 {
                group.addTask {
                    let response = try await transport.send(
                        HTTPRequest(url: listener.url("/echo/\(index)"), timeout: .seconds(10)))
                    return String(decoding: response.body, as: UTF8.self)
                }
            }
            var bodies: Set<String> = []
            for try await body in group { bodies.insert(body) }
            #expect(bodies == Set((0..<4).map { "/echo/\($0)" }))
        }
    }

    @Test("an event loop whose epoll_wait fails fails the request in flight and every later one; the process lives")
    func eventLoopFailure() async throws {
        let listener = try RawListener(.silent)
        defer { listener.stop() }
        let broken = CurlTransport()
        let request = HTTPRequest(url: listener.baseURL.appending(path: "waiting"), timeout: .seconds(60))
        let inFlight = Task { try await broken.send(request) }
        #expect(try await listener.requestsSeen(atLeast: 1) == 1)
        broken.engine.breakEventLoop()
        let error = try await #require(throws: TransportError.self) { _ = try await inFlight.value }
        #expect(error.kind == .other)
        #expect(error.message.contains("epoll_wait failed"))
        #expect(error.message.contains("Make a new CurlTransport"))
        // Later requests, one at a time and several at once, fail with the same error at once.
        for _ in 0..<2 {
            let later = try await #require(throws: TransportError.self) { try await broken.send(request) }
            #expect(later == error)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let later = try await #require(throws: TransportError.self) { try await broken.send(request) }
                    #expect(later == error)
                }
            }
            try await group.waitForAll()
        }
        #expect(listener.requestsSeen == 1)
    }

    @Test(
        "a connection closed or reset before an answer is connectionLost",
        arguments: [RawListener.Behaviour.resetAfterRequest, .closeAfterRequest])
    func connectionLost(behaviour: RawListener.Behaviour) async throws {
        let listener = try RawListener(behaviour)
        defer { listener.stop() }
        let error = try await #require(throws: TransportError.self) {
            try await transport.send(HTTPRequest(url: listener.baseURL.appending(path: "me")))
        }
        #expect(error.kind == .connectionLost)
        #expect(error.isTransient)
    }

    @Test("a body without Content-Length that outgrows the limit stops the transfer")
    func oversizedBodyWithoutLength() async throws {
        let body = String(repeating: "x", count: 4096)
        let listener = try RawListener(
            .respond(Data("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n\(body)".utf8)))
        defer { listener.stop() }
        let small = CurlTransport(configuration: .init(maximumResponseBodySize: 1024))
        let error = try await #require(throws: TransportError.self) {
            try await small.send(HTTPRequest(url: listener.baseURL.appending(path: "big")))
        }
        #expect(error.kind == .bodyTooLarge)
        #expect(error.message.contains("1 KiB limit"))
        #expect(error.message.contains("maximumResponseBodySize"))
    }

    @Test("repeated response headers are kept, in order, and found in any case")
    func rawHeaders() async throws {
        let listener = try RawListener(
            .respond(
                Data(
                    ("HTTP/1.1 201 Created\r\nConnection: close\r\nX-Request-ID: abc\r\nSet-Cookie: a=1\r\n"
                        + "Set-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok").utf8)))
        defer { listener.stop() }
        let response = try await transport.send(HTTPRequest(url: listener.baseURL))
        #expect(response.status == 201)
        #expect(response.headers["x-request-id"] == "abc")
        #expect(response.headers["X-REQUEST-ID"] == "abc")
        #expect(response.headers.values(for: "set-cookie") == ["a=1", "b=2"])
        #expect(response.body == Data("ok".utf8))
    }

    @Test("a header block many times the room first made for it arrives whole, in order")
    func longHeaderBlock() async throws {
        // 120 lines of about 90 bytes: over ten times CurlTransfer.headerBytesReserved, so the
        // buffer grows past its first allocation several times within one response.
        let values = (0..<120).map { "value \($0) " + String(repeating: "v", count: 70) }
        let lines = values.enumerated().map { "X-Field-\($0.offset): \($0.element)\r\n" }.joined()
        #expect(lines.utf8.count > 10 * CurlTransfer.headerBytesReserved)
        let listener = try RawListener(
            .respond(
                Data(
                    ("HTTP/1.1 200 OK\r\nConnection: close\r\n" + lines + "X-Folded: first\r\n second\r\n"
                        + "Content-Length: 2\r\n\r\nok").utf8)))
        defer { listener.stop() }
        let response = try await transport.send(HTTPRequest(url: listener.baseURL))
        #expect(response.status == 200)
        #expect(response.headers.count == 123)
        #expect(values.indices.allSatisfy { response.headers["x-field-\($0)"] == values[$0] })
        #expect(Array(response.headers).prefix(3).map(\.name) == ["Connection", "X-Field-0", "X-Field-1"])
        #expect(response.headers["x-folded"] == "first second")
        #expect(response.body == Data("ok".utf8))
    }

    @Test("the query, where tokens travel, never appears in an error")
    func errorsHideTheQuery() async throws {
        let refusing = try RefusingPort()
        defer { refusing.release() }
        let port = refusing.port
        let url = URL(string: "http://127.0.0.1:\(port)/me?access_token=EAAB-secret-token&fields=id")!
        let error = try await #require(throws: TransportError.self) {
            try await transport.send(HTTPRequest(url: url))
        }
        #expect(!error.description.contains("secret"))
        #expect(error.description.contains("GET http://127.0.0.1:\(port)/me"))
    }

    @Test("a header value with a line break is refused before anything is sent, without echoing the value")
    func headerInjection() async throws {
        let listener = try RawListener(.silent)
        defer { listener.stop() }
        let request = HTTPRequest(
            url: listener.baseURL, headers: ["Authorization": "Bearer secret-token\r\nX-Injected: 1"])
        let error = try await #require(throws: TransportError.self) { try await transport.send(request) }
        #expect(error.kind == .invalidRequest)
        #expect(!error.message.contains("secret"))
        #expect(listener.requestsSeen == 0)
    }

    @Test("a header name that is not an HTTP token is refused")
    func badHeaderName() async throws {
        let request = HTTPRequest(url: URL(string: "http://127.0.0.1:1/")!, headers: ["Bad Name": "x"])
        let error = try await #require(throws: TransportError.self) { try await transport.send(request) }
        #expect(error.kind == .invalidRequest)
        #expect(error.message.contains("Bad Name"))
    }

    @Test("header names may hold exactly RFC 9110's token characters, and values no CR, LF or NUL")
    func tokenBytes() async throws {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(CurlTransfer.isTokenByte(byte) == tchar.contains(byte), "byte \(byte)")
        }
        for value in ["a\u{0}b", "a\rb", "a\nb"] {
            let request = HTTPRequest(url: URL(string: "http://127.0.0.1:1/")!, headers: ["X-Value": value])
            let error = try await #require(throws: TransportError.self) { try await transport.send(request) }
            #expect(error.kind == .invalidRequest)
        }
    }

    @Test("only http and https URLs are sent", arguments: ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://x/"])
    func otherSchemes(url: String) async throws {
        let error = try await #require(throws: TransportError.self) {
            try await transport.send(HTTPRequest(url: URL(string: url)!))
        }
        #expect(error.kind == .invalidRequest)
    }

    @Test("an already cancelled task throws CancellationError without sending")
    func cancelledBeforeSending() async throws {
        let listener = try RawListener(.silent)
        defer { listener.stop() }
        let transport = self.transport
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.send(HTTPRequest(url: listener.baseURL))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(listener.requestsSeen == 0)
    }
}

/// The pieces that need no network.
@Suite("CurlTransport internals")
struct CurlInternalsTests {
    @Test(
        "libcurl results map to transport error kinds",
        arguments: [
            (6, TransportError.Kind.dnsFailure), (5, .dnsFailure), (7, .connectionFailed), (28, .timedOut),
            (52, .connectionLost), (55, .connectionLost), (56, .connectionLost), (18, .connectionLost),
            (16, .connectionLost), (35, .tlsFailure), (60, .certificateRejected), (58, .tlsFailure), (77, .tlsFailure),
            (63, .bodyTooLarge), (1, .invalidRequest), (3, .invalidRequest), (47, .other), (8, .other),
        ])
    func errorKinds(code: Int, kind: TransportError.Kind) {
        #expect(CurlErrors.kind(ofCode: code) == kind)
    }

    @Test("header blocks: repeats kept, folded lines joined, only the last response's headers")
    func headerParsing() {
        let block =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: a=1\r\nX-Long: one\r\n\t two\r\n"
            + "Set-Cookie: b=2\r\nX-Empty:\r\nBare-LF: yes\nX-Padded: \t padded \t\r\n: no name\r\n\r\nLast: x"
        let headers = CurlTransfer.parseHeaders(Array(block.utf8))
        #expect(headers.count == 8)
        #expect(headers["bare-lf"] == "yes")
        #expect(headers["x-padded"] == "padded")
        #expect(headers["last"] == "x")
        #expect(CurlTransfer.parseHeaders([]).count == 0)
        #expect(headers["content-type"] == "application/json")
        #expect(headers.values(for: "Set-Cookie") == ["a=1", "b=2"])
        #expect(headers["x-long"] == "one two")
        #expect(headers["x-empty"] == "")
    }

    @Test(
        "durations become libcurl milliseconds, never 0 (which would mean no limit)",
        arguments: [
            (Duration.zero, 1), (.microseconds(10), 1), (.milliseconds(1500), 1500), (.seconds(60), 60_000),
            (.seconds(-5), 1), (.seconds(Int64(Int32.max) + 10), Int(Int32.max)),
        ])
    func milliseconds(duration: Duration, expected: Int) {
        #expect(CurlTransfer.milliseconds(duration) == expected)
    }

    @Test("redirect policies: GET and HEAD only by default")
    func redirectPolicies() {
        let policy = CurlTransport.Configuration().redirects
        #expect(policy.follows(.get) && policy.follows(.head))
        #expect(!policy.follows(.post) && !policy.follows(.put) && !policy.follows(.delete) && !policy.follows(.patch))
        #expect(CurlTransport.RedirectPolicy.allMethods.follows(.post))
        #expect(!CurlTransport.RedirectPolicy.never.follows(.get))
    }

    @Test("the defaults are the documented ones")
    func defaults() {
        let configuration = CurlTransport.Configuration()
        #expect(configuration.connectTimeout == .seconds(10))
        #expect(configuration.timeout == .seconds(60))
        #expect(configuration.maximumResponseBodySize == 16 * 1024 * 1024)
        #expect(configuration.redirects.maximumRedirects == 10)
        #expect(configuration.tlsVerification == .system)
        #expect(configuration.proxy == .environment)
        #expect(configuration.userAgent.hasPrefix("Sesame libcurl/"))
        #expect(CurlTransport.libcurlVersion.split(separator: ".").count == 3)
    }
}

import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sends `request` on a new loopback connection and reads everything the server sends until it
/// closes the connection or `timeout` seconds pass without a byte; returns the bytes and whether
/// the server closed.
private func exchangeUntilClose(port: Int, _ request: String, timeout: Int = 20) async throws -> (String, closed: Bool)
{
    try await RawHTTPConnection.blocking {
        let fd = try SlowClients.connect(port: port, receiveTimeout: timeout)
        defer { close(fd) }
        SlowClients.send(fd, request)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 {
                if errno == EINTR { continue }
                // A reset after the answer counts as closed; a timeout does not.
                return (String(decoding: received, as: UTF8.self), errno == ECONNRESET)
            }
            received += buffer[0..<count]
        }
    }
}

/// The status lines in `text` (a response head starts with `HTTP/1.`).
private func statusLines(_ text: String) -> [String] {
    text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.") }
}

@Suite("The HTTP server under hostile requests")
struct HostileRequestTests {
    /// RFC 9112 §6.3 and §3.2: each of these must get one 400, at once, not a 30-second wait
    /// for a body whose length cannot be known, and not the handler.
    static let refused: [String] = [
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "POST /__sesame/reset HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ]

    /// Content-Lengths libmicrohttpd 0.9.75 cannot read, with the status they get.
    ///
    /// libmicrohttpd refuses these itself and, left alone, sends its answer's status line and
    /// headers twice; Sesame answers them in its place, once (see `ConnectionGuard.answerUnreadableLength`).
    static let unreadableLengths: [(String, Int)] = [
        ("abc", 400), ("-5", 400), ("3,3", 400), ("3, 4", 400), ("", 400), ("12345678901234567890123", 413),
        ("18446744073709551616", 413),
    ]

    /// The one answer a request with `length` should get: its status line, and what its body says.
    private static func expectedRefusal(_ status: Int) -> (line: String, says: String) {
        status == 413
            ? ("HTTP/1.1 413 Content Too Large", "larger than this server accepts (1024 bytes)")
            : ("HTTP/1.1 400 Bad Request", "the Content-Length is not a number of bytes")
    }

    @Test(
        "a Content-Length libmicrohttpd cannot read gets one answer, not the handler, and the connection closed",
        arguments: unreadableLengths)
    func unreadableContentLength(_ length: String, _ status: Int) async throws {
        let calls = Locked(0)
        var configuration = HTTPServer.Configuration(connectionIdleTimeout: .seconds(300))
        configuration.maxBodyBytes = 1024
        try await withServer(
            configuration,
            handler: counting(calls) { _ in .text("handled") }
        ) { server in
            let request = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n\r\nabc"
            let started = ContinuousClock.now
            let (text, closed) = try await exchangeUntilClose(port: server.port, request, timeout: 200)
            let expected = Self.expectedRefusal(status)
            #expect(statusLines(text) == [expected.line], "\(text.debugDescription)")
            #expect(text.hasSuffix(expected.says + "."), "\(text.debugDescription)")
            #expect(closed)
            #expect(ContinuousClock.now - started < .seconds(100))
            #expect(calls.withLock { $0 } == 0)
            let (next, _) = try await exchangeUntilClose(
                port: server.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(statusLines(next).first?.contains(" 200") == true)
        }
    }

    @Test(
        "an unreadable Content-Length on a kept-alive connection, sent later or pipelined, gets one answer",
        arguments: [false, true])
    func unreadableContentLengthKeptAlive(_ pipelined: Bool) async throws {
        try await withServer(
            .init(connectionIdleTimeout: .seconds(300)), handler: { request in .text("handled \(request.path)") }
        ) { server in
            let first = "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
            let bad = "POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 3,3\r\n\r\nabc"
            let connection = try await RawHTTPConnection.connect(port: server.port, readTimeout: 200)
            if pipelined {
                try await connection.send(first + bad)
            } else {
                try await connection.send(first)
            }
            guard case .response(let answer) = try await connection.read() else {
                Issue.record("the first request got no answer")
                return
            }
            #expect(answer.status == 200)
            #expect(answer.text == "handled /first")
            if !pipelined { try await connection.send(bad) }
            guard case .response(let refusal) = try await connection.read() else {
                Issue.record("the bad request got no answer")
                return
            }
            #expect(refusal.status == 400)
            #expect(refusal.text == "Bad request: the Content-Length is not a number of bytes.")
            #expect(try await connection.waitForClose(), "nothing more, and the connection closed")
        }
    }

    @Test(
        "while another client's head is half sent, an unreadable Content-Length is refused and that client is untouched"
    )
    func unreadableContentLengthBesideSlowHead() async throws {
        try await withServer(
            .init(connectionIdleTimeout: .seconds(300)), handler: { request in .text("handled \(request.path)") }
        ) { server in
            // Its request line is parsed (libmicrohttpd has called the URI log), its headers are not.
            let slow = try await RawHTTPConnection.connect(port: server.port, readTimeout: 200)
            try await slow.send("GET /slow HTTP/1.1\r\n")
            // The URI log makes each request's state: one request now is this line, parsed.
            #expect(await waitUntil { server.liveRequestCount == 1 }, "the slow request line was never parsed")
            let (text, closed) = try await exchangeUntilClose(
                port: server.port, "POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", timeout: 200)
            // Which of the two heads libmicrohttpd refused is not known here, so its own answer
            // (whose head it repeats) goes out to the client that sent the bad request.
            #expect(statusLines(text).first == "HTTP/1.1 400 Bad Request", "\(text.debugDescription)")
            #expect(closed)
            try await slow.send("Host: x\r\n\r\n")
            guard case .response(let answer) = try await slow.read() else {
                Issue.record("the slow client's connection was closed")
                return
            }
            #expect(answer.text == "handled /slow")
        }
    }

    @Test("a request whose framing or Host is wrong gets exactly one 400 at once", arguments: refused)
    func refusedAtOnce(_ request: String) async throws {
        let calls = Locked(0)
        // A server that would wait 300 s for a body it cannot delimit (libmicrohttpd waits for the
        // idle timeout), so that "at once" is told apart from that wait by a wide margin even on a
        // loaded machine.
        var configuration = HTTPServer.Configuration()
        configuration.connectionIdleTimeout = .seconds(300)
        try await withServer(
            configuration,
            handler: counting(calls) { _ in .text("handled") }
        ) { server in
            let started = ContinuousClock.now
            let (text, closed) = try await exchangeUntilClose(port: server.port, request, timeout: 200)
            #expect(statusLines(text).count == 1, "answers: \(statusLines(text))")
            #expect(statusLines(text).first?.hasPrefix("HTTP/1.1 400") == true)
            #expect(closed, "the connection should be closed after the 400")
            #expect(ContinuousClock.now - started < .seconds(100))
            #expect(calls.withLock { $0 } == 0)
        }
    }

    @Test("an HTTP/1.0 request may leave out Host; a chunked HTTP/1.1 body still works")
    func validRequestsPass() async throws {
        try await withServer(handler: { request in .text("got \(request.body.count)") }) { server in
            let (old, _) = try await exchangeUntilClose(
                port: server.port, "GET / HTTP/1.0\r\n\r\n")
            #expect(statusLines(old).first?.contains(" 200") == true)
            let (chunked, _) = try await exchangeUntilClose(
                port: server.port,
                "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            )
            #expect(statusLines(chunked).first?.contains(" 200") == true)
            #expect(chunked.hasSuffix("got 3"))
        }
    }

    @Test("fuzz: random framing headers get at most one answer each, and only valid ones reach the handler")
    func framingFuzz() async throws {
        var generator = SeededGenerator(seed: 9112)
        let codings = ["chunked", "gzip", "identity", "Chunked", "chunked, chunked", "gzip, chunked", "", "x"]
        let lengths = ["0", "3", "3, 4", " 3", "3,3", "-1", "x", "", "99999999999999999999999"]
        let calls = Locked(0)
        try await withServer(
            .init(connectionIdleTimeout: .seconds(3)),
            handler: counting(calls) { _ in .text("ok") }
        ) { server in
            for _ in 0..<40 {
                var head = "POST /f HTTP/1.1\r\nConnection: close\r\n"
                let host = Int.random(in: 0..<4, using: &generator)
                if host > 0 { head += "Host: x\r\n" }
                if host == 3 { head += "Host: y\r\n" }
                let hasCoding = Bool.random(using: &generator)
                let coding = codings.randomElement(using: &generator)!
                if hasCoding { head += "Transfer-Encoding: \(coding)\r\n" }
                let hasLength = Bool.random(using: &generator)
                let length = lengths.randomElement(using: &generator)!
                if hasLength { head += "Content-Length: \(length)\r\n" }
                let request = head + "\r\n" + (hasCoding ? "3\r\nabc\r\n0\r\n\r\n" : "abc")
                let before = calls.withLock { $0 }
                let (text, _) = try await exchangeUntilClose(port: server.port, request, timeout: 10)
                let answers = statusLines(text)
                #expect(answers.count <= 1, "\(request.debugDescription) got \(answers)")
                let valid =
                    (host == 1 || host == 2)
                    && (hasCoding ? (!hasLength && coding.lowercased() == "chunked") : true)
                    && (!hasLength || ["0", "3", " 3"].contains(length))
                if !valid {
                    #expect(calls.withLock { $0 } == before, "\(request.debugDescription) reached the handler")
                    if let status = answers.first { #expect(!status.contains(" 200"), "\(request.debugDescription)") }
                }
            }
        }
    }

    @Test("url(_:) never traps: characters a URL cannot hold are percent-encoded")
    func urlWithSpace() throws {
        let server = HTTPServer { _ in .text("") }
        #expect(server.url("/a b").absoluteString.hasSuffix("/a%20b"))
        #expect(server.url("/x?q=1 2&r=%zz").absoluteString.hasSuffix("/x?q=1%202&r=%25zz"))
        #expect(server.url("/ok?a=%41").absoluteString.hasSuffix("/ok?a=%41"))
        #expect(server.url("/é\"<>").absoluteString.hasSuffix("/%C3%A9%22%3C%3E"))
    }

    @Test("a port outside 0...65535 is an error, not a trap", arguments: [65_536, 70_000, -1, Int.max])
    func portOutOfRange(_ port: Int) {
        let server = HTTPServer(configuration: .init(port: port)) { _ in .text("") }
        #expect(throws: HTTPServerError.invalidPort(port)) { try server.start() }
        #expect(!server.isRunning)
    }

    @Test("an absurd header limit does not overflow")
    func hugeHeaderLimit() async throws {
        try await withServer(.init(maxHeaderBytes: Int.max), handler: { _ in .text("fine") }) { server in
            let (text, _) = try await exchangeUntilClose(
                port: server.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(statusLines(text).first?.contains(" 200") == true)
        }
    }
}

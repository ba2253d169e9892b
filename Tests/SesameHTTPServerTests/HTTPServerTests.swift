import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

/// Starts a server, runs `body`, and stops the server whatever happens.
@discardableResult
func withServer<T>(
    _ configuration: HTTPServer.Configuration = .init(),
    handler: @escaping @Sendable (HTTPServerRequest) async -> HTTPServerResponse,
    _ body: (HTTPServer) async throws -> T
) async throws -> T {
    try await withStarted(
        {
            let server = HTTPServer(configuration: configuration, handler: handler)
            try server.start()
            return server
        }, stop: { await $0.stop() }, body)
}

/// `handler`, counting its calls in `calls`: for tests that check a request never reached it.
func counting(
    _ calls: Locked<Int>, _ handler: @escaping @Sendable (HTTPServerRequest) async -> HTTPServerResponse
) -> @Sendable (HTTPServerRequest) async -> HTTPServerResponse {
    { request in
        calls.withLock { $0 += 1 }
        return await handler(request)
    }
}

/// A handler that keeps the last request it got in `seen`, and answers "ok".
func recording(_ seen: Locked<HTTPServerRequest?>) -> @Sendable (HTTPServerRequest) async -> HTTPServerResponse {
    { request in
        seen.withLock { $0 = request }
        return .text("ok")
    }
}

/// Lets handlers wait until `count` of them are inside at once: proof that handlers run
/// concurrently and not on libmicrohttpd's single thread.
actor Rendezvous {
    private let count: Int
    private var arrived = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { self.count = count }

    func arrive() async {
        arrived += 1
        if arrived >= count {
            for continuation in waiting { continuation.resume() }
            waiting.removeAll()
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}

/// A one-shot latch a test opens to let a handler finish.
final class Latch: Sendable {
    private let state = Locked<(open: Bool, next: Int, waiters: [Int: CheckedContinuation<Void, Never>])>(
        (false, 0, [:]))

    /// Returns once ``open()`` has been called, or once the task is cancelled: a test whose
    /// time limit ran out (or a handler the server cancelled) ends instead of waiting for ever.
    func wait() async {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if state.open || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}

@Suite("HTTPServer over loopback", .timeLimit(.minutes(2)))
struct HTTPServerTests {
    static let echo: @Sendable (HTTPServerRequest) async -> HTTPServerResponse = { request in
        var lines = ["\(request.method) \(request.path)"]
        for (name, value) in request.query { lines.append("q \(name)=\(value)") }
        lines.append("body \(request.body.count)")
        return .text(lines.joined(separator: "\n"))
    }

    @Test("port 0 picks a free port and the base URL names it")
    func picksPort() async throws {
        try await withServer(handler: Self.echo) { server in
            #expect(server.port > 0)
            #expect(server.baseURL.absoluteString == "http://127.0.0.1:\(server.port)")
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let response = try await connection.request("GET", "/hello")
            #expect(response.status == 200)
            #expect(response.text.hasPrefix("GET /hello"))
            #expect(response.header("Content-Type") == "text/plain; charset=utf-8")
        }
    }

    @Test("the path is percent-decoded and the query decoded in order, repeats kept")
    func decodesTarget() async throws {
        let seen = Locked<HTTPServerRequest?>(nil)
        try await withServer(handler: recording(seen)) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            _ = try await connection.request("GET", "/p%20ath/x?a=1&b=x+y&a=2&c=%26%3D", headers: [("X-Thing", "Yes")])
            let request = try #require(seen.withLock { $0 })
            #expect(request.method == .get)
            #expect(request.path == "/p ath/x")
            #expect(request.query.map(\.0) == ["a", "b", "a", "c"])
            #expect(request.query.map(\.1) == ["1", "x y", "2", "&="])
            #expect(request.queryValue("a") == "1")
            #expect(request.queryValues("a") == ["1", "2"])
            #expect(request.headers["x-thing"] == "Yes")
            #expect(request.rawTarget == "/p%20ath/x?a=1&b=x+y&a=2&c=%26%3D")
            #expect(request.httpVersion == "HTTP/1.1")
        }
    }

    @Test(
        "an absolute-form target keeps only its path and query; a :// later in the target is not a scheme",
        arguments: [
            ("http://example.com/a/b?x=1", "/a/b", [("x", "1")]),
            ("HTTPS://example.com:8443?x=1", "/", [("x", "1")]),
            ("http://example.com", "/", []),
            ("/p?u=http://x/y", "/p", [("u", "http://x/y")]),
            ("/redirect/http://x", "/redirect/http://x", []),
            ("/a:b//c", "/a:b//c", []),
        ] as [(String, String, [(String, String)])])
    func absoluteFormTargets(_ target: String, _ path: String, _ query: [(String, String)]) {
        let request = HTTPServerRequest(method: .get, target: target)
        #expect(request.path == path)
        #expect(request.query.map(\.0) == query.map(\.0))
        #expect(request.query.map(\.1) == query.map(\.1))
        #expect(request.rawTarget == target)
    }

    @Test("a target's path and query are split where a search by characters splits them")
    func targetsSplitAsCharacters() {
        // The split before searches by bytes: a `#` or `?` followed by a combining mark is one
        // character, and no delimiter.
        func reference(_ target: String) -> (path: String, query: String) {
            var rest = Substring(target)
            if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
            guard let mark = rest.firstIndex(of: "?") else { return (String(rest), "") }
            return (String(rest[..<mark]), String(rest[rest.index(after: mark)...]))
        }
        let alphabet: [Character] = ["/", "a", "?", "#", "=", "&", "%", "+", "é", "\u{301}", "😀", "x"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let count = Int.random(in: 0...12, using: &generator)
            let target = "/" + String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            let (path, query) = reference(target)
            let request = HTTPServerRequest(method: .get, target: target)
            let expected = HTTPServerRequest(method: .get, path: path, query: FormEncoding.decode(query))
            let decodedPath = FormEncoding.percentDecoded(path) ?? path
            #expect(request.path == decodedPath, "\(Array(target.utf8))")
            #expect(request.query.map(\.0) == expected.query.map(\.0), "\(Array(target.utf8))")
            #expect(request.query.map(\.1) == expected.query.map(\.1), "\(Array(target.utf8))")
        }
    }

    @Test("a form body is read by formValue, which falls back to the query")
    func formValues() async throws {
        let seen = Locked<HTTPServerRequest?>(nil)
        try await withServer(handler: recording(seen)) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            _ = try await connection.request(
                "POST", "/token?client_id=from-query&grant_type=ignored",
                headers: [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
                body: Data("grant_type=authorization_code&code=a%2Fb+c".utf8))
            let request = try #require(seen.withLock { $0 })
            #expect(request.method == .post)
            #expect(request.formValue("grant_type") == "authorization_code")
            #expect(request.formValue("code") == "a/b c")
            #expect(request.formValue("client_id") == "from-query")
            #expect(request.formValue("missing") == nil)
        }
    }

    @Test("200 concurrent requests from several tasks are all answered, each with its own answer")
    func concurrentRequests() async throws {
        // The first 20 handlers wait for one another: with handlers run one at a time (or on
        // libmicrohttpd's thread) this would never finish.
        let rendezvous = Rendezvous(count: 20)
        try await withServer(handler: { request in
            let id = request.queryValue("id") ?? "?"
            if let number = Int(id), number < 20 { await rendezvous.arrive() }
            return .text("answer \(id)")
        }) { server in
            let port = server.port
            let answers = try await withThrowingTaskGroup(of: [(Int, String)].self) { group in
                for task in 0..<10 {
                    // Each of ten tasks opens twenty connections at once.
                    group.addTask {
                        try await withThrowingTaskGroup(of: (Int, String).self) { inner in
                            for index in 0..<20 {
                                let id = index * 10 + task
                                inner.addTask {
                                    let connection = try await RawHTTPConnection.connect(port: port)
                                    return (id, try await connection.request("GET", "/work?id=\(id)").text)
                                }
                            }
                            var collected: [(Int, String)] = []
                            for try await answer in inner { collected.append(answer) }
                            return collected
                        }
                    }
                }
                var all: [(Int, String)] = []
                for try await part in group { all.append(contentsOf: part) }
                return all
            }
            #expect(answers.count == 200)
            #expect(Set(answers.map(\.0)) == Set(0..<200))
            for (id, text) in answers { #expect(text == "answer \(id)") }
        }
    }

    @Test("two requests on one connection are both answered (keep-alive)")
    func keepAlive() async throws {
        try await withServer(handler: Self.echo) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let first = try await connection.request("GET", "/one")
            let second = try await connection.request("POST", "/two", body: Data("hello".utf8))
            let third = try await connection.request("GET", "/three")
            #expect(first.text.hasPrefix("GET /one"))
            #expect(second.text == "POST /two\nbody 5")
            #expect(third.text.hasPrefix("GET /three"))
            #expect(first.header("Connection")?.lowercased() != "close")
        }
    }

    @Test("pipelined requests on one connection are answered in order")
    func pipelined() async throws {
        try await withServer(handler: Self.echo) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            try await connection.send(
                "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            guard case .response(let a) = try await connection.read(),
                case .response(let b) = try await connection.read()
            else {
                Issue.record("the server closed the connection")
                return
            }
            #expect(a.text.hasPrefix("GET /a"))
            #expect(b.text.hasPrefix("GET /b"))
        }
    }

    @Test("a body up to the limit is accepted, whole")
    func bodyAtLimit() async throws {
        try await withServer(.init(maxBodyBytes: 1000), handler: Self.echo) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let response = try await connection.request("POST", "/up", body: Data(repeating: 65, count: 1000))
            #expect(response.status == 200)
            #expect(response.text == "POST /up\nbody 1000")
        }
    }

    @Test("a declared body over the limit gets 413 and the server keeps serving")
    func declaredBodyTooLarge() async throws {
        let calls = Locked(0)
        try await withServer(.init(maxBodyBytes: 1000), handler: counting(calls, Self.echo)) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let response = try await connection.request("POST", "/up", body: Data(repeating: 65, count: 1001))
            #expect(response.status == 413)
            #expect(response.text.contains("1000 bytes"))
            #expect(response.header("Connection")?.lowercased() == "close")
            #expect(calls.withLock { $0 } == 0)
            let next = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await next.request("GET", "/after").status == 200)
        }
    }

    @Test("a chunked body that grows over the limit gets 413 and never reaches the handler")
    func chunkedBodyTooLarge() async throws {
        let calls = Locked(0)
        try await withServer(.init(maxBodyBytes: 1000), handler: counting(calls, Self.echo)) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let chunk = String(repeating: "B", count: 600)
            try await connection.send(
                "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n")
            guard case .response(let response) = try await connection.read() else {
                Issue.record("the server closed the connection without a 413")
                return
            }
            #expect(response.status == 413)
            #expect(calls.withLock { $0 } == 0)
            let next = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await next.request("GET", "/after").status == 200)
        }
    }

    /// Malformed requests, and whether a closed connection (with no answer) is acceptable:
    /// libmicrohttpd 0.9.75 closes the connection on a request line without a target instead
    /// of answering 400; everything else must get a 4xx answer.
    static let malformedRequests: [(String, Bool)] = [
        ("GARBAGE\r\n\r\n", true),
        ("GET\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n", false),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", false),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n", false),
        ("\u{01}\u{02}\u{03} / HTTP/1.1\r\n\r\n", false),
        ("G(E)T / HTTP/1.1\r\nHost: x\r\n\r\n", false),
    ]

    @Test(
        "a malformed request gets a 4xx answer, never reaches the handler, and the server keeps serving",
        arguments: malformedRequests)
    func malformed(_ request: String, mayJustClose: Bool) async throws {
        let calls = Locked(0)
        try await withServer(handler: counting(calls, Self.echo)) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            try await connection.send(request)
            switch try await connection.read() {
            case .response(let response):
                #expect((400..<500).contains(response.status))
            case .closed:
                #expect(mayJustClose, "the server closed the connection without an answer")
            }
            #expect(calls.withLock { $0 } == 0)
            let next = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await next.request("GET", "/after").status == 200)
        }
    }

    @Test("a request head larger than the limit gets a 4xx answer and the server keeps serving")
    func oversizedHeaders() async throws {
        try await withServer(.init(maxHeaderBytes: 4096), handler: Self.echo) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            let big = String(repeating: "v", count: 20_000)
            let outcome: RawHTTPConnection.Outcome
            do {
                try await connection.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
                outcome = try await connection.read()
            }
            guard case .response(let response) = outcome else {
                Issue.record("the server closed the connection without an answer")
                return
            }
            #expect(response.status == 431 || response.status == 400)
            let next = try await RawHTTPConnection.connect(port: server.port)
            #expect(try await next.request("GET", "/after", headers: [("X-Small", "fine")]).status == 200)
        }
    }

    @Test("a very long request line gets a 4xx answer")
    func oversizedRequestLine() async throws {
        try await withServer(.init(maxHeaderBytes: 4096), handler: Self.echo) { server in
            let connection = try await RawHTTPConnection.connect(port: server.port)
            try await connection.send("GET /\(String(repeating: "a", count: 20_000)) HTTP/1.1\r\nHost: x\r\n\r\n")
            guard case .response(let response) = try await connection.read() else {
                Issue.record("the server closed the connection without an answer")
                return
            }
            #expect(response.status == 414 || response.status == 400)
        }
    }
}

import Foundation
import Sesame
import SesameHTTPServer
import Testing

@testable import SesameCurl

/// What the echo server saw of a request.
struct Echo: Codable, Sendable {
    var method: String
    var target: String
    var headers: [[String]]
    var body: String

    func header(_ name: String) -> String? {
        headers.first { $0[0].caseInsensitiveCompare(name) == .orderedSame }?[1]
    }
}

/// A loopback HTTPServer that echoes requests, redirects, serves sized bodies and can stall,
/// and counts what it was asked for.
final class TestServer: Sendable {
    /// The paths requested, in order.
    final class PathLog: Sendable {
        let paths = Locked<[String]>([])
    }

    let server: HTTPServer
    private let log = PathLog()
    let stalled: AsyncStream<Void>

    init() throws {
        let log = self.log
        let (stalled, stalledContinuation) = AsyncStream.makeStream(of: Void.self)
        self.stalled = stalled
        server = HTTPServer(configuration: .init(stopGracePeriod: .milliseconds(200))) { request in
            log.paths.withLock { $0.append(request.path) }
            let parts = request.path.split(separator: "/").map(String.init)
            switch parts.first {
            case "redirect":
                // /redirect/<status>: to /echo, relative, as many servers do.
                return .redirect(to: URL(string: "/echo")!, status: Int(parts[1]) ?? 302)
            case "bytes":
                // /bytes/<count>: that many bytes, with Content-Length.
                return .text(String(repeating: "b", count: Int(parts[1]) ?? 0))
            case "headers":
                var response = HTTPServerResponse.text("ok")
                response.headers.add(name: "X-Custom-Header", value: "Mixed")
                response.headers.add(name: "Set-Cookie", value: "a=1")
                response.headers.add(name: "Set-Cookie", value: "b=2")
                return response
            case "delay":
                // /delay/<ms>: the echo, that many milliseconds late.
                // Not synchronisation: a server that answers late.
                try? await Task.sleep(for: .milliseconds(Int(parts[1]) ?? 0))
                return .text(request.rawTarget)
            case "stall":
                stalledContinuation.yield()
                // Not synchronisation: a server that does not answer (the test waits on `stalled`).
                try? await Task.sleep(for: .seconds(60))
                return .text("too late")
            default:
                let echo = Echo(
                    method: request.method.rawValue, target: request.rawTarget,
                    headers: request.headers.map { [$0.name, $0.value] },
                    body: String(decoding: request.body, as: UTF8.self))
                return .json(echo)
            }
        }
        try server.start()
    }

    func url(_ path: String) -> URL { server.url(path) }

    /// Every path requested so far, in order.
    var requestedPaths: [String] { log.paths.withLock { $0 } }

    func stop() async { await server.stop() }
}

@Suite("CurlTransport over HTTP")
struct CurlTransportTests {
    let transport = CurlTransport()

    private func echo(_ response: HTTPResponse) throws -> Echo {
        try JSONDecoder().decode(Echo.self, from: response.body)
    }

    @Test(
        "methods carry their headers and bodies",
        arguments: [
            (HTTPMethod.get, nil as String?), (.post, #"{"message":"hello"}"#), (.delete, #"{"id":"42"}"#),
            (.put, "name=Ada"), (.patch, "x"), (.post, ""), (.delete, nil),
        ])
    func methods(method: HTTPMethod, body: String?) async throws {
        let server = try TestServer()
        var request = HTTPRequest(
            method: method, url: server.url("/echo?fields=id,name"),
            headers: ["X-Trace": "t-1", "Authorization": "Bearer abc"], body: body.map { Data($0.utf8) })
        if body != nil { request.headers["Content-Type"] = "application/json" }
        let response = try await transport.send(request)
        await server.stop()

        #expect(response.status == 200)
        let echo = try echo(response)
        #expect(echo.method == method.rawValue)
        #expect(echo.target == "/echo?fields=id,name")
        #expect(echo.body == (body ?? ""))
        #expect(echo.header("x-trace") == "t-1")
        #expect(echo.header("authorization") == "Bearer abc")
        #expect(echo.header("user-agent")?.hasPrefix("Sesame libcurl/") == true)
        #expect(echo.header("expect") == nil)
        if body != nil {
            #expect(echo.header("content-type") == "application/json")
            #expect(echo.header("content-length") == String(body!.utf8.count))
        }
    }

    @Test("a body over the server's limit gets the server's 413, not a broken pipe")
    func oversizedUploadGets413() async throws {
        // 12 MiB is more than loopback's socket buffers hold, so the upload is still being written
        // when the server decides: it must read and drop the body rather than reset the connection.
        let server = HTTPServer(configuration: .init(maxBodyBytes: 1 << 20)) { _ in .text("accepted") }
        try server.start()
        let response = try await transport.send(
            HTTPRequest(
                method: .post, url: server.baseURL.appendingPathComponent("upload"),
                headers: ["Content-Type": "application/octet-stream"], body: Data(count: 12 << 20)))
        await server.stop()
        #expect(response.status == 413)
        #expect(String(decoding: response.body, as: UTF8.self).contains("larger than this server accepts"))
    }

    @Test("a body without a Content-Type goes without one, not as a form")
    func unlabelledBody() async throws {
        let server = try TestServer()
        let response = try await transport.send(
            HTTPRequest(method: .post, url: server.url("/echo"), body: Data("raw".utf8)))
        await server.stop()
        let echo = try echo(response)
        #expect(echo.body == "raw")
        #expect(echo.header("content-type") == nil)
    }

    @Test("HEAD gets the status and headers and no body")
    func head() async throws {
        let server = try TestServer()
        let response = try await transport.send(HTTPRequest(method: .head, url: server.url("/bytes/100")))
        await server.stop()
        #expect(response.status == 200)
        #expect(response.headers["content-length"] == "100")
        #expect(response.body.isEmpty)
    }

    @Test("100 concurrent requests each get their own answer")
    func concurrent() async throws {
        let server = try TestServer()
        let transport = self.transport
        let answers = try await withThrowingTaskGroup(of: (Int, Echo).self) { group in
            for index in 0..<100 {
                group.addTask {
                    let response = try await transport.send(
                        HTTPRequest(
                            method: index.isMultiple(of: 2) ? .get : .post, url: server.url("/echo?i=\(index)"),
                            headers: ["X-Index": "\(index)"],
                            body: index.isMultiple(of: 2) ? nil : Data("body \(index)".utf8)))
                    return (index, try JSONDecoder().decode(Echo.self, from: response.body))
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        await server.stop()
        #expect(answers.count == 100)
        for (index, echo) in answers {
            #expect(echo.target == "/echo?i=\(index)")
            #expect(echo.header("x-index") == "\(index)")
            #expect(echo.body == (index.isMultiple(of: 2) ? "" : "body \(index)"))
        }
    }

    @Test("eight connections opened for eight callers at once are kept through a lone request, and reused")
    func connectionsKeptBetweenCrowds() async throws {
        // libcurl's default cache keeps 4 idle connections for each transfer in the multi handle
        // when a connection is returned: after a lone request, 4 of the 8 were closed, and the
        // next crowd opened them again (about one request in twenty in `sesame-bench graph`).
        let listener = try RawListener(.keepAliveEcho)
        defer { listener.stop() }
        let transport = self.transport
        for round in 0..<3 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for caller in 0..<8 {
                    group.addTask {
                        // Answered 50 ms late, so that all eight are in flight at once.
                        let path = "/delay/50/\(round)/\(caller)"
                        let response = try await transport.send(HTTPRequest(url: listener.url(path)))
                        #expect(String(decoding: response.body, as: UTF8.self) == path)
                    }
                }
                try await group.waitForAll()
            }
            let lone = try await transport.send(HTTPRequest(url: listener.url("/lone/\(round)")))
            #expect(String(decoding: lone.body, as: UTF8.self) == "/lone/\(round)")
        }
        let accepted = listener.connectionsAccepted
        #expect(accepted == 8, "3 rounds of 8 callers and a lone one took \(accepted) connections")
    }

    @Test("cancelling the task aborts a transfer in flight with CancellationError, and the transport goes on")
    func cancellation() async throws {
        let server = try TestServer()
        let transport = self.transport
        // If cancellation did nothing, the request would end with a timeout error instead.
        let task = Task { try await transport.send(HTTPRequest(url: server.url("/stall"), timeout: .seconds(30))) }
        for await _ in server.stalled { break }  // the server has the request
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }

        let after = try await transport.send(HTTPRequest(url: server.url("/echo")))
        #expect(after.status == 200)
        await server.stop()
    }

    @Test(
        "a body over the limit fails with bodyTooLarge; one at the limit arrives",
        arguments: [(1024, true), (1025, false), (4096, false)])
    func bodyLimit(size: Int, accepted: Bool) async throws {
        let server = try TestServer()
        let limited = CurlTransport(configuration: .init(maximumResponseBodySize: 1024))
        let result: Result<HTTPResponse, any Error>
        do {
            result = .success(try await limited.send(HTTPRequest(url: server.url("/bytes/\(size)"))))
        } catch {
            result = .failure(error)
        }
        await server.stop()
        switch result {
        case .success(let response):
            #expect(accepted)
            #expect(response.body.count == size)
        case .failure(let error):
            #expect(!accepted)
            let transportError = try #require(error as? TransportError)
            #expect(transportError.kind == .bodyTooLarge)
            #expect(transportError.message.contains("/bytes/\(size)"))
        }
    }

    @Test("header names are matched without regard to case, both ways, and repeats are kept")
    func headerCase() async throws {
        let server = try TestServer()
        let response = try await transport.send(HTTPRequest(url: server.url("/headers")))
        let echoed = try await transport.send(HTTPRequest(url: server.url("/echo"), headers: ["x-lower-case": "v"]))
        await server.stop()
        #expect(response.headers["x-custom-header"] == "Mixed")
        #expect(response.headers["X-CUSTOM-HEADER"] == "Mixed")
        #expect(response.headers.values(for: "SET-COOKIE") == ["a=1", "b=2"])
        #expect(try echo(echoed).header("X-Lower-Case") == "v")
    }

    @Test("every header arrives as sent: empty values, UTF-8 values, long values and many of them")
    func headersAsSent() async throws {
        let server = try TestServer()
        let long = String(repeating: "t0ken", count: 200)
        var headers: HTTPHeaders = ["X-Empty": "", "X-Unicode": "café ☕", "Authorization": "Bearer \(long)"]
        for index in 0..<40 { headers.add(name: "X-Header-\(index)", value: "value \(index)") }
        let get = try echo(try await transport.send(HTTPRequest(url: server.url("/echo"), headers: headers)))
        let post = try echo(
            try await transport.send(
                HTTPRequest(method: .post, url: server.url("/echo"), headers: headers, body: Data("raw".utf8))))
        await server.stop()

        for echo in [get, post] {
            #expect(echo.header("x-empty") == "")
            #expect(echo.header("x-unicode") == "café ☕")
            #expect(echo.header("authorization") == "Bearer \(long)")
            #expect((0..<40).allSatisfy { echo.header("x-header-\($0)") == "value \($0)" })
        }
        // A body that names no Content-Type goes without one, and without Expect, however many
        // headers came before.
        #expect(post.header("content-type") == nil)
        #expect(post.header("expect") == nil)
        #expect(post.body == "raw")
    }

    @Test(
        "POST, PUT and DELETE redirects are returned, not followed, by default",
        arguments: [HTTPMethod.post, .put, .delete], [301, 302, 303, 307, 308])
    func unsafeRedirectsNotFollowed(method: HTTPMethod, status: Int) async throws {
        let server = try TestServer()
        let response = try await transport.send(
            HTTPRequest(method: method, url: server.url("/redirect/\(status)"), body: Data("secret=1".utf8)))
        await server.stop()
        #expect(response.status == status)
        #expect(response.headers["location"] == "/echo")
        #expect(server.requestedPaths == ["/redirect/\(status)"])
    }

    @Test("GET redirects are followed by default", arguments: [301, 302, 303, 307, 308])
    func getRedirectsFollowed(status: Int) async throws {
        let server = try TestServer()
        let response = try await transport.send(HTTPRequest(url: server.url("/redirect/\(status)")))
        await server.stop()
        #expect(response.status == 200)
        #expect(try echo(response).method == "GET")
        #expect(server.requestedPaths == ["/redirect/\(status)", "/echo"])
        #expect(response.headers["location"] == nil)  // the headers are the final response's
    }

    @Test("with allMethods, a 307 repeats the POST and its body")
    func allMethods() async throws {
        let server = try TestServer()
        let following = CurlTransport(configuration: .init(redirects: .allMethods))
        let response = try await following.send(
            HTTPRequest(method: .post, url: server.url("/redirect/307"), body: Data("a=1".utf8)))
        await server.stop()
        let echo = try echo(response)
        #expect(echo.method == "POST")
        #expect(echo.body == "a=1")
    }

    @Test("with never, even a GET gets its redirect back")
    func never() async throws {
        let server = try TestServer()
        let response = try await CurlTransport(configuration: .init(redirects: .never)).send(
            HTTPRequest(url: server.url("/redirect/302")))
        await server.stop()
        #expect(response.status == 302)
    }

    @Test("too many redirects fail with a message that says so")
    func tooManyRedirects() async throws {
        let server = try TestServer()
        var policy = CurlTransport.RedirectPolicy.safeMethodsOnly
        policy.maximumRedirects = 0
        let error = try await #require(throws: TransportError.self) {
            try await CurlTransport(configuration: .init(redirects: policy)).send(
                HTTPRequest(url: server.url("/redirect/302")))
        }
        await server.stop()
        #expect(error.message.contains("redirect"))
    }

    @Test("an explicit proxy is used for every request, and .direct reaches the server")
    func proxyPolicies() async throws {
        let server = try TestServer()
        let direct = CurlTransport(configuration: .init(proxy: .direct))
        #expect(try await direct.send(HTTPRequest(url: server.url("/echo"))).status == 200)
        let refusing = try RefusingPort()
        defer { refusing.release() }
        let proxied = CurlTransport(configuration: .init(proxy: .url("http://127.0.0.1:\(refusing.port)")))
        let error = try await #require(throws: TransportError.self) {
            try await proxied.send(HTTPRequest(url: server.url("/echo")))
        }
        await server.stop()
        #expect(error.kind == .connectionFailed)  // the (absent) proxy was tried, not the server
    }

    @Test("a proxy with exceptions: a host the list names goes direct, any other through the proxy")
    func proxyExceptions() async throws {
        let server = try TestServer()
        let refusing = try RefusingPort()
        defer { refusing.release() }
        let proxy = "http://127.0.0.1:\(refusing.port)"
        let exempt = CurlTransport(configuration: .init(proxy: .url(proxy, except: "localhost,127.0.0.1")))
        #expect(try await exempt.send(HTTPRequest(url: server.url("/echo"))).status == 200)
        let notExempt = CurlTransport(configuration: .init(proxy: .url(proxy, except: "example.com")))
        let error = try await #require(throws: TransportError.self) {
            try await notExempt.send(HTTPRequest(url: server.url("/echo")))
        }
        await server.stop()
        #expect(error.kind == .connectionFailed)
        #expect(
            CurlTransport.ProxyPolicy.url(proxy, except: "example.com").description.hasSuffix("except for example.com"))
    }
}

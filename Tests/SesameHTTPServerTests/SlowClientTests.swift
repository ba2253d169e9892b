import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Slow clients")
struct SlowClientTests {
    @Test("a client that dribbles its request head is closed at the head deadline, though each byte resets idleness")
    func dribbledHeadIsClosed() async throws {
        try await withServer(
            .init(connectionIdleTimeout: .seconds(30), requestHeadTimeout: .seconds(1)),
            handler: { _ in .text("ok") }
        ) { server in
            let port = server.port
            let elapsed = try await SlowClients.blocking { () -> Duration in
                let fd = try SlowClients.connect(port: port)
                defer { close(fd) }
                let started = ContinuousClock.now
                SlowClients.send(fd, "GET / HTTP/1.1\r\nHost: x\r\n")
                // A byte every 200 ms for up to 12 s; the server must end it long before.
                for _ in 0..<60 {
                    usleep(200_000)  // Not synchronisation: a client that dribbles its head
                    guard SlowClients.send(fd, "X") else { break }
                    var probe: UInt8 = 0
                    let peeked = recv(fd, &probe, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
                    if peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { break }
                }
                return ContinuousClock.now - started
            }
            #expect(elapsed < .seconds(8), "the dribbling connection stayed open \(elapsed)")
            // A well-behaved client is still served.
            let fd = try SlowClients.connect(port: port)
            defer { close(fd) }
            SlowClients.send(fd, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(SlowClients.readAll(fd)?.hasPrefix("HTTP/1.1 200") == true)
        }
    }

    @Test("a head that waits past the deadline for the server's held-up thread is answered, not closed")
    func headWaitingForTheServerIsAnswered() async throws {
        var configuration = HTTPServer.Configuration(
            connectionIdleTimeout: .seconds(30), requestHeadTimeout: .seconds(1))
        configuration.threads = 1
        let holding = DispatchSemaphore(value: 0)
        let server = HTTPServer(
            configuration: configuration,
            answering: { request in
                if request.path == "/hold" {
                    holding.signal()
                    // Not synchronisation: holds the server's only thread past the head deadline, as a
                    // loaded machine may.
                    usleep(2_500_000)
                }
                return .now(.text(request.path))
            })
        try server.start()
        let port = server.port
        // This connection is open, and its head deadline running, before the thread is held.
        let waiting = try await SlowClients.blocking { try SlowClients.connect(port: port) }
        #expect(await waitUntil { server.connectionCount == 1 }, "the server never saw the connection")
        let answers = try await SlowClients.blocking { () -> (held: String?, waiting: String?, inside: Bool) in
            defer { close(waiting) }
            let holder = try SlowClients.connect(port: port)
            defer { close(holder) }
            SlowClients.send(holder, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let inside = holding.wait(timeout: .now() + 60) == .success  // the server's thread is in /hold
            // The whole head, sent at once: it waits in the socket for the server, not the client.
            SlowClients.send(waiting, "GET /waiting HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return (SlowClients.readAll(holder), SlowClients.readAll(waiting), inside)
        }
        await server.stop()
        #expect(answers.inside, "the held request never reached its handler")
        #expect(answers.held?.hasPrefix("HTTP/1.1 200") == true)
        #expect(
            answers.waiting?.hasPrefix("HTTP/1.1 200") == true,
            "the waiting request got \(answers.waiting.map { "\"\($0.prefix(40))\"" } ?? "nothing")")
    }

    @Test("a kept-alive connection that dribbles its next head is closed at the idle timeout plus the head deadline")
    func dribbledNextHeadIsClosed() async throws {
        try await withServer(
            .init(connectionIdleTimeout: .seconds(1), requestHeadTimeout: .seconds(1)),
            handler: { _ in .text("ok") }
        ) { server in
            let port = server.port
            let (first, elapsed) = try await SlowClients.blocking { () -> (String, Duration) in
                let fd = try SlowClients.connect(port: port)
                defer { close(fd) }
                // One whole request, answered, on a connection kept alive.
                SlowClients.send(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(fd, &buffer, buffer.count, 0)
                let answer = String(decoding: buffer[0..<max(0, count)], as: UTF8.self)
                // Then the next head, a byte every 200 ms for up to 20 s: each byte resets
                // idleness, so only the deadline (1 s idle + 1 s head) can end it.
                let started = ContinuousClock.now
                SlowClients.send(fd, "GET /next HTTP/1.1\r\nHost: x\r\n")
                for _ in 0..<100 {
                    usleep(200_000)  // Not synchronisation: a client that dribbles its next head
                    guard SlowClients.send(fd, "X") else { break }
                    var probe: UInt8 = 0
                    let peeked = recv(fd, &probe, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
                    if peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { break }
                }
                return (answer, ContinuousClock.now - started)
            }
            #expect(first.hasPrefix("HTTP/1.1 200"), "\(first)")
            #expect(elapsed < .seconds(15), "the dribbling kept-alive connection stayed open \(elapsed)")
        }
    }

    @Test("a kept-alive connection used again promptly is served each time")
    func keptAliveReuse() async throws {
        try await withServer(
            .init(connectionIdleTimeout: .seconds(2), requestHeadTimeout: .seconds(1)),
            handler: { request in .text("ok \(request.path)") }
        ) { server in
            let port = server.port
            let answers = try await SlowClients.blocking { () -> [String] in
                let fd = try SlowClients.connect(port: port)
                defer { close(fd) }
                var answers: [String] = []
                // Past the 1 s head deadline in all, each request well within idle + head.
                for index in 0..<4 {
                    SlowClients.send(fd, "GET /\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    let count = recv(fd, &buffer, buffer.count, 0)
                    answers.append(String(decoding: buffer[0..<max(0, count)], as: UTF8.self))
                    usleep(700_000)  // Not synchronisation: a client that pauses between requests
                }
                return answers
            }
            for (index, answer) in answers.enumerated() {
                #expect(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix("ok /\(index)"), "\(answer)")
            }
        }
    }

    @Test("past the connection limit a client is answered 503 at once instead of waiting in the queue")
    func refusedPastLimit() async throws {
        try await withServer(.init(maxConnections: 8), handler: { _ in .text("ok") }) { server in
            let port = server.port
            let held = try await SlowClients.blocking { () -> [Int32] in
                let held = try (0..<8).map { _ in try SlowClients.connect(port: port) }
                for fd in held { SlowClients.send(fd, "GET / HTTP/1.1\r\n") }
                return held
            }
            let answer: String?
            do {
                defer { held.forEach { close($0) } }
                #expect(await waitUntil { server.connectionCount == 8 }, "open: \(server.connectionCount)")
                answer = try await SlowClients.blocking { () -> String? in
                    let extra = try SlowClients.connect(port: port, receiveTimeout: 15)
                    defer { close(extra) }
                    SlowClients.send(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    return SlowClients.readAll(extra)
                }
            }
            #expect(answer?.hasPrefix("HTTP/1.1 503") == true, "\(answer ?? "no answer within 15 s")")
            // Once they are gone, the server serves again.
            #expect(await waitUntil { server.connectionCount == 0 }, "the server never saw the clients go")
            let fd = try SlowClients.connect(port: port)
            defer { close(fd) }
            SlowClients.send(fd, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(SlowClients.readAll(fd)?.hasPrefix("HTTP/1.1 200") == true)
        }
    }

    @Test(
        "one client address cannot take more than its share of connections, on one server thread or several",
        arguments: [1, 2, 4])
    func perClientLimit(threads: Int) async throws {
        var configuration = HTTPServer.Configuration(maxConnectionsPerClient: 4)
        configuration.threads = threads
        try await withServer(configuration, handler: { _ in .text("ok") }) { server in
            let port = server.port
            let (fifth, other) = try await SlowClients.blocking { () -> (String?, String?) in
                let held = try (0..<4).map { _ in try SlowClients.connect(port: port, from: "127.0.0.2") }
                defer { held.forEach { close($0) } }
                for fd in held { SlowClients.send(fd, "GET / HTTP/1.1\r\n") }
                let extra = try SlowClients.connect(port: port, from: "127.0.0.2", receiveTimeout: 15)
                defer { close(extra) }
                SlowClients.send(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                let fifth = SlowClients.readAll(extra)
                let normal = try SlowClients.connect(port: port, from: "127.0.0.1")
                defer { close(normal) }
                SlowClients.send(normal, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return (fifth, SlowClients.readAll(normal))
            }
            // libmicrohttpd closes the fifth without a word; what matters is that it is not served.
            #expect(fifth != nil, "the fifth connection was left hanging")
            #expect(fifth?.contains(" 200 ") != true)
            #expect(other?.hasPrefix("HTTP/1.1 200") == true)
        }
    }

    @Test("the login redirect is received while 200 slow local connections are open")
    func receiverUnderSlowClients() async throws {
        try SlowClients.ensureDescriptors(500)
        let receiver = LoopbackRedirectReceiver()
        let held = SlowHeld()
        defer { held.closeAll() }
        let code = try await receiver.receiveRedirect(
            expectedState: "s", provider: "example",
            open: { redirectURI in
                let port = redirectURI.port!
                try await SlowClients.blocking {
                    for _ in 0..<200 {
                        let fd = try SlowClients.connect(port: port)
                        held.add(fd)
                        SlowClients.send(fd, "GET /callback?code=x")
                    }
                }
                _ = LoopbackRedirectReceiverTests.visit(
                    LoopbackRedirectReceiverTests.redirect(redirectURI, [("code", "real"), ("state", "s")]))
            },
            complete: { outcome, _ in
                guard case .code(let code) = outcome else { return "" }
                return code
            })
        #expect(code == "real")
        #expect(held.count == 200)
    }
}

/// Descriptors a test holds open and closes itself.
final class SlowHeld: Sendable {
    private let descriptors = Locked<[Int32]>([])
    func add(_ fd: Int32) { descriptors.withLock { $0.append(fd) } }
    var count: Int { descriptors.withLock { $0.count } }
    func closeAll() { for fd in descriptors.withLock({ $0 }) { close(fd) } }
}

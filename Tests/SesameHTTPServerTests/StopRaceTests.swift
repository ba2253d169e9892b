import Dispatch
import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Connected loopback sockets, opened before a stop and written to while it runs.
private final class ClientSockets: Sendable {
    let connections: [RawHTTPConnection]

    init(port: Int, count: Int) {
        connections = (0..<count).compactMap { _ in try? RawHTTPConnection.connectBlocking(port: port) }
    }

    /// Sends `text` on every socket, as fast as it goes, ignoring failures (the server may be
    /// closing them).
    func sendAll(_ text: String) {
        let bytes = Array(text.utf8)
        for connection in connections {
            _ = bytes.withUnsafeBytes {
                send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
        }
    }

    func closeAll() { for connection in connections { connection.shutDown() } }

    /// How many of the connections the server has closed (or reset): each is read to its end,
    /// up to the connections' read timeout. Blocks; call it off the cooperative pool.
    func closedByServer() -> Int {
        var chunk = [UInt8](repeating: 0, count: 4096)
        return connections.filter { connection in
            while true {
                let count = recv(connection.descriptor, &chunk, chunk.count, 0)
                if count == 0 { return true }
                if count < 0 { return errno == ECONNRESET }
            }
        }.count
    }
}

@Suite("Stopping the HTTP server while requests arrive")
struct StopRaceTests {
    /// Set in the process that ``stopDuringRefusals()`` starts to run ``rounds()``.
    static let inChild = ProcessInfo.processInfo.environment["SESAME_STOP_RACE_CHILD"] == "1"

    /// libmicrohttpd 0.9.75 answers a request it refuses itself (an unreadable Content-Length)
    /// by queuing its error answer and building that answer's head. Once `MHD_stop_daemon` has
    /// begun, queuing "succeeds" without setting the answer, and building its head dereferences
    /// nothing: a SIGSEGV on the daemon's thread ("MHD-single"), seen once in a CI run. The
    /// server now closes its connections, and waits for libmicrohttpd to have let them go,
    /// before it stops a daemon.
    ///
    /// The rounds run in a process of their own (this test binary, running only ``rounds()``),
    /// so that a crash is this test's failure, with its signal, not the end of the whole run.
    @Test(
        "stopping while clients send heads libmicrohttpd refuses itself never crashes the process",
        .enabled(if: !inChild))
    func stopDuringRefusals() async throws {
        let binary = try #require(Bundle.main.executableURL, "no path to this test binary")
        var environment = ProcessInfo.processInfo.environment
        environment["SESAME_STOP_RACE_CHILD"] = "1"
        let child = try await ProcessRunner.run(
            binary, ["--testing-library", "swift-testing", "--filter", "StopRaceTests/rounds"],
            environment: environment, killAfter: .seconds(600))
        let output = (child.standardOutput + child.standardError).suffix(4000)
        #expect(!child.wasKilled, "the rounds did not end within 10 minutes: \(output)")
        // 128 + a signal when it crashed; 1 when an expectation of the rounds failed.
        #expect(child.status == 0, "the rounds' process ended with status \(child.status): \(output)")
        #expect(output.contains("Test run with 1 test"), "the rounds did not run: \(output)")
    }

    /// The race itself, round after round. Each stop must also finish its work: the server is
    /// stopped, it holds no request's state, and every client's connection has ended.
    @Test(
        "rounds of stops while clients send refused heads",
        .enabled(if: inChild, "runs in the process that stopDuringRefusals starts"))
    func rounds() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["SESAME_STOP_RACE_ROUNDS"] ?? "") ?? 100
        for round in 0..<rounds {
            let server = HTTPServer(configuration: .init(connectionIdleTimeout: .seconds(30))) { _ in .text("ok") }
            try server.start()
            let clients = ClientSockets(port: server.port, count: 16)
            try #require(
                clients.connections.count == 16, "round \(round): only \(clients.connections.count) connected")
            let sending = DispatchSemaphore(value: 0)
            let sender = Thread {
                for _ in 0..<200 {
                    clients.sendAll("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
                }
                sending.signal()
            }
            sender.start()
            await server.stop()
            #expect(!server.isRunning, "round \(round)")
            #expect(server.liveRequestCount == 0, "round \(round): request state left after the stop")
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    sending.wait()
                    continuation.resume()
                }
            }
            let closed = try await RawHTTPConnection.blocking { clients.closedByServer() }
            #expect(closed == 16, "round \(round): \(16 - closed) of 16 connections left open after the stop")
            clients.closeAll()
        }
    }
}

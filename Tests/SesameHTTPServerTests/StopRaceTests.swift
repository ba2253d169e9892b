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
}

@Suite("Stopping the HTTP server while requests arrive")
struct StopRaceTests {
    /// libmicrohttpd 0.9.75 answers a request it refuses itself (an unreadable Content-Length)
    /// by queuing its error answer and building that answer's head. Once `MHD_stop_daemon` has
    /// begun, queuing "succeeds" without setting the answer, and building its head dereferences
    /// nothing: a SIGSEGV on the daemon's thread ("MHD-single"), seen once in a CI run. The
    /// server now closes its connections, and waits for libmicrohttpd to have let them go,
    /// before it stops a daemon.
    @Test("stopping while clients send heads libmicrohttpd refuses itself never crashes the process")
    func stopDuringRefusals() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["SESAME_STOP_RACE_ROUNDS"] ?? "") ?? 100
        for _ in 0..<rounds {
            let server = HTTPServer(configuration: .init(connectionIdleTimeout: .seconds(30))) { _ in .text("ok") }
            try server.start()
            let clients = ClientSockets(port: server.port, count: 16)
            let sending = DispatchSemaphore(value: 0)
            let sender = Thread {
                for _ in 0..<200 {
                    clients.sendAll("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
                }
                sending.signal()
            }
            sender.start()
            await server.stop()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    sending.wait()
                    continuation.resume()
                }
            }
            clients.closeAll()
        }
    }
}

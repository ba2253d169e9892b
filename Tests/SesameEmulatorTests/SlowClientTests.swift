import Foundation
import Sesame
import SesameCurl
import SesameTestSupport
import Testing

@testable import SesameFacebookEmulator

#if canImport(Glibc)
    import Glibc
#endif

@Suite("The emulator under slow clients")
struct EmulatorSlowClientTests {
    /// 400 here, beside the rest of the suite on a shared machine; `sesame-bench slowclients`
    /// runs the 2,000 of issue 17 alone and prints how long the normal client waited.
    @Test("a normal client is answered while 400 slow connections from other addresses are open")
    func twoThousandSlowConnections() async throws {
        // 400 here and 400 in the server, in this process.
        try SlowClients.ensureDescriptors(800)

        let emulator = try Emulator(configuration: EmulatorConfiguration())
        try await withStarted({ try await emulator.start() }, stop: { _ in await emulator.stop() }) { endpoints in
            let port = endpoints.baseURL.port!
            // Eight addresses of 50 connections each (an attacker with several hosts); each
            // sends part of a request head and then nothing, for as long as the test holds them.
            let held: [Int32] = await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    var descriptors: [Int32] = []
                    for index in 0..<400 {
                        guard let fd = try? SlowClients.connect(port: port, from: "127.0.0.\(2 + index / 50)") else {
                            break
                        }
                        SlowClients.send(fd, "GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                        descriptors.append(fd)
                    }
                    continuation.resume(returning: descriptors)
                }
            }
            defer { held.forEach { close($0) } }
            #expect(held.count == 400)

            // Answered, not left waiting behind the slow ones (the old server queued it until they
            // went); how fast is measured by `sesame-bench slowclients`.
            let transport = CurlTransport(configuration: .init(timeout: .seconds(30)))
            let started = ContinuousClock.now
            let response = try await transport.send(
                HTTPRequest(url: endpoints.baseURL.appendingPathComponent("__sesame/health")))
            let elapsed = ContinuousClock.now - started
            #expect(response.status < 500, "status \(response.status)")
            print("a normal request with 400 slow connections open took \(elapsed)")
        }
    }
}

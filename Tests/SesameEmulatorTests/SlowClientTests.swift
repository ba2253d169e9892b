import Foundation
import Sesame
import SesameCurl
import Testing

@testable import SesameEmulator

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP connection to 127.0.0.1:`port` from the loopback address `source`.
private func connectFrom(_ source: String, port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr(source)
    var remote = sockaddr_in()
    remote.sin_family = sa_family_t(AF_INET)
    remote.sin_port = in_port_t(UInt16(port).bigEndian)
    remote.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    let connected = withUnsafePointer(to: &remote) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0, connected == 0 else {
        close(fd)
        return -1
    }
    return fd
}

@Suite("The emulator under slow clients")
struct EmulatorSlowClientTests {
    /// 400 here, beside the rest of the suite on a shared machine; `sesame-bench slowclients`
    /// runs the 2,000 of issue 17 alone and prints how long the normal client waited.
    @Test("a normal client is answered while 400 slow connections from other addresses are open")
    func twoThousandSlowConnections() async throws {
        // 400 here and 400 in the server, in this process.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 2_000 {
            StandardStreams.err(
                Data("raising the soft descriptor limit to \(min(limit.rlim_max, 8_192))\n".utf8))
            limit.rlim_cur = min(limit.rlim_max, 8_192)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= 2_000, "this test needs 2,000 descriptors; the hard limit is \(limit.rlim_max)")

        let emulator = try Emulator(configuration: EmulatorConfiguration())
        let endpoints = try await emulator.start()
        let port = endpoints.baseURL.port!
        // Eight addresses of 50 connections each (an attacker with several hosts); each
        // sends part of a request head and then nothing, for as long as the test holds them.
        let held: [Int32] = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var descriptors: [Int32] = []
                for index in 0..<400 {
                    let fd = connectFrom("127.0.0.\(2 + index / 50)", port: port)
                    guard fd >= 0 else { break }
                    _ = "GET /me HTTP/1.1\r\nHost: 127.0.0.1\r\n".withCString {
                        send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL))
                    }
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
        await emulator.stop()
    }
}

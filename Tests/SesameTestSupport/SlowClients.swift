import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Raw loopback sockets for slow-client tests: each connects from a chosen loopback source
/// address, so that per-address limits can be exercised on one machine.
package enum SlowClients {
    package struct Failure: Error, CustomStringConvertible { package var description: String }

    /// Makes sure this process may open `count` more descriptors, raising the soft limit up to
    /// the hard one when needed (said on standard error when it does).
    package static func ensureDescriptors(_ count: Int) throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur < rlim_t(count + 256) else { return }
        let wanted = min(limit.rlim_max, rlim_t(count + 1024))
        StandardStreams.err(
            Data("raising the soft descriptor limit from \(limit.rlim_cur) to \(wanted)\n".utf8))
        limit.rlim_cur = wanted
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur >= rlim_t(count + 256) else {
            throw Failure(
                description: "this test needs \(count + 256) descriptors; the hard limit is \(limit.rlim_max)")
        }
    }

    /// A blocking TCP connection to 127.0.0.1:`port` from `source` (any 127.x.y.z address).
    package static func connect(port: Int, from source: String = "127.0.0.1", receiveTimeout: Int = 30) throws -> Int32
    {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        let bound = Sockets.bind(fd, to: Sockets.ipv4(source))
        let connected = Sockets.connect(fd, port: port)
        guard bound, connected else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "connect from \(source): \(reason)")
        }
        var wait = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Sends `text`; false when the connection is gone.
    @discardableResult
    package static func send(_ fd: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Reads until the server closes or the receive timeout passes; nil on a timeout with nothing read.
    package static func readAll(_ fd: Int32) -> String? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                received += buffer[0..<count]
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && received.isEmpty { return nil }
            return String(decoding: received, as: UTF8.self)
        }
    }

    /// A blocking body run on a thread of its own.
    package static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}

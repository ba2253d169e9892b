import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Plain sockets for tests that need a connection or a listener of their own: the address
/// juggling of bind, connect and getsockname in one place.
package enum Sockets {
    /// A socket that could not be set up, and why.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The IPv4 address `host` (a dotted quad) and `port` (0: any).
    package static func ipv4(_ host: String = "127.0.0.1", port: Int = 0) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// The IPv6 address `host` (a literal without brackets) and `port`.
    package static func ipv6(_ host: String, port: Int) -> sockaddr_in6 {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET6, host, &address.sin6_addr)
        return address
    }

    /// Calls `body` with `address` as the generic `sockaddr` that bind, connect and getsockname
    /// take, and its length (which getsockname may change).
    package static func withGeneric<Address, T>(
        _ address: inout Address, _ body: (UnsafeMutablePointer<sockaddr>, inout socklen_t) -> T
    ) -> T {
        var length = socklen_t(MemoryLayout<Address>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, &length) }
        }
    }

    /// Binds `descriptor` to `address`; true when it did.
    package static func bind<Address>(_ descriptor: Int32, to address: Address) -> Bool {
        var address = address
        return withGeneric(&address) { Glibc.bind(descriptor, $0, $1) } == 0
    }

    /// Connects `descriptor` to `host` (an IPv4 or IPv6 literal) and `port`; true when it did.
    package static func connect(_ descriptor: Int32, host: String = "127.0.0.1", port: Int) -> Bool {
        if host.contains(":") {
            var address = ipv6(host, port: port)
            return withGeneric(&address) { Glibc.connect(descriptor, $0, $1) } == 0
        }
        var address = ipv4(host, port: port)
        return withGeneric(&address) { Glibc.connect(descriptor, $0, $1) } == 0
    }

    /// A TCP socket bound to 127.0.0.1 on a port the kernel picks, listening with `backlog`
    /// (nil: not listening), and that port.
    package static func bindLoopback(listening backlog: Int32? = 64) throws -> (descriptor: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = ipv4()
        let ok = withGeneric(&address) { generic, length in
            Glibc.bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
        }
        guard ok, backlog.map({ listen(fd, $0) == 0 }) ?? true else {
            let error = errno
            close(fd)
            throw POSIXError(.init(rawValue: error) ?? .EIO)
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port on 127.0.0.1 that was free a moment ago (bound, then closed again). Another
    /// process may take it before the caller does.
    package static func unusedPort() throws -> Int {
        let (socket, port) = try bindLoopback(listening: nil)
        close(socket)
        return port
    }

    /// A Unix-domain stream socket listening at `path` with `backlog`.
    package static func listenUnix(path: String, backlog: Int32) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var name = sockaddr_un()
        name.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &name.sun_path) { buffer in
            for (index, byte) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
        }
        guard descriptor >= 0, bind(descriptor, to: name), listen(descriptor, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw Failure(description: "could not listen on \(path): \(reason)")
        }
        return descriptor
    }
}

/// A loopback TCP port that accepts connections into its backlog and never answers: a server
/// that hangs, or a port in use. ``stop()`` closes it.
package final class SilentListener: Sendable {
    package let port: Int
    private let descriptor: Int32

    /// Listens on a port the kernel picks.
    package init() throws { (descriptor, port) = try Sockets.bindLoopback() }

    /// Closes the socket.
    package func stop() { close(descriptor) }
}

/// A Unix socket that accepts connections (the kernel completes them) and never says a word: a
/// D-Bus session bus that never answers. ``stop()`` closes and removes it.
package final class SilentUnixSocket: Sendable {
    package let directory: URL
    /// Its D-Bus address, `unix:path=…`.
    package let address: String
    private let descriptor: Int32

    /// Listens in a new directory under /tmp (short, as a socket path must be).
    package init() throws {
        directory = URL(fileURLWithPath: "/tmp").appending(path: "sesame-silent-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appending(path: "bus").path
        address = "unix:path=\(path)"
        do {
            descriptor = try Sockets.listenUnix(path: path, backlog: 64)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Closes the socket and removes it.
    package func stop() {
        close(descriptor)
        try? FileManager.default.removeItem(at: directory)
    }
}

// The socket constants (SOCK_STREAM, ...) are seen through libmicrohttpd's shim as well as Glibc,
// and Swift gives them to one of the two: a file using them imports both.
internal import CMicroHTTPD
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A bound, listening TCP socket, made here rather than by libmicrohttpd so that a failure
/// can say why (`errno`) and port 0 can report the port the system chose.
struct ListenSocket {
    /// The file descriptor; libmicrohttpd owns it once its daemon starts.
    var descriptor: Int32
    /// The port bound.
    var port: Int
    /// Whether it is an IPv6 socket.
    var isIPv6: Bool

    /// An IPv4 or IPv6 address literal, parsed.
    enum Address {
        case v4(in_addr)
        case v6(in6_addr)

        init?(_ host: String) {
            var host = host
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            var v4 = in_addr()
            if inet_pton(AF_INET, host, &v4) == 1 {
                self = .v4(v4)
                return
            }
            var v6 = in6_addr()
            if inet_pton(AF_INET6, host, &v6) == 1 {
                self = .v6(v6)
                return
            }
            return nil
        }

        static var ipv6Loopback: Address { Address("::1")! }

        var isIPv6: Bool {
            if case .v6 = self { return true }
            return false
        }
    }

    /// Makes a socket on `address`:`port` (0: any free port) and starts listening.
    static func open(_ address: Address, port: Int, backlog: Int32, display: String) throws -> ListenSocket {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw HTTPServerError.bindFailed(display, reason: "socket() failed: \(String(cString: strerror(errno)))")
        }
        var success = false
        defer { if !success { close(descriptor) } }

        var yes: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        // Restarting on the same port must not wait for old connections' TIME_WAIT; on Linux
        // this never lets two servers listen on one port.
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, size)
        if address.isIPv6 { _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &yes, size) }

        let bound: Int32
        switch address {
        case .v4(let host):
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = in_port_t(UInt16(port).bigEndian)
            socketAddress.sin_addr = host
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6(let host):
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = in_port_t(UInt16(port).bigEndian)
            socketAddress.sin6_addr = host
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        guard bound == 0 else {
            let error = errno
            if error == EADDRINUSE { throw HTTPServerError.addressInUse(display) }
            throw HTTPServerError.bindFailed(display, reason: "bind() failed: \(String(cString: strerror(error)))")
        }
        guard listen(descriptor, backlog) == 0 else {
            throw HTTPServerError.bindFailed(display, reason: "listen() failed: \(String(cString: strerror(errno)))")
        }
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)

        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            throw HTTPServerError.bindFailed(
                display, reason: "getsockname() failed: \(String(cString: strerror(errno)))")
        }
        let boundPort: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if address.isIPv6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        }
        success = true
        return ListenSocket(descriptor: descriptor, port: Int(boundPort), isIPv6: address.isIPv6)
    }
}

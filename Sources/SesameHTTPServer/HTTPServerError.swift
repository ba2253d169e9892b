import Foundation

/// A server that could not start.
public struct HTTPServerError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    private enum Code: Hashable {
        case addressInUse, invalidHost, invalidPort, bindFailed, daemonFailed, alreadyStarted, libraryUnavailable
    }
    private let code: Code
    /// The address the server was asked to listen on, such as `127.0.0.1:8080`.
    public let address: String
    /// The system's reason, when there is one (from `errno`).
    public let reason: String?

    /// Another program (or server) already listens on the address.
    public static func addressInUse(_ address: String) -> Self {
        Self(code: .addressInUse, address: address, reason: nil)
    }
    /// The host is not an IPv4 or IPv6 address literal.
    public static func invalidHost(_ host: String) -> Self { Self(code: .invalidHost, address: host, reason: nil) }
    /// The port is not between 0 and 65535 (`address` holds the port asked for).
    public static func invalidPort(_ port: Int) -> Self { Self(code: .invalidPort, address: String(port), reason: nil) }
    /// The listening socket could not be made, bound or listened on.
    public static func bindFailed(_ address: String, reason: String) -> Self {
        Self(code: .bindFailed, address: address, reason: reason)
    }
    /// libmicrohttpd refused to start its daemon.
    public static func daemonFailed(_ address: String) -> Self {
        Self(code: .daemonFailed, address: address, reason: nil)
    }
    /// libmicrohttpd, which the server runs on, could not be loaded (`reason` says why and
    /// what to install).
    public static func libraryUnavailable(_ address: String, reason: String) -> Self {
        Self(code: .libraryUnavailable, address: address, reason: reason)
    }
    /// `start()` was called on a server that was already started (a server starts once).
    public static func alreadyStarted(_ address: String) -> Self {
        Self(code: .alreadyStarted, address: address, reason: nil)
    }

    public var description: String {
        switch code {
        case .addressInUse:
            return "Cannot listen on \(address): the address is already in use by another program. "
                + "Stop that program, choose another port, or use port 0 to let the system pick a free one."
        case .invalidHost:
            return "Cannot listen on '\(address)': the host must be an IPv4 or IPv6 address such as 127.0.0.1 or ::1, "
                + "not a name."
        case .invalidPort:
            return "Cannot listen on port \(address): a port is a number from 1 to 65535, or 0 to let the system "
                + "pick a free one."
        case .bindFailed:
            return "Cannot listen on \(address): \(reason ?? "unknown error")."
        case .daemonFailed:
            return "Cannot listen on \(address): libmicrohttpd could not start its server thread "
                + "(out of memory or threads?)."
        case .alreadyStarted:
            return "The server on \(address) was already started; make a new HTTPServer to listen again."
        case .libraryUnavailable:
            return "Cannot listen on \(address): \(reason ?? "libmicrohttpd could not be loaded")."
        }
    }

    /// The same sentence as ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }
}

import Foundation
import Sesame
import Synchronization

/// A small embedded HTTP/1.1 server on libmicrohttpd, for loopback use: login redirects, the
/// emulator, test servers.
///
/// ```swift
/// let server = HTTPServer { request in
///     request.path == "/hello" ? .text("hi \(request.queryValue("name") ?? "there")") : .text("no", status: 404)
/// }
/// try server.start()                        // port 0: the system picks a free port
/// print(server.baseURL)                     // http://127.0.0.1:43121
/// await server.stop()
/// ```
///
/// libmicrohttpd parses HTTP on its own thread (epoll on Linux). An `async` handler runs in a
/// Swift task, never on that thread, so a slow handler holds up only its own connection; a
/// handler made with ``init(configuration:answering:)`` runs on that thread and may answer at
/// once, which is several times cheaper for a handler that only computes (``HTTPServerAnswer``).
/// Keep-alive and concurrent connections work as in any HTTP/1.1 server. A malformed request
/// gets libmicrohttpd's own error answer (400, 414 or 431) and never reaches the handler.
public final class HTTPServer: Sendable {
    /// How a server listens and what it accepts.
    public struct Configuration: Sendable {
        /// The IPv4 or IPv6 address to listen on; `127.0.0.1` unless told otherwise. A name
        /// such as `localhost` is not accepted, so nothing depends on name resolution.
        public var host: String
        /// The port; 0 lets the system pick a free one (read it back from ``HTTPServer/port``).
        public var port: Int
        /// Whether to listen on `::1` too, on the same port, for clients that resolve
        /// `localhost` to IPv6 first.
        public var alsoListenOnIPv6Loopback: Bool
        /// The most connections open at once; one more is answered `503 Service Unavailable`
        /// and closed at once (past a small headroom, more wait in the system's listen queue).
        public var maxConnections: Int
        /// The most connections open at once from one client address; more are closed at once.
        /// 0: no limit (a loopback login receiver shares its address with every local program).
        public var maxConnectionsPerClient: Int
        /// How long a new connection may take to send its first request head (request line and
        /// header fields). Unlike ``connectionIdleTimeout`` it is not reset by each byte, so a
        /// client that dribbles its head cannot hold a connection. After each request, a
        /// kept-alive connection has ``connectionIdleTimeout`` plus this to send its next whole
        /// head (a silent one is closed at the idle timeout first, as always). A head whose bytes
        /// have arrived but wait unread for a server thread that is held up is the server's
        /// delay, not the client's: that connection is left open until they are read. Zero or
        /// less (the default): no limit; the emulator and the login receiver set 10 s.
        public var requestHeadTimeout: Duration
        /// About the largest request head (request line and header fields) accepted; a larger
        /// one gets libmicrohttpd's error answer. It sizes libmicrohttpd's per-connection
        /// memory (twice this, at least 4 KiB); values above ``largestHeaderLimit`` count as it.
        public var maxHeaderBytes: Int
        /// The most ``maxHeaderBytes`` can be: 1 MiB (libmicrohttpd reserves twice the limit for
        /// every connection, so a larger one would fail to allocate).
        public static let largestHeaderLimit = 1 << 20
        /// The largest request body accepted; a larger one gets `413 Content Too Large` and
        /// the connection is closed.
        public var maxBodyBytes: Int
        /// How long a connection may sit without sending anything before it is closed
        /// (rounded up to whole seconds; zero or less: never). A request whose handler is
        /// running is not idle.
        public var connectionIdleTimeout: Duration
        /// How long ``HTTPServer/stop()`` waits for requests being handled before it cancels
        /// their handlers and closes their connections.
        public var stopGracePeriod: Duration
        /// How many threads libmicrohttpd reads and writes connections on (1 by default). More
        /// than one lets a handler that answers on the server's thread
        /// (``HTTPServer/init(configuration:answering:)``) use more than one core: one more
        /// thread then accepts the connections and hands them to the serving threads in turn, so
        /// a burst of connections is shared rather than taken by the first thread awake. Each
        /// serving thread counts ``maxConnectionsPerClient`` for itself and gets its share of it
        /// (rounded up): a client's connections go round the threads, so it reaches the limit,
        /// rounded up to a multiple of the threads.
        public var threads: Int = 1

        /// Creates a configuration.
        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            alsoListenOnIPv6Loopback: Bool = false,
            maxConnections: Int = 512,
            maxHeaderBytes: Int = 16 * 1024,
            maxBodyBytes: Int = 1024 * 1024,
            connectionIdleTimeout: Duration = .seconds(30),
            stopGracePeriod: Duration = .seconds(10),
            maxConnectionsPerClient: Int = 0,
            requestHeadTimeout: Duration = .zero
        ) {
            self.host = host
            self.port = port
            self.alsoListenOnIPv6Loopback = alsoListenOnIPv6Loopback
            self.maxConnections = maxConnections
            self.maxConnectionsPerClient = maxConnectionsPerClient
            self.requestHeadTimeout = requestHeadTimeout
            self.maxHeaderBytes = maxHeaderBytes
            self.maxBodyBytes = maxBodyBytes
            self.connectionIdleTimeout = connectionIdleTimeout
            self.stopGracePeriod = stopGracePeriod
        }
    }

    private enum Lifecycle {
        case idle
        case running(ServerCore)
        case stopped(ServerCore)
    }

    /// The configuration the server was made with.
    public let configuration: Configuration
    private let handler: @Sendable (HTTPServerRequest) -> HTTPServerAnswer
    private let lifecycle = Locked(Lifecycle.idle)

    /// Creates a server that answers every request with `handler`, in a task of its own. Call
    /// ``start()`` to listen.
    public init(
        configuration: Configuration = .init(),
        handler: @escaping @Sendable (HTTPServerRequest) async -> HTTPServerResponse
    ) {
        self.configuration = configuration
        self.handler = { request in .later { await handler(request) } }
    }

    /// Creates a server whose `handler` runs on the server's own thread and answers at once
    /// (``HTTPServerAnswer/now(_:)``) or hands work that may wait to a task
    /// (``HTTPServerAnswer/later(_:)``). Call ``start()`` to listen.
    ///
    /// For handlers that answer in microseconds: an answer given now costs no task and no
    /// suspension of the connection, but the server serves no other connection meanwhile.
    public init(
        configuration: Configuration = .init(),
        answering handler: @escaping @Sendable (HTTPServerRequest) -> HTTPServerAnswer
    ) {
        self.configuration = configuration
        self.handler = handler
    }

    deinit {
        let core = lifecycle.withLock { state -> ServerCore? in
            guard case .running(let core) = state else { return nil }
            return core
        }
        core?.stopNow()
    }

    /// Binds the listening socket(s) and starts serving. A server starts once.
    ///
    /// - Throws: ``HTTPServerError`` when the address is in use, is not an address literal,
    ///   cannot be bound, or the server was already started.
    public func start() throws {
        try lifecycle.withLock { state in
            guard case .idle = state else {
                throw HTTPServerError.alreadyStarted("\(configuration.host):\(configuration.port)")
            }
            state = .running(try ServerCore.start(configuration, handler: handler))
        }
    }

    /// The port the server listens on: the one the system chose when configured with 0.
    /// Before ``start()`` it is the configured port.
    public var port: Int {
        lifecycle.withLock { state in
            switch state {
            case .idle: configuration.port
            case .running(let core): core.port
            case .stopped(let core): core.port
            }
        }
    }

    /// Whether the server is listening.
    public var isRunning: Bool {
        lifecycle.withLock { state in
            if case .running = state { return true }
            return false
        }
    }

    /// How many client connections are open now (0 when not running).
    public var connectionCount: Int {
        let core = lifecycle.withLock { state -> ServerCore? in
            guard case .running(let core) = state else { return nil }
            return core
        }
        return core?.connectionCount ?? 0
    }

    /// How many requests the server holds state for (received, being handled or being
    /// answered); zero after ``stop()``. For tests that look for leaks.
    package var liveRequestCount: Int {
        lifecycle.withLock { state in
            switch state {
            case .idle: 0
            case .running(let core), .stopped(let core): core.liveContexts.value.load(ordering: .relaxed)
            }
        }
    }

    /// `http://<host>:<port>`, with `127.0.0.1` for a server listening on every address.
    public var baseURL: URL {
        var host = configuration.host
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        return URL(string: "http://\(host):\(port)")!
    }

    /// `baseURL` with `path` (and any query in it) appended. Characters a URL cannot hold as
    /// they are (a space, a quote, a `%` not followed by two hex digits, non-ASCII text) are
    /// percent-encoded, so any string gives a URL: `url("/a b")` is `http://127.0.0.1:port/a%20b`.
    public func url(_ path: String) -> URL {
        let path = path.hasPrefix("/") ? path : "/" + path
        if let url = URL(string: baseURL.absoluteString + path) { return url }
        return URL(string: baseURL.absoluteString + Self.percentEncoded(path)) ?? baseURL
    }

    /// `text` with every byte outside RFC 3986's unreserved, reserved and `%XX` forms encoded.
    static func percentEncoded(_ text: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=".utf8)
        let hex = Set("0123456789ABCDEFabcdef".utf8)
        let bytes = Array(text.utf8)
        var output = ""
        for (index, byte) in bytes.enumerated() {
            let escapes =
                byte == UInt8(ascii: "%") && index + 2 < bytes.count && hex.contains(bytes[index + 1])
                && hex.contains(bytes[index + 2])
            if allowed.contains(byte) || escapes {
                output.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let digits = Array("0123456789ABCDEF")
                output += "%\(digits[Int(byte >> 4)])\(digits[Int(byte & 0x0F)])"
            }
        }
        return output
    }

    /// Stops the server: no new connection is accepted, requests being handled are answered
    /// (for up to ``Configuration/stopGracePeriod``; then their handlers are cancelled and
    /// their connections closed), and every connection is closed. Calling it again, or on a
    /// server never started, does nothing.
    public func stop() async {
        let core = lifecycle.withLock { state -> ServerCore? in
            guard case .running(let core) = state else { return nil }
            state = .stopped(core)
            return core
        }
        await core?.stop(gracePeriod: configuration.stopGracePeriod)
    }
}

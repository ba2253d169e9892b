import Foundation
import Sesame

/// Sesame's default `HTTPTransport`, built on libcurl.
///
/// One `CurlTransport` owns one libcurl multi handle and one thread that waits on its sockets:
/// requests from any number of tasks run side by side and resume their callers when they
/// finish, and no blocking call runs on Swift's cooperative thread pool, with one bounded
/// exception that pays for itself: a lone caller (nothing else in flight) whose previous
/// request was answered within 500 µs waits for the answer on its own thread for at most
/// 500 µs, which spares a fast server's answers two thread hand-overs. A slow server is never
/// waited for that way. Connections (and, for HTTPS, TLS sessions and DNS answers) are kept
/// and reused across requests; HTTP/2 is used over TLS when the server offers it. Create one
/// transport and share it; each one costs a thread and its own connection pool. Loops of many
/// small requests can run on that thread, with no hand-over per request: see ``executor``.
///
/// ```swift
/// let transport = CurlTransport()
/// let response = try await transport.send(HTTPRequest(url: URL(string: "https://graph.facebook.com/me")!))
/// ```
///
/// The defaults are in ``Configuration``: a 10 s connect timeout, a 60 s total timeout, a
/// 16 MiB response body limit, redirects followed for `GET` and `HEAD` only, TLS certificates
/// verified against the system's CA bundle, and proxies taken from the environment as libcurl
/// reads it.
///
/// Cancelling the calling task aborts the transfer and `send` throws `CancellationError`.
/// Failures below HTTP throw `TransportError` carrying libcurl's own message; any HTTP
/// status, 4xx and 5xx included, is returned as a response.
public final class CurlTransport: HTTPTransport {
    /// The settings every request of this transport uses.
    public let configuration: Configuration
    let engine: CurlEngine

    /// Creates a transport and starts its libcurl thread.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.engine = CurlEngine(configuration: configuration)
    }

    /// A transport whose lone callers wait on their own thread for up to `inlineBudget`, once it
    /// has had one caller at a time for `quietPeriod` (tests use long ones, so that a loaded
    /// machine cannot turn the path they test off, or on).
    init(
        configuration: Configuration = Configuration(), inlineBudget: Duration,
        quietPeriod: Duration = CurlEngine.defaultQuietPeriod
    ) {
        self.configuration = configuration
        self.engine = CurlEngine(configuration: configuration, inlineBudget: inlineBudget, quietPeriod: quietPeriod)
    }

    deinit {
        engine.shutDown()
    }

    /// The transport's own thread as a task executor (SE-0417): tasks that prefer it run their
    /// code there, between the thread's rounds of socket work.
    ///
    /// By default a caller's task runs on Swift's global pool, and every answer is handed from
    /// the transport's thread to a pool thread, which must be woken. A loop of many small
    /// requests (a crawler, a benchmark, a server calling an API for each of its requests) can
    /// instead run on this executor, as an event loop's callers do in SwiftNIO: an answer then
    /// resumes its caller on the thread that read it, and the caller's next request starts in
    /// the same round, with no thread hand-over either way. What it buys: `sesame-bench graph`, 8
    /// callers, 19,891–21,543 Graph calls a second on it against 13,519–15,167 through the pool.
    ///
    /// ```swift
    /// try await withTaskExecutorPreference(transport.executor) {
    ///     for id in ids { try await graph.get(id) }
    /// }
    /// ```
    ///
    /// What runs here holds up every request of this transport while it runs: keep long
    /// computations and blocking calls (file I/O, semaphores, `sleep`) off it. A lone caller
    /// never waits for its answer inline on this thread. After the transport is gone, tasks that
    /// still prefer it run on Dispatch's global queue.
    public var executor: any TaskExecutor { engine }

    /// Sends `request` and returns the response; see ``CurlTransport`` for the rules.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled;
    ///   `TransportError` when no full response arrived (DNS, connect, TLS, timeouts,
    ///   a body over ``Configuration/maximumResponseBodySize``, an invalid request).
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        // Logged at debug for the app's handler, if any: method, host, path, status, duration.
        try await SesameLogging.exchange(request) { try await perform(request) }
    }

    private func perform(_ request: HTTPRequest) async throws -> HTTPResponse {
        try Task.checkCancellation()
        let transfer = try CurlTransfer(request: request, configuration: configuration)
        let engine = self.engine
        try await withTaskCancellationHandler {
            // A lone caller on a fast connection gets its answer here, on its own thread, within
            // CurlEngine.inlineBudget; everyone else waits for the engine thread to resume them.
            if engine.start(transfer) && engine.driveInline(transfer), let result = transfer.result {
                return try result.get()
            }
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                engine.park(transfer, continuation: continuation)
            }
        } onCancel: {
            engine.cancel(transfer)
        }
        return transfer.response()
    }

    /// The version of the libcurl this process runs with, such as `7.88.1`.
    public static var libcurlVersion: String { CurlGlobal.versionNumber }

    /// The `User-Agent` sent by default: `Sesame libcurl/<version>`.
    public static var defaultUserAgent: String { "Sesame libcurl/\(CurlGlobal.versionNumber)" }
}

extension CurlTransport {
    /// The settings of a ``CurlTransport``.
    ///
    /// Every default is chosen for calling identity providers' APIs from a desktop program:
    /// fail rather than hang, never follow a redirect that would re-send a body or downgrade
    /// HTTPS, never trust an unverified certificate unless told so in words that stand out in
    /// review.
    public struct Configuration: Sendable, Hashable {
        /// The longest resolving the name and connecting (TCP and TLS) may take. Default: 10 s.
        public var connectTimeout: Duration

        /// The longest a whole request may take, from start to the last byte of the body, when
        /// `HTTPRequest.timeout` is `nil`. Default: 60 s. A server that accepts and
        /// never answers gets a `TransportError.Kind.timedOut` error after this long.
        public var timeout: Duration

        /// The largest response body accepted, in bytes, after decompression. Default: 16 MiB.
        ///
        /// A larger body stops the transfer (as soon as the `Content-Length` says so, or when
        /// the limit is crossed while reading) and `send` throws a
        /// `TransportError.Kind.bodyTooLarge` error.
        public var maximumResponseBodySize: Int

        /// Which redirects are followed. Default: ``RedirectPolicy/safeMethodsOnly``.
        public var redirects: RedirectPolicy

        /// How server certificates are checked. Default: ``TLSVerification/system``.
        public var tlsVerification: TLSVerification

        /// Whether and which proxy is used. Default: ``ProxyPolicy/environment``.
        public var proxy: ProxyPolicy

        /// The `User-Agent` sent when a request does not set one. Default: ``CurlTransport/defaultUserAgent``.
        public var userAgent: String

        /// Whether to offer gzip, deflate, brotli and zstd and decode what comes back. Default: `true`.
        ///
        /// The body handed back is always decoded; its `Content-Encoding` header is left as the
        /// server sent it. A request that sets its own `Accept-Encoding` header sends that one.
        public var acceptsCompressedResponses: Bool

        /// Creates a configuration; every argument has the default described on its property.
        public init(
            connectTimeout: Duration = .seconds(10),
            timeout: Duration = .seconds(60),
            maximumResponseBodySize: Int = 16 * 1024 * 1024,
            redirects: RedirectPolicy = .safeMethodsOnly,
            tlsVerification: TLSVerification = .system,
            proxy: ProxyPolicy = .environment,
            userAgent: String = CurlTransport.defaultUserAgent,
            acceptsCompressedResponses: Bool = true
        ) {
            self.connectTimeout = connectTimeout
            self.timeout = timeout
            self.maximumResponseBodySize = maximumResponseBodySize
            self.redirects = redirects
            self.tlsVerification = tlsVerification
            self.proxy = proxy
            self.userAgent = userAgent
            self.acceptsCompressedResponses = acceptsCompressedResponses
        }
    }

    /// Which HTTP redirects a ``CurlTransport`` follows by itself.
    ///
    /// A redirect that is not followed is returned to the caller as the 3xx response it is.
    /// Whatever the policy, a redirect from `https` never goes to plain `http`, only `http` and
    /// `https` targets are followed, and libcurl does not send a request's `Authorization` or
    /// `Cookie` headers to a different host.
    public struct RedirectPolicy: Sendable, Hashable, CustomStringConvertible {
        enum Methods: Hashable {
            case none
            case safe
            case all
        }

        let methods: Methods

        /// The most redirects followed for one request; one more fails the request with a
        /// `TransportError.Kind.other` error that says so.
        public var maximumRedirects: Int

        /// Follows no redirect.
        public static let never = RedirectPolicy(methods: .none, maximumRedirects: 0)

        /// The default: follows redirects of `GET` and `HEAD` requests, up to 10.
        ///
        /// A `POST`, `PUT`, `PATCH` or `DELETE` gets the 3xx back. Following one would either
        /// silently turn it into a `GET` and drop its body (301, 302 and 303, as browsers do) or
        /// re-send the body, which for a token endpoint carries codes and secrets, to wherever
        /// the `Location` points (307, 308). Neither is something to do behind the caller's back:
        /// an OAuth or Graph API endpoint that redirects a `POST` is misconfigured, and the
        /// caller should see that.
        public static let safeMethodsOnly = RedirectPolicy(methods: .safe, maximumRedirects: 10)

        /// Follows redirects of every method, up to 10, by libcurl's rules: 301, 302 and 303
        /// turn a `POST` into a `GET` without a body; 307 and 308 repeat the method and body.
        public static let allMethods = RedirectPolicy(methods: .all, maximumRedirects: 10)

        /// Whether a request with `method` follows redirects.
        public func follows(_ method: HTTPMethod) -> Bool {
            switch methods {
            case .none: false
            case .safe: method == .get || method == .head
            case .all: true
            }
        }

        public var description: String {
            switch methods {
            case .none: "never"
            case .safe: "GET and HEAD only, up to \(maximumRedirects)"
            case .all: "every method, up to \(maximumRedirects)"
            }
        }
    }

    /// How a ``CurlTransport`` checks the certificates of HTTPS servers.
    public struct TLSVerification: Sendable, Hashable, CustomStringConvertible {
        enum Mode: Hashable {
            case system
            case certificateAuthorities(file: String?, directory: String?)
            case disabled
        }

        let mode: Mode

        /// The default: the certificate chain must lead to a CA in the system's bundle
        /// (Debian's `ca-certificates`) and the certificate must name the host.
        ///
        /// libcurl does not read OpenSSL's `SSL_CERT_FILE` and `SSL_CERT_DIR`; a program that
        /// honours them passes them to ``certificateAuthorities(file:directory:)`` (SesameDesktop does).
        public static let system = TLSVerification(mode: .system)

        /// Trusts the CA certificates in the PEM file at `path` instead of the system's bundle;
        /// the host name is still checked. For a private CA, a TLS-inspecting proxy's CA, or a
        /// test server.
        public static func certificateAuthorities(file path: String) -> TLSVerification {
            TLSVerification(mode: .certificateAuthorities(file: path, directory: nil))
        }

        /// Trusts the CA certificates in the PEM file `file` (libcurl's `CURLOPT_CAINFO`, in place of
        /// the system's bundle) and in the hashed directory `directory` (`CURLOPT_CAPATH`, as
        /// `c_rehash` or `openssl rehash` makes it, in place of the system's directory), as OpenSSL
        /// uses `SSL_CERT_FILE` and `SSL_CERT_DIR`; the host name is still checked. With neither,
        /// this is ``system``.
        public static func certificateAuthorities(file: String?, directory: String?) -> TLSVerification {
            file == nil && directory == nil
                ? .system : TLSVerification(mode: .certificateAuthorities(file: file, directory: directory))
        }

        /// Checks nothing: any certificate, for any host, is accepted.
        ///
        /// Anyone on the network path can then read and change the traffic, tokens included.
        /// Never ship this; for a test server use ``certificateAuthorities(file:)`` instead.
        public static let dangerouslyAcceptAnyCertificate = TLSVerification(mode: .disabled)

        public var description: String {
            switch mode {
            case .system: "system CA bundle"
            case .certificateAuthorities(let file, let directory):
                "CA certificates from " + [file, directory].compactMap { $0 }.joined(separator: " and ")
            case .disabled: "DISABLED (any certificate accepted)"
            }
        }
    }

    /// Whether and which proxy a ``CurlTransport`` goes through.
    public struct ProxyPolicy: Sendable, Hashable, CustomStringConvertible {
        enum Mode: Hashable {
            case environment
            case direct
            case url(String, noProxy: String?)
        }

        let mode: Mode

        /// The default: libcurl reads the environment, as the `curl` command does.
        ///
        /// `http_proxy` (lower case only: libcurl ignores `HTTP_PROXY`, which a CGI
        /// environment lets a client set), `https_proxy` or `HTTPS_PROXY` (the lower-case one
        /// wins), and `all_proxy` or `ALL_PROXY` name the proxy for each scheme; `no_proxy` or
        /// `NO_PROXY` (again lower case first) lists hosts, domains (`example.com` also covers
        /// its subdomains), IP addresses or CIDR ranges (libcurl 7.86 and later) that go direct,
        /// separated by commas, or `*` for every host. Loopback addresses are not exempt unless
        /// listed there: a proxy variable also catches `127.0.0.1`. With none of them set,
        /// requests go direct.
        public static let environment = ProxyPolicy(mode: .environment)

        /// Never uses a proxy, whatever the environment says.
        public static let direct = ProxyPolicy(mode: .direct)

        /// Uses the proxy at `proxy` (such as `http://proxy.example:3128` or
        /// `socks5h://127.0.0.1:1080`) for every request, whatever the environment says.
        public static func url(_ proxy: String) -> ProxyPolicy { ProxyPolicy(mode: .url(proxy, noProxy: nil)) }

        /// Uses the proxy at `proxy` for every request except those to the hosts `noProxy` lists,
        /// in the `NO_PROXY` syntax described at ``environment`` (an empty list exempts none).
        /// Neither is read from the environment.
        public static func url(_ proxy: String, except noProxy: String) -> ProxyPolicy {
            ProxyPolicy(mode: .url(proxy, noProxy: noProxy))
        }

        public var description: String {
            switch mode {
            case .environment: "from the environment"
            case .direct: "none"
            case .url(let url, let noProxy?) where !noProxy.isEmpty:
                "\(Self.withoutCredentials(url)), except for \(noProxy)"
            case .url(let url, _): Self.withoutCredentials(url)
            }
        }

        /// `proxy` without a `user:password@` part, which may hold the proxy's password.
        static func withoutCredentials(_ proxy: String) -> String {
            guard var components = URLComponents(string: proxy), components.user != nil || components.password != nil
            else { return proxy }
            components.user = nil
            components.password = nil
            return components.string ?? Redaction.placeholder
        }
    }
}

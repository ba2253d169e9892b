import Dispatch
import Foundation
import Sesame
import SesameEmulator
import SesameFacebook
import SesameHTTPServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where a running emulator answers.
///
/// Facebook splits its origins (`www.facebook.com` for the dialog and the device page,
/// `graph.facebook.com` for the API); the emulator serves both from one loopback origin.
public struct EmulatorEndpoints: Sendable, Hashable, CustomStringConvertible {
    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL
    /// The Graph API's base: requests go to `graphURL/<version>/<path>` or `graphURL/<path>`.
    public var graphURL: URL
    /// The login dialog, `…/<version>/dialog/oauth`.
    public var dialogURL: URL
    /// The token endpoint, `…/<version>/oauth/access_token`.
    public var tokenURL: URL
    /// The page where a person enters a device code, `…/device`.
    public var deviceURL: URL
    /// The admin API, `…/__sesame`.
    public var adminURL: URL

    /// The endpoints of an emulator at `baseURL` that reports `graphVersion`.
    public init(baseURL: URL, graphVersion: String = GraphAPIVersions.tested) {
        let base = baseURL.absoluteString.trimmingSuffix("/")
        self.baseURL = URL(string: base)!
        self.graphURL = self.baseURL
        self.dialogURL = URL(string: "\(base)/\(graphVersion)/dialog/oauth")!
        self.tokenURL = URL(string: "\(base)/\(graphVersion)/oauth/access_token")!
        self.deviceURL = URL(string: "\(base)/device")!
        self.adminURL = URL(string: "\(base)/__sesame")!
    }

    public var description: String {
        """
        Graph API:    \(graphURL.absoluteString)
        Login dialog: \(dialogURL.absoluteString)
        Token:        \(tokenURL.absoluteString)
        Device login: \(deviceURL.absoluteString)
        Admin API:    \(adminURL.absoluteString)
        """
    }
}

/// A local Facebook: the login dialog, the Graph API, device login, the test-user API, and named
/// scenarios that put it in each situation of Facebook's error guide.
///
/// Start it in-process, point a client at ``EmulatorEndpoints``, and drive it with the admin API
/// (over HTTP under `/__sesame/`, or with the methods here):
///
/// ```swift
/// let emulator = try Emulator()
/// let endpoints = try await emulator.start()
/// let token = try await emulator.issueToken(permissions: ["email", "publish_actions"])
/// await emulator.activate(ScenarioSetting(.passwordChanged))   // the token now gets 190/460
/// await emulator.stop()
/// ```
public final class Emulator: Sendable {
    /// The configuration it was made with.
    public let configuration: EmulatorConfiguration
    let engine: EmulatorEngine
    private let running = Locked<RunningServer?>(nil)

    /// Creates an emulator; nothing listens until ``start()``.
    ///
    /// - Throws: `EmulatorError` for a bad configuration or a state file it cannot use.
    public init(configuration: EmulatorConfiguration = EmulatorConfiguration()) throws {
        self.configuration = configuration
        self.engine = try EmulatorEngine(configuration: configuration)
    }

    /// Starts listening on 127.0.0.1 (on ``EmulatorConfiguration/port``; 0 picks a free port) and
    /// returns where it answers.
    ///
    /// - Throws: `EmulatorError` when it is already running or the port cannot be bound.
    @discardableResult
    public func start() async throws -> EmulatorEndpoints {
        let engine = self.engine
        var serverConfiguration = HTTPServer.Configuration(
            // Slow clients cannot starve the others: room for thousands of connections, at most
            // half of them from one address, a request head within 10 s however it is dribbled, and a 503
            // rather than a hang past the limit (issue 17).
            host: "127.0.0.1", port: configuration.port, maxConnections: 4096,
            maxBodyBytes: configuration.limits.maxBodyBytes, stopGracePeriod: .seconds(2),
            maxConnectionsPerClient: 2048,
            requestHeadTimeout: .seconds(10))
        // Requests are answered on the server's threads: one per core, up to four.
        serverConfiguration.threads = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount))
        // The engine answers in microseconds under its lock, so most requests are answered on
        // the server's thread, without a task (several times cheaper per request). A task takes
        // what could hold that thread: a body large enough to take long to parse, the caller's
        // request log (which may write to a slow pipe), and the `slow` scenario's wait.
        let answersNow = configuration.requestLog == nil
        let server = HTTPServer(
            configuration: serverConfiguration,
            answering: { request in
                let emulatorRequest = Self.emulatorRequest(request)
                guard answersNow, request.body.count <= Self.largestBodyAnsweredNow else {
                    return .later { await Self.send(engine.handle(emulatorRequest)) }
                }
                let outcome = engine.handle(emulatorRequest)
                guard outcome.delay <= .zero else { return .later { await Self.send(outcome) } }
                return .now(Self.response(outcome))
            })
        try running.withLock { state in
            guard state == nil else { throw EmulatorError(message: "The emulator is already running; stop it first.") }
            do { try server.start() } catch {
                // The server's own message already says what to do about the port.
                throw EmulatorError(message: "The emulator could not start: \(error)")
            }
            state = RunningServer(
                server: server,
                endpoints: EmulatorEndpoints(baseURL: server.baseURL, graphVersion: configuration.graphVersion))
        }
        let endpoints = EmulatorEndpoints(baseURL: server.baseURL, graphVersion: configuration.graphVersion)
        engine.setBaseURL(endpoints.baseURL)
        return endpoints
    }

    /// The largest request body the engine is given on the server's thread; a larger one (a
    /// batch, a post) is handled in a task, so that parsing it holds up no other connection.
    static let largestBodyAnsweredNow = 16 * 1024

    /// `outcome` after its delay, as the server sends it.
    private static func send(_ outcome: EmulatorOutcome) async -> HTTPServerResponse {
        if outcome.delay > .zero { try? await Task.sleep(for: outcome.delay) }
        return response(outcome)
    }

    /// The engine's view of a request the server received.
    package static func emulatorRequest(_ request: HTTPServerRequest) -> EmulatorRequest {
        EmulatorRequest(
            method: request.method, path: request.path, query: request.query, headers: request.headers,
            body: request.body)
    }

    /// The server's answer for an outcome (its delay already waited out).
    package static func response(_ outcome: EmulatorOutcome) -> HTTPServerResponse {
        guard let response = outcome.response else { return .dropConnection }
        return HTTPServerResponse(status: response.status, headers: response.headers, body: response.body)
    }

    /// Stops listening (answering the requests in flight first) and writes the state file.
    /// Calling it again, or before ``start()``, only writes the state file.
    public func stop() async {
        let server = running.withLock { state -> HTTPServer? in
            defer { state = nil }
            return state?.server
        }
        await server?.stop()
        await engine.saveNow()
    }

    /// Starts, hands the endpoints to `ready`, and serves until one of `signals` arrives; then
    /// stops cleanly (answering the requests in flight and writing the state file) and returns the
    /// signal. This is `sesame emulator`'s main loop.
    ///
    /// The signals are ignored by their default action while it serves (a `DispatchSource` takes
    /// them), and their previous dispositions are restored afterwards.
    ///
    /// - Throws: `EmulatorError` when it cannot start.
    @discardableResult
    public func serve(
        untilSignals signals: [Int32] = [SIGINT, SIGTERM], ready: @Sendable (EmulatorEndpoints) -> Void
    ) async throws -> Int32 {
        let waiter = SignalWaiter(signals)
        defer { waiter.cancel() }
        let endpoints = try await start()
        ready(endpoints)
        let signal = await waiter.wait()
        await stop()
        return signal
    }

    /// Where it answers, while it runs.
    public var endpoints: EmulatorEndpoints? { running.withLock { $0?.endpoints } }

    /// A transport that hands requests straight to the emulator, without sockets; requests may use
    /// any host. For fast unit tests; providers should also be tested over real HTTP.
    public var transport: EmulatorTransport { EmulatorTransport(engine: engine) }

    /// Answers one request in-process, without waiting out any delay.
    package func respond(to request: EmulatorRequest) async -> EmulatorOutcome {
        engine.handle(request)
    }

    /// Answers one request on the calling thread, without waiting out any delay (benchmarks).
    package func engineOutcome(for request: EmulatorRequest) -> EmulatorOutcome { engine.handle(request) }

    /// Writes the state file now, if there is one and anything changed.
    public func save() async { await engine.saveNow() }

    // MARK: - The admin API in Swift

    /// Activates a scenario. See <doc:ScenarioCatalogue>.
    @discardableResult
    public func activate(_ setting: ScenarioSetting) async throws -> ActiveScenario {
        try setting.validate()
        return try engine.run { $0.activate(setting) }
    }

    /// The scenarios active now.
    public func activeScenarios() async -> [ActiveScenario] { (try? engine.run { $0.scenarios }) ?? [] }

    /// Ends every scenario.
    public func clearScenarios() async { _ = try? engine.run { $0.scenarios.removeAll() } }

    /// Adds a person who can log in (or replaces the one with the same id).
    public func addUser(_ user: EmulatedUser) async { _ = try? engine.run { $0.addUser(user) } }

    /// Logs a person in to an app without a dialog and returns a user access token.
    ///
    /// - Parameters:
    ///   - user: the person's id; the first configured person when `nil`.
    ///   - app: the app's id; the default app when `nil`.
    ///   - permissions: the permissions granted (with `public_profile`).
    ///   - declined: the permissions recorded as declined.
    ///   - longLived: a 60-day token rather than a two-hour one.
    public func issueToken(
        user: String? = nil, app: String? = nil, permissions: [String] = [], declined: [String] = [],
        longLived: Bool = false
    ) async throws -> String {
        var body: [String: JSONValue] = [
            "permissions": .array(permissions.map { .string($0) }), "declined": .array(declined.map { .string($0) }),
            "long_lived": .bool(longLived),
        ]
        if let user { body["user"] = .string(user) }
        if let app { body["app"] = .string(app) }
        let request = body
        let answer = try engine.run { try $0.adminToken(request) }
        return answer["access_token"]?.stringValue ?? ""
    }

    /// Answers a login dialog as the person would, and returns the redirect the browser would follow
    /// (to the app's `redirect_uri`, with `code` and `state`).
    ///
    /// - Parameters:
    ///   - url: the dialog URL the app opened (`…/dialog/oauth?client_id=…`).
    ///   - user: who logs in; the person the dialog would pick when `nil`.
    ///   - grant: the permissions approved; everything asked for except `decline` when `nil`.
    ///   - decline: the permissions declined, when `grant` is `nil`.
    public func approveDialog(
        url: URL, user: String? = nil, grant: [String]? = nil, decline: [String]? = nil
    )
        async throws -> URL
    {
        let location = try engine.run { engine in
            let dialog = try engine.selectDialog(["url": .string(url.absoluteString)])
            return try engine.completeDialog(dialog, userID: user, grant: grant, decline: decline, cancel: false)
        }
        guard let redirect = URL(string: location) else {
            throw EmulatorError(message: "The dialog's redirect is not a URL.")
        }
        return redirect
    }

    /// Approves a pending device login for a person.
    public func approveDevice(
        userCode: String, user: String? = nil, grant: [String]? = nil, decline: [String]? = nil
    )
        async throws
    {
        try engine.run {
            _ = try $0.answerDevice(userCode: userCode, userID: user, grant: grant, decline: decline, approve: true)
        }
    }

    /// Declines a pending device login.
    public func denyDevice(userCode: String) async throws {
        try engine.run {
            _ = try $0.answerDevice(userCode: userCode, userID: nil, grant: nil, decline: nil, approve: false)
        }
    }

    /// Moves the emulator's clock forward: tokens, codes and device codes age.
    public func advanceClock(by seconds: TimeInterval) async { _ = try? engine.run { $0.advanceClock(by: seconds) } }
}

/// An `HTTPTransport` that hands requests to an emulator in the same process.
///
/// The `slow` scenario's delay is honoured, and `drop-connection` throws a `TransportError` of
/// kind `connectionLost`, as a real transport would.
public struct EmulatorTransport: HTTPTransport {
    let engine: EmulatorEngine

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var headers = request.headers
        if headers["Host"] == nil, let host = request.url.host {
            headers["Host"] = request.url.port.map { "\(host):\($0)" } ?? host
        }
        let outcome = engine.handle(
            EmulatorRequest(method: request.method, url: request.url, headers: headers, body: request.body ?? Data()))
        if outcome.delay > .zero { try await Task.sleep(for: outcome.delay) }
        guard let response = outcome.response else {
            throw TransportError(
                kind: .connectionLost, message: "the emulator closed the connection without answering",
                host: request.url.host)
        }
        return response
    }
}

/// The HTTP server of a started emulator.
struct RunningServer: Sendable {
    var server: HTTPServer
    var endpoints: EmulatorEndpoints
}

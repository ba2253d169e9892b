import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import SesameTesting
import Testing

/// Facebook Login for Devices as a dialect: `device/login`, `device/login_status`, and the
/// Graph error subcodes for pending (1349174), slow down (1349172), expired (1349152) and
/// declined (1349173). The Facebook provider module has its own; this one shows the core's
/// flow fits it.
struct FacebookStyleDeviceDialect: DeviceLoginDialect {
    var provider: ProviderID = "facebook"
    var errorTaxonomy: any ErrorTaxonomy = PlainTaxonomy(provider: "facebook")
    var graph: URL
    var appID = "app-1"
    var clientToken = "client-token"

    private func form(_ path: String, _ items: [(String, String)]) -> HTTPRequest {
        HTTPRequest(
            method: .post, url: graph.appendingPathComponent(path),
            headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(FormEncoding.encode([("access_token", "\(appID)|\(clientToken)")] + items).utf8))
    }

    func startRequest(for request: LoginRequest) -> HTTPRequest {
        form("device/login", [("scope", request.permissions.map(\.name).joined(separator: ","))])
    }

    func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        try RFC8628DeviceDialect.readAuthorization(response.json, deviceCodeField: "code", provider: provider)
    }

    func pollRequest(_ context: DevicePollContext) -> HTTPRequest {
        form("device/login_status", [("code", context.authorization.deviceCode)])
    }

    func readPoll(_ response: HTTPResponse, context: DevicePollContext) -> DevicePollAnswer {
        let json = response.json
        if response.isSuccess, let answer = OAuthTokenResponse(json: json) {
            return .authorized(AccessToken(answer, for: context.request))
        }
        guard let error = json?["error"], let subcode = error["error_subcode"]?.lenientInt else { return .unrecognized }
        switch subcode {
        case 1_349_174: return .pending
        case 1_349_172: return .slowDown(interval: context.interval * 2)  // as the Facebook iOS SDK does
        case 1_349_152: return .expired
        case 1_349_173:
            return .denied(
                OAuthErrorResponse(
                    error: "access_denied", errorDescription: error["message"]?.stringValue,
                    additionalParameters: ["error_reason": "user_denied", "error_code": String(subcode)]))
        default: return .unrecognized
        }
    }
}

/// A device authorization server that speaks either RFC 8628 or Facebook's variant and
/// answers polls from a script.
final class TinyDeviceServer: Sendable {
    enum Dialect: String, Sendable, CaseIterable, CustomStringConvertible {
        case rfc8628, facebook
        var description: String { rawValue }
    }

    enum Step: Sendable {
        case pending, slowDown, token, denied, expired, serverError
    }

    final class Records: Sendable {
        let polls = Locked(0)
        let starts = Locked<[HTTPServerRequest]>([])
    }

    let dialect: Dialect
    let server: HTTPServer
    let records = Records()

    init(_ dialect: Dialect, script: [Step], expiresIn: Int = 600, interval: Int = 5, startStatus: Int = 200) throws {
        self.dialect = dialect
        let records = records
        server = HTTPServer { request in
            switch request.path {
            case "/device/code", "/device/login":
                records.starts.withLock { $0.append(request) }
                guard startStatus == 200 else {
                    return .json(.object(["error": .string("invalid_client")]), status: startStatus)
                }
                return .json(
                    .object([
                        dialect == .facebook ? "code" : "device_code": .string("device-secret"),
                        "user_code": .string("WXYZ-1234"),
                        (dialect == .facebook ? "verification_uri" : "verification_uri"):
                            .string("https://example.com/device"),
                        "expires_in": .number(Double(expiresIn)), "interval": .number(Double(interval)),
                    ]))
            case "/token", "/device/login_status":
                guard request.formValue("device_code") ?? request.formValue("code") == "device-secret" else {
                    return .text("wrong device code", status: 400)
                }
                let index = records.polls.withLock { polls in
                    defer { polls += 1 }
                    return polls
                }
                let step = index < script.count ? script[index] : .pending
                return Self.answer(step, dialect: dialect)
            default:
                return .text("not found", status: 404)
            }
        }
        try server.start()
    }

    static func answer(_ step: Step, dialect: Dialect) -> HTTPServerResponse {
        func rfcError(_ code: String) -> HTTPServerResponse { .json(.object(["error": .string(code)]), status: 400) }
        func graphError(_ code: Int, _ subcode: Int, _ message: String) -> HTTPServerResponse {
            .json(
                .object([
                    "error": .object([
                        "message": .string(message), "type": .string("OAuthException"), "code": .number(Double(code)),
                        "error_subcode": .number(Double(subcode)),
                    ])
                ]), status: 400)
        }
        switch (step, dialect) {
        case (.token, _):
            return .json(.object(["access_token": .string("device-token"), "expires_in": .number(5_184_000)]))
        case (.serverError, _):
            return .text("<html>Internal error</html>", status: 500)
        case (.pending, .rfc8628): return rfcError("authorization_pending")
        case (.slowDown, .rfc8628): return rfcError("slow_down")
        case (.denied, .rfc8628): return rfcError("access_denied")
        case (.expired, .rfc8628): return rfcError("expired_token")
        case (.pending, .facebook):
            return graphError(31, 1_349_174, "This request requires the user to take a pending action")
        case (.slowDown, .facebook): return graphError(17, 1_349_172, "User request limit reached")
        case (.denied, .facebook): return graphError(31, 1_349_173, "The user declined")
        case (.expired, .facebook): return graphError(463, 1_349_152, "The session has expired")
        }
    }

    var polls: Int { records.polls.withLock { $0 } }

    func flowDialect() -> any DeviceLoginDialect {
        switch dialect {
        case .rfc8628:
            RFC8628DeviceDialect(
                provider: "example", errorTaxonomy: PlainTaxonomy(),
                deviceAuthorizationEndpoint: server.url("/device/code"),
                tokenEndpoint: server.url("/token"), clientID: "app-1")
        case .facebook:
            FacebookStyleDeviceDialect(graph: server.baseURL)
        }
    }
}

/// Records what a device login showed.
final class RecordingPresenter: DeviceCodePresenter {
    enum Event: Sendable, Equatable {
        case presented(userCode: String)
        case waiting(Duration)
        case succeeded, failed(ErrorCategory), cancelled
    }

    private let log = Locked<[Event]>([])
    var events: [Event] { log.withLock { $0 } }

    func present(_ authorization: DeviceAuthorization) async {
        log.withLock { $0.append(.presented(userCode: authorization.userCode)) }
    }

    func stillWaiting(_ authorization: DeviceAuthorization, nextPollIn: Duration) async {
        log.withLock { $0.append(.waiting(nextPollIn)) }
    }

    func finished(_ end: DeviceLoginEnd) async {
        let event: Event =
            switch end {
            case .succeeded: .succeeded
            case .failed(let error): .failed(error.category)
            case .cancelled: .cancelled
            }
        log.withLock { $0.append(event) }
    }
}

@Suite("Device login flow over loopback, RFC 8628 and Facebook's variant", .timeLimit(.minutes(2)))
struct DeviceLoginFlowTests {
    static let request = LoginRequest(provider: "example", appID: "app-1", permissions: [.read("email")])

    static func run(
        _ server: TinyDeviceServer, clock: ManualClock = ManualClock(autoAdvance: true),
        presenter: RecordingPresenter = RecordingPresenter()
    ) async throws -> AccessToken {
        try await DeviceLoginFlow(
            dialect: server.flowDialect(), presenter: presenter, transport: LoopbackTransport(), clock: clock
        ).logIn(request)
    }

    @Test(
        "pending, pending, then the token: polls at the server's interval", arguments: TinyDeviceServer.Dialect.allCases
    )
    func pendingThenSuccess(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.pending, .pending, .token], interval: 7)
        let clock = ManualClock(autoAdvance: true)
        let presenter = RecordingPresenter()
        let token = try await Self.run(server, clock: clock, presenter: presenter)
        #expect(token.tokenString == "device-token")
        #expect(token.permissions.granted == ["email"])
        #expect(clock.sleeps == [.seconds(7), .seconds(7), .seconds(7)])
        #expect(server.polls == 3)
        #expect(
            presenter.events == [
                .presented(userCode: "WXYZ-1234"), .waiting(.seconds(7)), .waiting(.seconds(7)), .succeeded,
            ])
        let start = try #require(server.records.starts.withLock { $0.first })
        #expect(start.formValue(dialect == .facebook ? "access_token" : "client_id") != nil)
        await server.server.stop()
    }

    @Test("slow down widens the interval, then the token", arguments: TinyDeviceServer.Dialect.allCases)
    func slowDownThenSuccess(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.pending, .slowDown, .pending, .token])
        let clock = ManualClock(autoAdvance: true)
        _ = try await Self.run(server, clock: clock)
        // RFC 8628 adds five seconds; Facebook's SDK doubles the interval: both are 10 s from 5 s.
        #expect(clock.sleeps == [.seconds(5), .seconds(5), .seconds(10), .seconds(10)])
        #expect(server.polls == 4)
        await server.server.stop()
    }

    @Test("an expired code is a clear error", arguments: TinyDeviceServer.Dialect.allCases)
    func expiredAnswer(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.pending, .expired])
        let presenter = RecordingPresenter()
        let error = await #expect(throws: AuthError.self) { try await Self.run(server, presenter: presenter) }
        #expect(error?.loginFailedReason == .codeExpired)
        #expect(error?.message.contains("expired") == true)
        #expect(presenter.events.last == .failed(.retry))
        await server.server.stop()
    }

    @Test("polling stops when the code's lifetime runs out on the clock", arguments: TinyDeviceServer.Dialect.allCases)
    func expiredByTime(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [], expiresIn: 12, interval: 5)
        let clock = ManualClock(autoAdvance: true)
        let error = await #expect(throws: AuthError.self) { try await Self.run(server, clock: clock) }
        #expect(error?.loginFailedReason == .codeExpired)
        #expect(server.polls == 2)
        #expect(clock.elapsed == .seconds(15))
        await server.server.stop()
    }

    @Test(
        "the person declining is userCancelled through the provider's taxonomy",
        arguments: TinyDeviceServer.Dialect.allCases)
    func denied(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.pending, .denied])
        let presenter = RecordingPresenter()
        let error = await #expect(throws: AuthError.self) { try await Self.run(server, presenter: presenter) }
        #expect(error?.category == .userCancelled)
        #expect(error?.provider == (dialect == .facebook ? "facebook" : "example"))
        #expect(presenter.events.last == .failed(.userCancelled))
        await server.server.stop()
    }

    @Test("cancelling the task stops polling at once", arguments: TinyDeviceServer.Dialect.allCases)
    func cancelled(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.pending, .pending, .pending])
        let clock = ManualClock()
        let presenter = RecordingPresenter()
        let login = Task { try await Self.run(server, clock: clock, presenter: presenter) }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        // Asleep again, so the first poll has been answered. (A login that ended early fails the
        // expectations below.)
        await clock.waitForSleepers(1)
        login.cancel()
        let result = await login.result
        #expect(result.failure is CancellationError)
        #expect(server.polls == 1)
        #expect(presenter.events.last == .cancelled)
        await server.server.stop()
    }

    @Test("a server error while polling is retried at a doubled interval", arguments: TinyDeviceServer.Dialect.allCases)
    func transientFailure(_ dialect: TinyDeviceServer.Dialect) async throws {
        let server = try TinyDeviceServer(dialect, script: [.serverError, .token])
        let clock = ManualClock(autoAdvance: true)
        _ = try await Self.run(server, clock: clock)
        #expect(clock.sleeps == [.seconds(5), .seconds(10)])
        await server.server.stop()
    }

    @Test("repeated server errors end the login with the provider's classification")
    func repeatedFailures() async throws {
        let server = try TinyDeviceServer(.rfc8628, script: [.serverError, .serverError, .serverError, .token])
        let error = await #expect(throws: AuthError.self) { try await Self.run(server) }
        #expect(error?.category == .server)
        #expect(error?.httpStatus == 500)
        #expect(server.polls == 3)
        await server.server.stop()
    }

    @Test("a refused start is classified and nothing is shown")
    func refusedStart() async throws {
        let server = try TinyDeviceServer(.rfc8628, script: [], startStatus: 401)
        let presenter = RecordingPresenter()
        let error = await #expect(throws: AuthError.self) { try await Self.run(server, presenter: presenter) }
        #expect(error?.httpStatus == 401)
        #expect(presenter.events.isEmpty)
        await server.server.stop()
    }

    @Test("a session opens through the device flow and stores the token")
    func throughSession() async throws {
        let server = try TinyDeviceServer(.facebook, script: [.pending, .token])
        let store = InMemoryCredentialStore()
        let session = Session(provider: "facebook", appID: "app-1", store: store)
        let flow = DeviceLoginFlow(
            dialect: server.flowDialect(), presenter: RecordingPresenter(), transport: LoopbackTransport(),
            clock: ManualClock(autoAdvance: true))
        #expect(try await session.open(permissions: [.read("email")], allowLoginUI: true, loginUI: flow) == .open)
        #expect(try await store.load(session.key)?.token.tokenString == "device-token")
        await server.server.stop()
    }
}

import Foundation
import Sesame
import SesameTesting
import Testing

/// Classifies every failure as a bad request: enough for a flow that must classify.
private struct BadRequestTaxonomy: ErrorTaxonomy {
    var provider: ProviderID = "example"
    func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        AuthError(category: .badRequest, message: "HTTP \(status)", httpStatus: status, provider: provider)
    }
}

private let dialect = RFC8628DeviceDialect(
    provider: "example", errorTaxonomy: BadRequestTaxonomy(),
    deviceAuthorizationEndpoint: URL(string: "https://id.example/device")!,
    tokenEndpoint: URL(string: "https://id.example/token")!, clientID: "app-1")

private let request = LoginRequest(provider: "example", appID: "app-1", permissions: [.read("repo")])

private func json(_ status: Int, _ text: String) -> HTTPResponse {
    HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Data(text.utf8))
}

/// Records the waits a device login announced between polls.
private final class WaitRecorder: DeviceCodePresenter {
    private let log = Locked<[Duration]>([])
    var waits: [Duration] { log.withLock { $0 } }
    func present(_ authorization: DeviceAuthorization) async {}
    func stillWaiting(_ authorization: DeviceAuthorization, nextPollIn: Duration) async {
        log.withLock { $0.append(nextPollIn) }
    }
    func finished(_ end: DeviceLoginEnd) async {}
}

@Suite("RFC 8628 device dialect: errors come before tokens, whatever the status")
struct DeviceDialectTests {
    @Test(
        "a poll answer carrying an error is read as that error, with HTTP 200 as with 400",
        arguments: [200, 400])
    func errorBeforeToken(status: Int) throws {
        let authorization = DeviceAuthorization(
            deviceCode: "dc", userCode: "ABCD-EFGH", verificationURL: URL(string: "https://id.example/device")!,
            expiresIn: .seconds(900), interval: .seconds(5))
        let context = DevicePollContext(authorization: authorization, interval: .seconds(5), request: request)
        func read(_ body: String) -> DevicePollAnswer { dialect.readPoll(json(status, body), context: context) }

        guard case .pending = read(#"{"error":"authorization_pending"}"#) else {
            Issue.record("authorization_pending with HTTP \(status) was not read as pending")
            return
        }
        guard case .slowDown(nil) = read(#"{"error":"slow_down"}"#) else {
            Issue.record("slow_down with HTTP \(status) was not read as a slow-down")
            return
        }
        guard case .expired = read(#"{"error":"expired_token"}"#) else {
            Issue.record("expired_token with HTTP \(status) was not read as expired")
            return
        }
        guard case .denied = read(#"{"error":"access_denied"}"#) else {
            Issue.record("access_denied with HTTP \(status) was not read as denied")
            return
        }
        // Even next to a token field, the error wins.
        guard case .pending = read(#"{"error":"authorization_pending","access_token":"x"}"#) else {
            Issue.record("an answer with both an error and a token was read as a token")
            return
        }
    }

    @Test("a slow_down naming a new interval (GitHub's) is polled at it; one naming none widens by five seconds")
    func slowDownInterval() throws {
        let authorization = DeviceAuthorization(
            deviceCode: "dc", userCode: "ABCD-EFGH", verificationURL: URL(string: "https://id.example/device")!,
            expiresIn: .seconds(900), interval: .seconds(5))
        let context = DevicePollContext(authorization: authorization, interval: .seconds(5), request: request)
        guard
            case .slowDown(.seconds(12)) = dialect.readPoll(
                json(200, #"{"error":"slow_down","interval":12}"#), context: context)
        else {
            Issue.record("slow_down with interval 12 was not polled at 12 seconds")
            return
        }
        guard
            case .slowDown(nil) = dialect.readPoll(json(200, #"{"error":"slow_down","interval":0}"#), context: context)
        else {
            Issue.record("slow_down with an impossible interval was not read as five seconds more")
            return
        }
    }

    @Test("a device login start answered with HTTP 200 and an error is that error, not an unreadable answer")
    func startErrorOn200() throws {
        let error = try #require(throws: AuthError.self) {
            try dialect.authorization(from: json(200, #"{"error":"device_flow_disabled"}"#), for: request)
        }
        #expect(error.message.contains("device_flow_disabled"), "\(error.message)")
    }

    @Test("a login answered with HTTP 200 pending, then 200 slow_down, polls again, widens the interval, and succeeds")
    func pendingAndSlowDownWith200() async throws {
        let transport = RecordingTransport { request, index in
            switch index {
            case 0:
                json(
                    200,
                    #"{"device_code":"dc","user_code":"ABCD-EFGH","verification_uri":"https://id.example/device","#
                        + #""expires_in":900,"interval":5}"#)
            case 1: json(200, #"{"error":"authorization_pending"}"#)
            case 2: json(200, #"{"error":"slow_down"}"#)
            default: json(200, #"{"access_token":"gho_token","token_type":"bearer","scope":"repo"}"#)
            }
        }
        let presenter = WaitRecorder()
        let token = try await DeviceLoginFlow(
            dialect: dialect, presenter: presenter, transport: transport, clock: ManualClock(autoAdvance: true)
        ).logIn(request)

        #expect(token.tokenString == "gho_token")
        #expect(transport.requests.count == 4)
        // Pending keeps the interval; slow_down adds five seconds (RFC 8628 §3.5).
        #expect(presenter.waits == [.seconds(5), .seconds(10)])
    }
}

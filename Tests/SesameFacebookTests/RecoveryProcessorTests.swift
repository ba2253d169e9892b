import Foundation
import Sesame
import SesameTesting
import Testing

@testable import SesameFacebook

/// A delegate that records what it was asked, in order, and answers as told.
final class RecordingDelegate: FacebookRecoveryDelegate {
    enum Event: Equatable, Sendable {
        case requestPermissions([String])
        case reauthenticate(title: String, message: String, silentAllowed: Bool, messageShown: Bool)
        case showMessage(title: String, message: String)
        case willRetry(Duration, attempt: Int)
    }

    private let recorded = Locked<[Event]>([])
    let grantPermissions: Bool
    let logInAgain: Bool

    init(grantPermissions: Bool = true, logInAgain: Bool = true) {
        self.grantPermissions = grantPermissions
        self.logInAgain = logInAgain
    }

    var events: [Event] { recorded.withLock { $0 } }
    var messages: [Event] { events.filter { if case .showMessage = $0 { true } else { false } } }

    func requestPermissions(_ permissions: [Permission]) async throws -> Bool {
        recorded.withLock { $0.append(.requestPermissions(permissions.map(\.name))) }
        return grantPermissions
    }

    func reauthenticate(reason: ReauthenticationReason) async throws -> Bool {
        recorded.withLock {
            $0.append(
                .reauthenticate(
                    title: reason.title, message: reason.message, silentAllowed: reason.allowsSilentReauthentication,
                    messageShown: reason.messageShown))
        }
        return logInAgain
    }

    func showMessage(title: String, message: String) async {
        recorded.withLock { $0.append(.showMessage(title: title, message: message)) }
    }

    func willRetry(after delay: Duration, attempt: Int, error: AuthError) async {
        recorded.withLock { $0.append(.willRetry(delay, attempt: attempt)) }
    }
}

/// An operation that fails with the given errors in turn, then succeeds; it counts its calls.
final class ScriptedCall: Sendable {
    private let state: Locked<(failures: [any Error & Sendable], calls: Int)>
    init(_ failures: [any Error & Sendable]) { state = Locked((failures, 0)) }
    var calls: Int { state.withLock { $0.calls } }

    func callAsFunction() throws -> String {
        let failure: (any Error)? = state.withLock { state in
            state.calls += 1
            return state.failures.isEmpty ? nil : state.failures.removeFirst()
        }
        if let failure { throw failure }
        return "ok"
    }
}

func facebookError(
    code: Int, subcode: Int? = nil, status: Int = 400, headers: HTTPHeaders = [:], _ more: [String: JSONValue] = [:]
)
    -> AuthError
{
    taxonomy.classify(status: status, headers: headers, body: graphError(code: code, subcode: subcode, more))
}

func openSession() async throws -> (Session, InMemoryCredentialStore) {
    let store = InMemoryCredentialStore()
    let session = Session(provider: .facebook, appID: "1234", store: store)
    try await session.open(allowLoginUI: true, loginUI: RecordingLoginUI(grantingToken: "EAAtest"))
    #expect(await session.state == .open)
    return (session, store)
}

@Suite("Facebook recovery processor")
struct RecoveryProcessorTests {
    func processor(
        _ delegate: RecordingDelegate, session: Session? = nil, texts: RecoveryTexts = .standard, clock: ManualClock,
        maxAttempts: Int = 3
    ) -> FacebookRecoveryProcessor {
        FacebookRecoveryProcessor(
            delegate: delegate, session: session,
            policy: RecoveryPolicy(
                maxAttempts: maxAttempts, baseDelay: .seconds(1), maxDelay: .seconds(8), jitter: .none),
            texts: texts, clock: clock)
    }

    @Test("throttling is retried with back-off on the injected clock, honouring the server's hint")
    func throttlingRetries() async throws {
        let clock = ManualClock(autoAdvance: true)
        let delegate = RecordingDelegate()
        let usage: HTTPHeaders = [
            "X-Business-Use-Case-Usage":
                #"{"1":[{"type":"pages","call_count":100,"estimated_time_to_regain_access":1}]}"#
        ]
        let call = ScriptedCall([facebookError(code: 4), facebookError(code: 80001, headers: usage)])

        let result = try await processor(delegate, clock: clock).run { try call() }

        #expect(result == "ok")
        #expect(call.calls == 3)
        #expect(clock.sleeps == [.seconds(1), .seconds(60)])
        #expect(delegate.events == [.willRetry(.seconds(1), attempt: 2), .willRetry(.seconds(60), attempt: 3)])
    }

    @Test("retries are bounded; then the person is told, and the error is thrown")
    func retriesRunOut() async throws {
        let clock = ManualClock(autoAdvance: true)
        let delegate = RecordingDelegate()
        let call = ScriptedCall(Array(repeating: facebookError(code: 2, status: 500), count: 5))

        let error = await #expect(throws: AuthError.self) {
            try await processor(delegate, clock: clock).run { try call() }
        }

        #expect(error?.code == 2)
        #expect(call.calls == 3)
        #expect(clock.sleeps == [.seconds(1), .seconds(2)])
        #expect(
            delegate.messages == [
                .showMessage(title: "Facebook Is Unavailable", message: try #require(error?.userMessage))
            ])
    }

    @Test("a server hint longer than the policy waits is not waited out")
    func longHintGivesUp() async throws {
        let clock = ManualClock(autoAdvance: true)
        let delegate = RecordingDelegate()
        let usage: HTTPHeaders = [
            "X-Business-Use-Case-Usage": #"{"1":[{"call_count":100,"estimated_time_to_regain_access":30}]}"#
        ]
        let call = ScriptedCall([facebookError(code: 80004, headers: usage)])

        await #expect(throws: AuthError.self) { try await processor(delegate, clock: clock).run { try call() } }

        #expect(call.calls == 1)
        #expect(clock.sleeps.isEmpty)
        #expect(delegate.messages.count == 1)
    }

    @Test("a transient transport failure is retried like any retry error")
    func transportFailure() async throws {
        let clock = ManualClock(autoAdvance: true)
        let call = ScriptedCall([TransportError(kind: .connectionLost, message: "reset")])
        #expect(try await processor(RecordingDelegate(), clock: clock).run { try call() } == "ok")
        #expect(call.calls == 2)
    }

    @Test("an error that is not Sesame's is rethrown at once")
    func foreignError() async throws {
        struct Unrelated: Error {}
        let call = ScriptedCall([Unrelated()])
        await #expect(throws: Unrelated.self) {
            try await processor(RecordingDelegate(), clock: ManualClock()).run { try call() }
        }
        #expect(call.calls == 1)
    }

    @Test("a permissions error re-requests the call's permissions, then replays the call")
    func permissionsReplay() async throws {
        let delegate = RecordingDelegate()
        let call = ScriptedCall([facebookError(code: 200)])
        let result = try await processor(delegate, clock: ManualClock()).run(permissions: [.publish("publish_actions")])
        {
            try call()
        }
        #expect(result == "ok")
        #expect(call.calls == 2)
        #expect(delegate.events == [.requestPermissions(["publish_actions"])])
    }

    @Test("a declined permission stops without a message; a second permissions error is shown, not re-asked")
    func permissionsBounded() async throws {
        let declining = RecordingDelegate(grantPermissions: false)
        let once = ScriptedCall([facebookError(code: 10)])
        await #expect(throws: AuthError.self) {
            try await processor(declining, clock: ManualClock()).run { try once() }
        }
        #expect(declining.events == [.requestPermissions([])])

        let granting = RecordingDelegate()
        let twice = ScriptedCall([facebookError(code: 10), facebookError(code: 10)])
        await #expect(throws: AuthError.self) {
            try await processor(granting, clock: ManualClock()).run { try twice() }
        }
        #expect(twice.calls == 2)
        #expect(granting.events.count == 2)
        #expect(granting.messages.count == 1)
    }

    @Test("an expired token closes and clears the session, then asks for a login that may be silent")
    func expiredToken() async throws {
        let (session, store) = try await openSession()
        let delegate = RecordingDelegate()
        let call = ScriptedCall([facebookError(code: 190, subcode: 463)])

        #expect(try await processor(delegate, session: session, clock: ManualClock()).run { try call() } == "ok")

        #expect(await session.state == .closed)
        #expect(try await store.load(session.key) == nil)
        #expect(delegate.messages.isEmpty)
        guard case .reauthenticate(_, _, let silentAllowed, let messageShown)? = delegate.events.first else {
            Issue.record("no reauthentication in \(delegate.events)")
            return
        }
        #expect(silentAllowed && !messageShown)
        #expect(call.calls == 2)
    }

    @Test("458 and 464 are never a silent reconnect: the person is told first", arguments: [458, 464])
    func neverSilent(subcode: Int) async throws {
        let (session, _) = try await openSession()
        let delegate = RecordingDelegate(logInAgain: false)
        let error = facebookError(code: 190, subcode: subcode)

        let outcome = try await processor(delegate, session: session, clock: ManualClock()).recover(from: error)

        #expect(outcome == .declined)
        #expect(await session.state == .closed)
        let events = delegate.events
        #expect(events.count == 2)
        guard case .showMessage(let title, let message)? = events.first,
            case .reauthenticate(title, message, silentAllowed: false, messageShown: true)? = events.last
        else {
            Issue.record("expected a message, then a non-silent login: \(events)")
            return
        }
    }

    @Test("a checkpointed account (459) keeps the session open and tells the person, without retrying")
    func checkpointed() async throws {
        let (session, store) = try await openSession()
        let delegate = RecordingDelegate()
        let call = ScriptedCall([facebookError(code: 190, subcode: 459)])

        await #expect(throws: AuthError.self) {
            try await processor(delegate, session: session, clock: ManualClock()).run { try call() }
        }

        #expect(await session.state == .open)
        #expect(try await store.load(session.key) != nil)
        #expect(call.calls == 1)
        #expect(delegate.events.count == 1)
        #expect(
            delegate.messages.first
                == .showMessage(
                    title: "Account Locked", message: try #require(facebookError(code: 190, subcode: 459).userMessage)))
    }

    @Test("a cancelled login shows nothing")
    func userCancelled() async throws {
        let delegate = RecordingDelegate()
        let error = taxonomy.classifyLoginError(.facebook(error: "access_denied", errorReason: "user_denied"))
        #expect(try await processor(delegate, clock: ManualClock()).recover(from: error) == .nothing)
        #expect(delegate.events.isEmpty)
    }

    @Test("a duplicate post shows Facebook's message and is never retried")
    func duplicatePost() async throws {
        let delegate = RecordingDelegate()
        let call = ScriptedCall([facebookError(code: 506, ["error_user_msg": "You just posted that."])])
        await #expect(throws: AuthError.self) { try await processor(delegate, clock: ManualClock()).run { try call() } }
        #expect(call.calls == 1)
        #expect(delegate.messages == [.showMessage(title: "Already Posted", message: "You just posted that.")])
    }

    @Test("the Scrumptious sample's texts: 458 gets its own message, other reopen-session errors the category's")
    func seedTexts() async throws {
        var texts = RecoveryTexts.standard
        texts.subcodes[458] = .init(title: "Session Error", message: "The app was removed. Please log in again.")
        texts.categories[.authenticationReopenSession] = .init(
            title: "Session Error", message: "Your current session is no longer valid. Please log in again.")

        #expect(
            texts.text(for: facebookError(code: 190, subcode: 458)).message
                == "The app was removed. Please log in again.")
        #expect(
            texts.text(for: facebookError(code: 190, subcode: 460)).message
                == "Your current session is no longer valid. Please log in again.")
        // A message Facebook asks to show still wins over a category text.
        #expect(
            texts.text(for: facebookError(code: 190, subcode: 464)).message
                == facebookError(code: 190, subcode: 464).userMessage)

        let delegate = RecordingDelegate(logInAgain: false)
        _ = try await processor(delegate, texts: texts, clock: ManualClock()).recover(
            from: facebookError(code: 102, subcode: 458))
        #expect(
            delegate.messages == [
                .showMessage(title: "Session Error", message: "The app was removed. Please log in again.")
            ])
    }

    @Test(
        "texts are chosen: subcode, message key, the error's own when notified, category, the contextual one, generic")
    func textPrecedence() {
        let notified = facebookError(code: 4, ["error_user_msg": "Server says wait.", "error_user_title": "Wait"])
        let quiet = facebookError(code: 4)
        var texts = RecoveryTexts.standard
        #expect(texts.text(for: notified) == .init(title: "Wait", message: "Server says wait."))
        #expect(texts.text(for: quiet) == .init(title: "Please Wait", message: quiet.userMessage!))
        texts.categories[.throttling] = .init(title: "T", message: "category")
        #expect(texts.text(for: notified).message == "Server says wait.")
        #expect(texts.text(for: quiet).message == "category")
        texts.messageKeys["facebook.throttled"] = .init(title: "K", message: "key")
        #expect(texts.text(for: notified).message == "key")
        #expect(texts.text(for: quiet).message == "key")
        let bare = AuthError(category: .server, message: "bare")
        #expect(texts.text(for: bare) == .init(title: "Facebook Is Unavailable", message: bare.contextualMessage))
        #expect(texts.text(for: AuthError(category: .server, message: "bare", contextualMessage: "")) == texts.generic)
    }
}

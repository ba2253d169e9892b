import Foundation
import Sesame
import SesameTesting
import Testing

private func error(_ category: ErrorCategory, retryAfter: Duration? = nil) -> AuthError {
    AuthError(category: category, message: "\(category)", retryAfter: retryAfter)
}

/// Fails with `failure` for the first `failures` calls, then returns the attempt number.
private actor Flaky {
    var calls = 0
    let failures: Int
    let failure: AuthError
    init(failures: Int, failure: AuthError) {
        self.failures = failures
        self.failure = failure
    }
    func call() throws -> Int {
        calls += 1
        if calls <= failures { throw failure }
        return calls
    }
}

@Suite("Recovery policy")
struct RecoveryPolicyTests {
    @Test("back-off doubles from the base and stops at the cap")
    func backoffSequence() {
        let policy = RecoveryPolicy(baseDelay: .milliseconds(500), maxDelay: .seconds(4), jitter: .none)
        let delays = (1...7).map { policy.backoff(forRetry: $0) }
        #expect(
            delays == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4), .seconds(4),
            ])
    }

    @Test("full jitter scales the delay by the random draw")
    func fullJitter() {
        let policy = RecoveryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(8), jitter: .fixed(0.25))
        #expect(policy.backoff(forRetry: 3) == .seconds(1))
    }

    @Test("throttling retries wait the back-off, and the attempt bound ends them")
    func throttlingRun() async throws {
        let clock = ManualClock(autoAdvance: true)
        let policy = RecoveryPolicy(maxAttempts: 4, baseDelay: .seconds(1), maxDelay: .seconds(3), jitter: .none)
        let flaky = Flaky(failures: 10, failure: error(.throttling))

        await #expect(throws: AuthError.self) { try await policy.run(clock: clock) { try await flaky.call() } }

        #expect(await flaky.calls == 4)
        #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(3)])
        #expect(clock.elapsed == .seconds(6))
    }

    @Test("a retry error is retried at once the first time, then with back-off, and recovers")
    func retryRecovers() async throws {
        let clock = ManualClock(autoAdvance: true)
        let policy = RecoveryPolicy(maxAttempts: 3, baseDelay: .milliseconds(200), jitter: .none)
        let flaky = Flaky(failures: 2, failure: error(.retry))

        let attempt = try await policy.run(clock: clock) { try await flaky.call() }

        #expect(attempt == 3)
        #expect(clock.sleeps == [.milliseconds(400)], "first retry immediate, second after back-off")
    }

    @Test("a server hint is honoured when longer than the back-off")
    func serverHint() {
        let policy = RecoveryPolicy(baseDelay: .seconds(1), jitter: .none)
        #expect(
            policy.decide(for: error(.throttling, retryAfter: .seconds(20)), attempt: 1) == .retry(after: .seconds(20)))
        #expect(
            policy.decide(for: error(.throttling, retryAfter: .milliseconds(10)), attempt: 1)
                == .retry(after: .seconds(1)))
    }

    @Test("a server hint longer than the policy allows gives up and says why")
    func hintTooLong() {
        let policy = RecoveryPolicy(maxServerHint: .seconds(60))
        guard case .giveUp(let reason) = policy.decide(for: error(.throttling, retryAfter: .seconds(3600)), attempt: 1)
        else {
            Issue.record("expected giveUp")
            return
        }
        #expect(reason.contains("3600 s"))
    }

    @Test("the waits happen on the injected clock, not in real time")
    func manualClockWaits() async throws {
        let clock = ManualClock()
        let policy = RecoveryPolicy(maxAttempts: 2, baseDelay: .seconds(30), jitter: .none)
        let flaky = Flaky(failures: 1, failure: error(.throttling))
        let task = Task { try await policy.run(clock: clock) { try await flaky.call() } }

        await clock.waitForSleepers(1)
        #expect(await flaky.calls == 1)
        clock.advance(by: .seconds(30))

        #expect(try await task.value == 2)
    }

    @Test(
        "each category maps to its decision",
        arguments: [
            (ErrorCategory.authenticationReopenSession, RecoveryDecision.reauthenticate),
            (.permissions, .requestPermissions),
            (.server, .showMessage(title: "Something Went Wrong", message: ErrorCategory.server.contextualMessage)),
            (
                .userCancelled,
                .showMessage(title: "Something Went Wrong", message: ErrorCategory.userCancelled.contextualMessage)
            ),
        ])
    func decisions(category: ErrorCategory, expected: RecoveryDecision) {
        #expect(RecoveryPolicy().decide(for: error(category), attempt: 1) == expected)
    }

    @Test("an error the person need not be notified of shows its contextual message, not its user message")
    func contextualMessage() {
        let removed = AuthError(
            category: .providerOther, message: "blocked", shouldNotifyUser: false, userTitle: "Blocked",
            userMessage: "The provider's text.", contextualMessage: "The app was removed. Please log in again.")
        #expect(
            RecoveryPolicy().decide(for: removed, attempt: 1)
                == .showMessage(title: "Something Went Wrong", message: "The app was removed. Please log in again."))
    }

    @Test("an error the person must see surfaces its own title and message")
    func notifyUser() {
        let notify = AuthError(
            category: .retry, message: "checkpointed", shouldNotifyUser: true, userTitle: "Account locked",
            userMessage: "Log in at www.facebook.com to continue.", recoveryTactic: .showMessage)
        #expect(
            RecoveryPolicy().decide(for: notify, attempt: 1)
                == .showMessage(title: "Account locked", message: "Log in at www.facebook.com to continue."))
    }

    @Test("transport failures are retry when transient, invalid for TLS and certificates, server otherwise")
    func transportClassification() {
        #expect(AuthError.transport(TransportError(kind: .timedOut, message: "t")).category == .retry)
        #expect(AuthError.transport(TransportError(kind: .connectionFailed, message: "refused")).category == .retry)
        #expect(AuthError.transport(TransportError(kind: .tlsFailure, message: "handshake")).category == .invalid)
        #expect(
            AuthError.transport(TransportError(kind: .certificateRejected, message: "bad cert")).category == .invalid)
        #expect(AuthError.transport(TransportError(kind: .other, message: "odd")).category == .server)
    }
}

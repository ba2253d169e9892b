import Foundation
import Sesame
import SesameTestSupport
import Testing

/// Waiting behind another process's renewal: bounded by `RefreshLock.waitLimit`, and told of that
/// renewal's failure instead of meeting it again.
@Suite("renewal waiters: a bounded wait, and a failed renewal's outcome shared through the lock file")
struct RenewalWaitTests {
    let key = CredentialKey(provider: "example", appID: "app-1", account: "default")

    static func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-locks-\(UUID().uuidString)", isDirectory: true)
    }

    @Test("under a wait limit, a waiter gives up with a passing failure while another holds the lock")
    func waitLimit() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (first, second) = (RefreshLock(key: key, directory: directory), RefreshLock(key: key, directory: directory))
        let gate = Gate()
        let holder = Task { try await first.withLock { await gate.wait() } }
        #expect(await waitUntil { gate.waitingCount == 1 })
        do {
            try await RefreshLock.$waitLimit.withValue(.milliseconds(100)) { try await second.withLock {} }
            Issue.record("the waiter got the lock while another held it")
        } catch let error as AuthError {
            #expect(error.category == .retry)
            #expect(error.message.contains("Another process has been renewing this login"), "\(error.message)")
        }
        gate.open()
        try await holder.value
        #expect(try await RefreshLock.$waitLimit.withValue(.milliseconds(100)) { try await second.withLock { 1 } } == 1)
    }

    @Test("a session waiting for the lock while another one's renewal fails reports that failure without renewing")
    func sharedFailure() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = InMemoryCredentialStore()
        let token = AccessToken(
            tokenString: "at-1", provider: "example", appID: "app-1", userID: "user-1",
            expirationDate: Date().addingTimeInterval(7200), refreshToken: "r1")
        try await store.save(StoredCredential(key: key, token: token))
        let gate = Gate()
        let calls = Locked(0)
        func session(failing: Bool, since: TimeInterval = 0) -> Session {
            Session(
                provider: "example", appID: "app-1", store: store, refreshLocking: .directory(directory),
                renewer: .refreshToken { _ in
                    calls.withLock { $0 += 1 }
                    guard failing else { throw CancellationError() }
                    await gate.wait()
                    throw AuthError(category: .retry, message: "The provider did not answer within 3 s.")
                },
                // The waiter's clock runs a second behind, so its wait counts as begun before the failure
                // however the two tasks are scheduled.
                now: { Date().addingTimeInterval(since) })
        }
        let (holder, waiter) = (session(failing: true), session(failing: false, since: -1))
        #expect(try await holder.open(allowLoginUI: false) == .open)
        #expect(try await waiter.open(allowLoginUI: false) == .open)
        // Three hours asked for, two left: both renew first.
        let held = Task { try await holder.validToken(handedExpiry: nil, validFor: .seconds(3 * 3600)) }
        #expect(await waitUntil { gate.waitingCount == 1 })
        let waited = Task { try await waiter.validToken(handedExpiry: nil, validFor: .seconds(3 * 3600)) }
        gate.open()
        await #expect(throws: AuthError.self) { try await held.value }
        do {
            _ = try await waited.value
            Issue.record("the waiter got a token")
        } catch let error as AuthError {
            #expect(error.category == .retry)
            #expect(error.message.hasPrefix("The provider did not answer within 3 s."), "\(error.message)")
        }
        #expect(calls.withLock { $0 } == 1, "the waiter renewed itself")
        #expect(try await store.load(key)?.token == token, "the stored login changed")
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameEmulator
import SesameOIDC
import SesameTestSupport
import Testing

/// Two processes sharing one credential: only the file store and the lock file are shared.
@Suite("OIDC refresh across processes")
struct OIDCRefreshLockTests {
    /// Two sessions as two processes would have them, both open from the token `login` stored.
    struct TwoProcesses {
        let first: OIDCSession
        let second: OIDCSession
        let gate: GatedTransport
        let storeURL: URL
    }

    static func twoProcesses(_ harness: OIDCHarness) async throws -> TwoProcesses {
        let storeURL = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-oidc-\(UUID().uuidString)/credentials.json")
        let login = harness.session(
            store: FileCredentialStore(url: storeURL), loginUI: harness.browserLogin(harness.browser()))
        try await login.open(allowLoginUI: true)
        let gate = GatedTransport(harness.transport, holding: "/token")
        let first = harness.session(store: FileCredentialStore(url: storeURL), transport: gate)
        let second = harness.session(store: FileCredentialStore(url: storeURL), transport: gate)
        #expect(try await first.open(allowLoginUI: false) == .open)
        #expect(try await second.open(allowLoginUI: false) == .open)
        gate.arm()
        return TwoProcesses(first: first, second: second, gate: gate, storeURL: storeURL)
    }

    @Test("two processes refreshing at once send one refresh; the second uses the rotated token from the store")
    func twoProcessesOneRefresh() async throws {
        // In a method of its own: `async let` in the scoped closure crashes the Swift 6.3 compiler
        // (SendNonSendable).
        try await OIDCHarness.with { try await twoProcessesOneRefresh(in: $0) }
    }

    private func twoProcessesOneRefresh(in harness: OIDCHarness) async throws {
        let two = try await Self.twoProcesses(harness)
        let before = try #require(await two.first.token)

        // The first refresh is held at the token endpoint, inside the lock...
        async let one = two.first.refresh()
        let held = await waitUntil { two.gate.heldCount == 1 }
        #expect(held, "the first refresh never reached the token endpoint")
        // ... while the second waits for the lock file (or, without a lock, sends its own refresh).
        async let other = two.second.refresh()
        let lockFile = harness.refreshLock.url
        let settled = await waitUntil { two.gate.matchedCount >= 2 || (FileLocks.waiters(on: lockFile) ?? 0) >= 1 }
        #expect(settled, "the second session neither waited for the lock nor sent a refresh")
        #expect(two.gate.matchedCount == 1, "the second process refreshed while the first one held the lock")
        two.gate.release()

        let (a, b) = try await (one, other)
        #expect(two.gate.matchedCount == 1)
        #expect(a.tokenString != before.tokenString)
        #expect(b.tokenString == a.tokenString)
        #expect(b.refreshToken == a.refreshToken)
        let stored = try #require(try await FileCredentialStore(url: two.storeURL).load(two.first.key))
        #expect(stored.token.refreshToken == a.refreshToken)
        #expect(await two.second.state == .openTokenExtended)
    }

    @Test("a process that waited while the other found the refresh token refused does not send it again")
    func refusedElsewhere() async throws {
        try await OIDCHarness.with { harness in
            let two = try await Self.twoProcesses(harness)
            try await harness.activate(.refreshRevoked)

            let one = Task { try await two.first.refresh() }
            #expect(await waitUntil { two.gate.heldCount == 1 })
            let other = Task { try await two.second.refresh() }
            let lockFile = harness.refreshLock.url
            #expect(await waitUntil { two.gate.matchedCount >= 2 || (FileLocks.waiters(on: lockFile) ?? 0) >= 1 })
            two.gate.release()

            let first = await #expect(throws: AuthError.self) { _ = try await one.value }
            let second = await #expect(throws: AuthError.self) { _ = try await other.value }
            #expect(first?.ruleID == "invalid-grant")
            #expect(second?.category == .authenticationReopenSession)
            #expect(second?.message.contains("refused to renew") == true)
            #expect(two.gate.matchedCount == 1)
            let kept = try #require(try await FileCredentialStore(url: two.storeURL).load(two.first.key))
            #expect(kept.needsLogin)
        }
    }
}

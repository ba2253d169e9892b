import Foundation
import Sesame
import SesameTestSupport
import SesameTesting
import Testing

private let provider: ProviderID = "example"
private let key = CredentialKey(provider: provider, appID: "app-1", account: "default")

private func token(_ secret: String, expiresIn: TimeInterval = 3600) -> AccessToken {
    AccessToken(
        tokenString: secret, provider: provider, appID: "app-1", userID: "user-1",
        permissions: PermissionSet(granted: ["profile"]), expirationDate: Date().addingTimeInterval(expiresIn))
}

private func renewed(_ old: AccessToken, as secret: String) -> AccessToken {
    var new = old
    new.tokenString = secret
    new.expirationDate = Date().addingTimeInterval(7200)
    new.refreshDate = Date()
    return new
}

/// A session opened from `token`, on a store that counts its calls (the open's read included).
private func openSession(on token: AccessToken) async throws -> (Session, CountingCredentialStore) {
    let store = CountingCredentialStore(InMemoryCredentialStore([StoredCredential(key: key, token: token)]))
    let session = Session(provider: provider, appID: "app-1", store: store)
    try await session.open(allowLoginUI: false)
    return (session, store)
}

/// Two sessions on one store, as two processes are, both open on an expiring token (30 minutes
/// left against a one-hour leeway, so that a slow machine cannot expire it mid-test), which
/// `there` has just renewed.
private func renewedThere() async throws -> (here: Session, there: Session, store: InMemoryCredentialStore) {
    let shared = InMemoryCredentialStore([StoredCredential(key: key, token: token("old", expiresIn: 1800))])
    let here = Session(provider: provider, appID: "app-1", store: shared)
    let there = Session(provider: provider, appID: "app-1", store: shared)
    try await here.open(allowLoginUI: false)
    try await there.open(allowLoginUI: false)
    _ = try await there.freshToken(leeway: .seconds(3600)) { renewed($0, as: "from-there") }
    return (here, there, shared)
}

@Suite("Session token lifecycle: shared opens, one renewal path, read-modify-write")
struct SessionLifecycleTests {
    @Test("two concurrent silent opens share one read of the store and both open")
    func concurrentSilentOpens() async throws {
        // The store answers slowly, so the second open arrives while the first one reads.
        let store = CountingCredentialStore(
            InMemoryCredentialStore([StoredCredential(key: key, token: token("t1"))]), loadDelay: .milliseconds(100))
        let session = Session(provider: provider, appID: "app-1", store: store)
        async let first = session.open(allowLoginUI: false)
        async let second = session.open(allowLoginUI: false)
        let states = try await [first, second]
        #expect(states == [.open, .open])
        #expect(store.loadCount == 1)
        #expect(await session.token?.tokenString == "t1")
    }

    @Test("a subscription made before open sees every transition of that open")
    func subscribeBeforeOpen() async throws {
        let session = Session(
            provider: provider, appID: "app-1",
            store: InMemoryCredentialStore([StoredCredential(key: key, token: token("t1"))]))
        let changes = session.stateChanges()  // synchronous: registered before open runs
        try await session.open(allowLoginUI: false)
        await session.close()
        var seen: [SessionState] = []
        for await change in changes {
            seen.append(change.state)
            if seen.count == 3 { break }
        }
        #expect(seen == [.createdTokenLoaded, .open, .closed])
    }

    @Test("a renewal saves its token exactly once")
    func oneSavePerRenewal() async throws {
        let (session, store) = try await openSession(on: token("old", expiresIn: 1800))
        let fresh = try await session.freshToken(leeway: .seconds(3600)) { renewed($0, as: "new") }
        #expect(fresh.tokenString == "new")
        #expect(store.saveCount == 1)
        #expect(try await store.load(key)?.token.tokenString == "new")
        #expect(await session.state == .openTokenExtended)
    }

    @Test("a token another process renewed meanwhile is used as it is: the hook is not called")
    func renewedElsewhere() async throws {
        let (here, _, _) = try await renewedThere()
        let calls = Locked(0)
        let renewal = try await here.renewToken(isDue: { $0.isExpired(at: Date(), leeway: 3600) }) { old in
            calls.withLock { $0 += 1 }
            return renewed(old, as: "from-here")
        }
        guard case .renewedElsewhere(let adopted) = renewal else {
            Issue.record("expected the other session's token, got \(renewal)")
            return
        }
        #expect(adopted.tokenString == "from-there")
        #expect(calls.withLock { $0 } == 0)
        #expect(await here.token?.tokenString == "from-there")
    }

    @Test("a hook that declines (nil) keeps the token and saves nothing")
    func declinedRenewal() async throws {
        let (session, store) = try await openSession(on: token("old", expiresIn: 1800))
        let kept = try await session.freshToken(leeway: .seconds(3600)) { _ in nil }
        #expect(kept.tokenString == "old")
        #expect(store.saveCount == 0)
        #expect(await session.state == .open)
    }

    @Test("an update asked for during a renewal is applied to the renewed token, not to the old one")
    func updateDuringRenewal() async throws {
        let (session, store) = try await openSession(on: token("old", expiresIn: 1800))
        let door = Gate()
        async let fresh = session.freshToken(leeway: .seconds(3600)) { old in
            await door.wait()
            return renewed(old, as: "new")
        }
        #expect(await waitUntil { door.waitingCount == 1 }, "the renewal never reached its hook")
        // The permissions changed on the server while the renewal runs.
        async let updated = session.update { $0.permissions = PermissionSet(granted: ["profile", "email"]) }
        // The update reaches the session, and is queued behind the renewal, before the renewal goes on.
        #expect(await waitUntil { session.pendingWriteCount == 2 }, "the update never reached the session")
        door.open()
        let (renewedToken, updatedToken) = try await (fresh, updated)

        #expect(renewedToken.tokenString == "new")
        #expect(updatedToken.tokenString == "new")
        #expect(updatedToken.permissions.granted == ["profile", "email"])
        let stored = try #require(try await store.load(key)?.token)
        #expect(stored == updatedToken)
        #expect(await session.token == updatedToken)
    }

    @Test("an update builds on the stored token when another process renewed it")
    func updateReadsTheStore() async throws {
        let (here, _, shared) = try await renewedThere()
        let updated = try await here.update { $0.permissions = PermissionSet(granted: ["profile", "email"]) }
        #expect(updated.tokenString == "from-there")
        #expect(try await shared.load(key)?.token == updated)
    }

    @Test("an update that changes nothing saves nothing")
    func noOpUpdate() async throws {
        let (session, store) = try await openSession(on: token("t1"))
        try await session.update { $0.tokenString = "t1" }
        #expect(store.saveCount == 0)
        #expect(await session.state == .open)
    }

    @Test("a credential another process found refused stops the renewal with a clear error")
    func refusedElsewhere() async throws {
        let (session, shared) = try await openSession(on: token("old", expiresIn: 1800))
        var refused = try #require(try await shared.load(key))
        refused.needsLogin = true
        try await shared.save(refused)

        let error = await #expect(throws: AuthError.self) {
            try await session.freshToken(leeway: .seconds(3600)) { renewed($0, as: "never") }
        }
        #expect(error?.category == .authenticationReopenSession)
        #expect(error?.message.lowercased().contains("log in again") == true)
        #expect(try await shared.load(key)?.needsLogin == true)
    }

    @Test("a token that is not due is handed out without waiting for the session's other work")
    func tokenNotDueSkipsTheActor() async throws {
        let (session, _) = try await openSession(on: token("t1"))
        // The first caller's due check blocks its thread until the gate opens: had the check
        // run on the session's actor, every other caller would wait for it. A watchdog opens the
        // gate after 10 s, so that a session that makes the second caller wait fails the test
        // rather than hanging it.
        let gate = DispatchSemaphore(value: 0)
        let entered = Observed(false)
        let opened = Locked(false)
        let open: @Sendable () -> Void = {
            let wasOpen = opened.withLock { was in
                defer { was = true }
                return was
            }
            if !wasOpen { gate.signal() }
        }
        let executor = SerialTaskExecutor()
        defer { executor.shutdown() }
        let slow = Task(executorPreference: executor) {
            try await session.renewToken(
                isDue: { _ in
                    entered.change { $0 = true }
                    gate.wait()
                    return false
                }, renew: { _ in nil })
        }
        #expect(await entered.wait { $0 }, "the first caller never reached its due check")
        DispatchQueue.global().asyncAfter(deadline: .now() + 10) { open() }

        let fast = try await session.renewToken(isDue: { _ in false }, renew: { _ in nil })
        #expect(!opened.withLock { $0 }, "the second caller waited for the first one's check")
        guard case .unchanged(let current) = fast else {
            Issue.record("a token that is not due was not handed out as it is: \(fast)")
            return open()
        }
        #expect(current.tokenString == "t1")
        open()
        #expect(try await slow.value.token.tokenString == "t1")
    }

    @Test("without the actor, a closed session still has no token to hand out, and an update is seen at once")
    func tokenNotDueFollowsTheState() async throws {
        let (session, _) = try await openSession(on: token("t1"))
        try await session.updateToken(renewed(try #require(await session.token), as: "t2"))
        #expect(try await session.renewToken(isDue: { _ in false }, renew: { _ in nil }).token.tokenString == "t2")
        await session.close()
        let error = await #expect(throws: AuthError.self) {
            try await session.renewToken(isDue: { _ in false }, renew: { _ in nil })
        }
        #expect(error?.category == .authenticationReopenSession)
    }
}

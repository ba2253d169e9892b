import Foundation
import Sesame
import SesameTestSupport
import SesameTesting
import Testing

private let facebook: ProviderID = "facebook"

/// A provider's own login option, as a provider module would declare one.
private enum AudienceOption: LoginOptionKey {
    static let defaultValue = ""
}

private func token(_ secret: String = "EAAB-secret-token", expiresIn: TimeInterval = 3600) -> AccessToken {
    AccessToken(
        tokenString: secret, provider: facebook, appID: "1234", userID: "100001",
        permissions: PermissionSet(granted: ["public_profile"]), expirationDate: Date().addingTimeInterval(expiresIn))
}

private func stored(_ token: AccessToken, account: String = "default") -> StoredCredential {
    StoredCredential(key: CredentialKey(provider: facebook, appID: "1234", account: account), token: token)
}

/// The calling thread, as a number no other live thread has.
private func currentThread() -> pthread_t { pthread_self() }

/// A store that records the thread each load and save ran on.
private struct ThreadRecordingStore: CredentialStore {
    let inner: InMemoryCredentialStore
    let threads = Locked<[(operation: String, thread: pthread_t)]>([])

    func record(_ operation: String) { threads.withLock { $0.append((operation, currentThread())) } }

    func save(_ credential: StoredCredential) async throws {
        record("save")
        try await inner.save(credential)
    }

    func load(_ key: CredentialKey) async throws -> StoredCredential? {
        record("load")
        return try await inner.load(key)
    }

    func delete(_ key: CredentialKey) async throws -> Bool { try await inner.delete(key) }
    func list(provider: ProviderID?) async throws -> [StoredCredential] { try await inner.list(provider: provider) }
    var backendDescription: String { inner.backendDescription }
}

/// Every (from, to) pair of states, with whether the table allows it.
private let allPairs: [(SessionState, SessionState)] = SessionState.allCases.flatMap { from in
    SessionState.allCases.map { (from, $0) }
}

/// Collects the changes a stream delivers until `count` have arrived.
private func collect(_ stream: AsyncStream<SessionStateChange>, count: Int) async -> [SessionStateChange] {
    var changes: [SessionStateChange] = []
    for await change in stream {
        changes.append(change)
        if changes.count == count { break }
    }
    return changes
}

@Suite("Session state machine")
struct SessionTests {
    @Test("the transition table allows exactly FBSession's transitions plus reopening", arguments: allPairs)
    func transitionTable(from: SessionState, to: SessionState) {
        let legal: Set<String> = [
            "created→createdTokenLoaded", "created→opening",
            "createdTokenLoaded→open", "createdTokenLoaded→opening", "createdTokenLoaded→closed",
            "opening→open", "opening→closedLoginFailed",
            "open→openTokenExtended", "open→closed",
            "openTokenExtended→openTokenExtended", "openTokenExtended→closed",
            "closedLoginFailed→createdTokenLoaded", "closedLoginFailed→opening",
            "closed→createdTokenLoaded", "closed→opening",
        ]
        #expect(from.canTransition(to: to) == legal.contains("\(from)→\(to)"))
    }

    @Test("an illegal transition is an error naming both states")
    func illegalTransitionError() async throws {
        let session = Session(provider: facebook, appID: "1234", store: InMemoryCredentialStore())
        // Updating the token of a session that is not open asks for created → openTokenExtended.
        let error = await #expect(throws: SessionTransitionError.self) { try await session.updateToken(token()) }
        #expect(error == SessionTransitionError(from: .created, to: .openTokenExtended))
        #expect(error?.description.contains("'created'") == true)
        #expect(error?.description.contains("'openTokenExtended'") == true)
    }

    @Test("a cached valid token opens the session without UI")
    func opensFromCache() async throws {
        let store = InMemoryCredentialStore([stored(token())])
        let loginUI = RecordingLoginUI(grantingToken: "never-used")
        let session = Session(provider: facebook, appID: "1234", store: store)
        let changes = session.stateChanges()

        let state = try await session.open(allowLoginUI: true, loginUI: loginUI)

        #expect(state == .open)
        #expect(loginUI.callCount == 0)
        let seen = await collect(changes, count: 2)
        #expect(seen.map(\.state) == [.createdTokenLoaded, .open])
        #expect(seen.map(\.previousState) == [.created, .createdTokenLoaded])
        #expect(await session.token?.tokenString == "EAAB-secret-token")
    }

    @Test("the session's load, renewal and save run on the executor its caller prefers, not on the global pool")
    func tasksFollowTheCallersExecutor() async throws {
        let executor = SerialTaskExecutor()
        defer { executor.shutdown() }
        let store = ThreadRecordingStore(inner: InMemoryCredentialStore([stored(token())]))
        let session = Session(provider: facebook, appID: "1234", store: store)
        let renewal = try await Task(executorPreference: executor) {
            store.record("start")
            let state = try await session.open(allowLoginUI: false, loginUI: RecordingLoginUI(grantingToken: "unused"))
            #expect(state == .open)
            return try await session.renewToken(isDue: { _ in true }, renew: { _ in token("EAAB-renewed") })
        }.value
        guard case .renewed(let renewed) = renewal else {
            Issue.record("the token was not renewed: \(renewal)")
            return
        }
        #expect(renewed.tokenString == "EAAB-renewed")
        // The task's start (on the executor's one thread), the open's load, the renewal's look at
        // the store, and its save: all on that thread.
        let seen = store.threads.withLock { $0 }
        #expect(seen.map(\.operation) == ["start", "load", "load", "save"])
        #expect(Set(seen.map(\.thread)).count == 1, "threads: \(seen)")
    }

    @Test("an expired cached token that cannot be renewed is not used; without UI it needs a login, kept")
    func expiredTokenNoUI() async throws {
        let store = InMemoryCredentialStore([stored(token(expiresIn: -10))])
        let loginUI = RecordingLoginUI(grantingToken: "new")
        let session = Session(provider: facebook, appID: "1234", store: store)
        let error = await #expect(throws: AuthError.self) {
            try await session.open(allowLoginUI: false, loginUI: loginUI)
        }
        #expect(error?.category == .authenticationReopenSession)
        #expect(await session.state == .created)
        #expect(loginUI.callCount == 0)
        #expect(await session.token == nil)
        #expect(try await store.load(session.key) != nil, "the stored login is kept")
    }

    @Test("no token and no UI allowed leaves the session created")
    func noTokenNoUI() async throws {
        let session = Session(provider: facebook, appID: "1234", store: InMemoryCredentialStore())
        #expect(try await session.open(allowLoginUI: false) == .created)
    }

    @Test("a login through the UI opens the session and saves the token")
    func loginSavesToken() async throws {
        let store = InMemoryCredentialStore()
        let loginUI = RecordingLoginUI(grantingToken: "fresh-secret")
        let session = Session(provider: facebook, appID: "1234", store: store)
        let changes = session.stateChanges()

        #expect(try await session.open(permissions: [.read("email")], allowLoginUI: true, loginUI: loginUI) == .open)

        #expect(loginUI.callCount == 1)
        #expect(loginUI.requests.first?.permissions == [.read("email")])
        #expect(try await store.load(session.key)?.token.tokenString == "fresh-secret")
        #expect(await collect(changes, count: 2).map(\.state) == [.opening, .open])
    }

    @Test("a failed login ends in closedLoginFailed with the error")
    func failedLogin() async throws {
        let denied = AuthError(category: .userCancelled, message: "declined", loginFailedReason: .userDenied)
        let session = Session(provider: facebook, appID: "1234", store: InMemoryCredentialStore())
        let changes = session.stateChanges()

        await #expect(throws: AuthError.self) {
            try await session.open(allowLoginUI: true, loginUI: RecordingLoginUI(failingWith: denied))
        }

        #expect(await session.state == .closedLoginFailed)
        let seen = await collect(changes, count: 2)
        #expect(seen.map(\.state) == [.opening, .closedLoginFailed])
        #expect(seen.last?.error?.category == .userCancelled)
        #expect(seen.last?.error?.loginFailedReason == .userDenied)
    }

    @Test("two observers receive every change, in order")
    func twoObservers() async throws {
        let store = InMemoryCredentialStore()
        let session = Session(provider: facebook, appID: "1234", store: store)
        let first = session.stateChanges()
        let second = session.stateChanges()

        try await session.open(allowLoginUI: true, loginUI: RecordingLoginUI(grantingToken: "t1"))
        try await session.updateToken(token("t2"))
        try await session.updateToken(token("t3"))
        await session.close()

        let expected: [SessionState] = [.opening, .open, .openTokenExtended, .openTokenExtended, .closed]
        #expect(await collect(first, count: expected.count).map(\.state) == expected)
        #expect(await collect(second, count: expected.count).map(\.state) == expected)
    }

    @Test("close keeps the stored token and the next open needs no UI")
    func closeKeepsToken() async throws {
        let store = InMemoryCredentialStore([stored(token())])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        await session.close()

        #expect(await session.state == .closed)
        #expect(try await store.load(session.key) != nil)
        let loginUI = RecordingLoginUI(grantingToken: "unused")
        #expect(try await session.open(allowLoginUI: true, loginUI: loginUI) == .open)
        #expect(loginUI.callCount == 0)
    }

    @Test("closeAndClearTokenInformation deletes the stored token")
    func closeAndClear() async throws {
        let other = stored(token("other-account"), account: "work")
        let store = InMemoryCredentialStore([stored(token()), other])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        try await session.closeAndClearTokenInformation()

        #expect(await session.state == .closed)
        #expect(try await store.load(session.key) == nil)
        #expect(try await store.load(other.key) == other, "only this session's account is cleared")
        #expect(try await session.open(allowLoginUI: false) == .closed, "nothing left to open from")
    }

    @Test("an error that invalidates the session closes it and clears the token")
    func reopenSessionErrorCloses() async throws {
        let store = InMemoryCredentialStore([stored(token())])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        let changes = session.stateChanges()
        let removed = AuthError(category: .authenticationReopenSession, message: "app removed", code: 190, subcode: 458)

        #expect(await session.handle(removed))

        #expect(await session.state == .closed)
        #expect(try await store.load(session.key) == nil)
        let change = await collect(changes, count: 1).first
        #expect(change?.state == .closed)
        #expect(change?.error?.subcode == 458)
    }

    @Test("an error the taxonomy marks as not closing leaves the session open")
    func nonClosingErrorKeepsSession() async throws {
        let store = InMemoryCredentialStore([stored(token())])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        let checkpointed = AuthError(
            category: .retry, message: "checkpointed", shouldNotifyUser: true, code: 190, subcode: 459,
            closesSession: false)

        #expect(await session.handle(checkpointed) == false)
        #expect(await session.state == .open)
        #expect(try await store.load(session.key) != nil)
    }

    @Test("requesting permissions replaces the token and reports granted and declined")
    func requestPermissions() async throws {
        let store = InMemoryCredentialStore([stored(token())])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        var friends = LoginRequest.Options()
        friends[AudienceOption.self] = "friends"
        let loginUI = RecordingLoginUI { request in
            #expect(request.isRerequest)
            #expect(request.options[AudienceOption.self] == "friends")
            var next = try #require(request.currentToken)
            next.tokenString = "with-publish"
            next.permissions = PermissionSet(granted: ["public_profile", "publish_actions"], declined: ["user_posts"])
            return next
        }

        let outcome = try await session.requestPermissions(
            [Permission("publish_actions", kind: .init(rawValue: "publish")), .read("user_posts")],
            options: friends, loginUI: loginUI)

        #expect(outcome.granted == ["publish_actions"])
        #expect(outcome.declined == ["user_posts"])
        #expect(await session.state == .openTokenExtended)
        #expect(try await store.load(session.key)?.token.tokenString == "with-publish")
    }

    @Test("concurrent callers of freshToken share one refresh, and the refreshed token is saved")
    func singleFlightRefresh() async throws {
        let store = InMemoryCredentialStore([stored(token("old", expiresIn: 30))])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        let refreshes = Counter()

        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await session.freshToken(leeway: .seconds(60)) { old in
                        await refreshes.increment()
                        // Not synchronisation: a refresh that takes a while; however long, one is made.
                        try await Task.sleep(for: .milliseconds(20))
                        var new = old
                        new.tokenString = "refreshed"
                        new.expirationDate = Date().addingTimeInterval(7200)
                        return new
                    }.tokenString
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }

        #expect(await refreshes.value == 1)
        #expect(Set(tokens) == ["refreshed"])
        #expect(try await store.load(session.key)?.token.tokenString == "refreshed")
    }

    @Test("a failed refresh never deletes the stored token")
    func failedRefreshKeepsToken() async throws {
        let store = InMemoryCredentialStore([stored(token("old", expiresIn: 30))])
        let session = Session(provider: facebook, appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        let outage = AuthError(category: .server, message: "down")

        await #expect(throws: AuthError.self) {
            try await session.freshToken(leeway: .seconds(60)) { _ in throw outage }
        }
        #expect(try await store.load(session.key)?.token.tokenString == "old")
        #expect(await session.state == .open)
    }
}

/// A counter shared by concurrent tasks.
actor Counter {
    private(set) var value = 0
    func increment() { value += 1 }
}

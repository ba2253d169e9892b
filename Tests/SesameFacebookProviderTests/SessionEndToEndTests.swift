import Foundation
import Sesame
import SesameFacebook
import SesameFacebookEmulator
import SesameHTTPServer
import SesameTesting
import Testing

/// The seed situations, end to end: a FacebookSession over CurlTransport against the emulator
/// on 127.0.0.1.
@Suite("Facebook sessions against the emulator", .serialized)
struct SessionEndToEndTests {
    @Test("login denied by the user: closedLoginFailed with a userCancelled error, nothing stored")
    func loginDenied() async throws {
        try await FacebookHarness.with { harness throws in
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, answer: .deny)
            let changes = session.stateChanges()

            let error = await #expect(throws: AuthError.self) {
                try await session.openActiveSession(readPermissions: ["email"], allowLoginUI: true)
            }
            #expect(error?.category == .userCancelled)
            #expect(error?.shouldNotifyUser == false)
            #expect(await session.state == .closedLoginFailed)
            #expect(try await store.list().isEmpty)
            var iterator = changes.makeAsyncIterator()
            #expect(await iterator.next()?.state == .opening)
            let failed = await iterator.next()
            #expect(failed?.state == .closedLoginFailed)
            #expect(failed?.error?.category == .userCancelled)
        }
    }

    @Test("login, then a second start opens silently from the store")
    func secondStartOpensSilently() async throws {
        try await FacebookHarness.with { harness in
            let store = FacebookHarness.fileStore()
            let first = harness.session(store: store)
            #expect(try await first.openActiveSession(readPermissions: ["email"], allowLoginUI: true) == .open)
            let token = try #require(await first.token)
            #expect(token.userID == harness.userID)
            #expect(token.permissions.isGranted("email"))
            #expect(token.expirationDate != nil)
            #expect(token.dataAccessExpirationDate != nil)

            // The next start of the program: a new session on the same store, no UI allowed.
            let loginUI = RecordingLoginUI(failingWith: AuthError(category: .invalid, message: "no UI in this test"))
            let second = harness.session(store: store, loginUI: loginUI)
            let changes = second.stateChanges()
            #expect(try await second.openActiveSession(readPermissions: ["email"], allowLoginUI: false) == .open)
            #expect(loginUI.callCount == 0)
            var iterator = changes.makeAsyncIterator()
            #expect(await iterator.next()?.state == .createdTokenLoaded)
            #expect(await iterator.next()?.state == .open)
            let me = try await second.graph.get("me", parameters: ["fields": "id"])
            #expect(me["id"]?.stringValue == harness.userID)
        }
    }

    @Test("no token and no UI allowed: the session stays created")
    func noTokenNoUI() async throws {
        try await FacebookHarness.with { harness throws in
            let session = harness.session(store: InMemoryCredentialStore())
            #expect(try await session.openActiveSession(allowLoginUI: false) == .created)
            #expect(harness.transport.count(endingWith: "/device/login") == 0)
        }
    }

    @Test("logout clears the token and deauthorizes the app on Facebook")
    func logoutClears() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let token = try await harness.storeIssuedToken(in: store)
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            try await session.logout(revoke: true)
            #expect(await session.state == .closed)
            #expect(try await store.load(harness.key) == nil)
            // The old token no longer works on Facebook's side.
            let client = GraphClient(
                provider: harness.provider, transport: harness.transport, accessToken: token.tokenString)
            let error = await #expect(throws: AuthError.self) { try await client.get("me") }
            #expect(error?.category == .authenticationReopenSession)
        }
    }

    @Test("logout with revoke deauthorizes the login as stored, after another process replaced it")
    func logoutRevokesStoredLogin() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store)
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            // Another process logs in again, as another person, and saves its login in place of this one.
            let other = "100000000000002"
            await harness.emulator.addUser(EmulatedUser(id: other, name: "Other Person"))
            let replaced = try await harness.emulator.issueToken(user: other, permissions: ["email"], longLived: true)
            try await store.save(
                StoredCredential(
                    key: harness.key,
                    token: AccessToken(
                        tokenString: replaced, provider: .facebook, appID: harness.provider.appID, userID: other,
                        permissions: PermissionSet(granted: ["email", "public_profile"]),
                        expirationDate: Date().addingTimeInterval(50 * 86_400), refreshDate: Date())))
            try await session.logout(revoke: true)
            #expect(try await store.load(harness.key) == nil)
            // The stored token, not the one this session read at open, no longer works on Facebook's side.
            let client = GraphClient(provider: harness.provider, transport: harness.transport, accessToken: replaced)
            let error = await #expect(throws: AuthError.self) { try await client.get("me") }
            #expect(error?.category == .authenticationReopenSession)
        }
    }

    @Test("a publish permission requested with an audience is granted")
    func publishGrantedWithAudience() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let browser = EmulatorBrowser(emulator: harness.emulator, transport: harness.transport)
            let login = FacebookSession.browserLogin(
                provider: harness.provider, transport: harness.transport, receiver: LoopbackRedirectReceiver(),
                opener: browser)
            let session = harness.session(store: store, loginUI: login)
            try await session.openActiveSession(readPermissions: ["email"], allowLoginUI: true)
            let outcome = try await session.requestNewPublishPermissions(["publish_actions"], defaultAudience: .onlyMe)
            #expect(outcome.granted == ["publish_actions"])
            #expect(outcome.declined.isEmpty)
            #expect(await session.state == .openTokenExtended)
            #expect(try await store.load(harness.key)?.token.permissions.isGranted("publish_actions") == true)

            let rerequest = try #require(browser.urls.last)
            let query = FormEncoding.decode(rerequest.query ?? "")
            #expect(query.contains { $0 == ("auth_type", "rerequest") })
            #expect(query.contains { $0 == ("default_audience", "only_me") })
            #expect(query.contains { $0.0 == "code_challenge" })

            let post = try await session.graph.post(
                "me/feed", parameters: ["message": "Hello from Sesame"],
                requiredPermissions: [.publish("publish_actions")])
            let id = try #require(post["id"]?.stringValue)
            let read = try await session.graph.get(id, parameters: ["fields": "privacy"])
            #expect(read["privacy"]?["value"]?.stringValue == "SELF")
        }
    }

    @Test("a publish permission requested and declined is a userCancelled outcome; the session stays open")
    func publishDeclined() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store)
            let session = harness.session(store: store, answer: .approve(decline: ["publish_actions"]))
            try await session.openActiveSession(allowLoginUI: false)
            let error = await #expect(throws: AuthError.self) {
                try await session.requestNewPublishPermissions(["publish_actions"], defaultAudience: .friends)
            }
            #expect(error?.category == .userCancelled)
            #expect(await session.state.isOpen)
            #expect(await session.token?.permissions.declined.contains("publish_actions") == true)
            #expect(try await store.load(harness.key) != nil)
        }
    }

    @Test("the person removes the publish permission and the next publish re-requests it")
    func removedPermissionIsRerequested() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email", "publish_actions"])
            let holder = SessionHolder()
            // The session holds the delegate, whose closure holds the holder: emptied at the end, so
            // that the cycle does not outlive the test (LeakSanitizer reported it).
            defer { holder.session = nil }
            let delegate = RecordingRecoveryDelegate(onPermissions: { permissions in
                let session = try #require(holder.session)
                let outcome = try await session.requestNewPublishPermissions(
                    permissions.map(\.name), defaultAudience: .friends)
                return outcome.isFullyGranted
            })
            let session = harness.session(store: store, recoveryDelegate: delegate)
            holder.session = session
            try await session.openActiveSession(allowLoginUI: false)
            // Removed on Facebook, outside the app.
            try await GraphClient(
                provider: harness.provider, transport: harness.transport,
                accessToken: try #require(await session.token).tokenString
            ).delete("me/permissions/publish_actions")

            let post = try await session.graph.post(
                "me/feed", parameters: ["message": "Second try"], requiredPermissions: [.publish("publish_actions")])
            #expect(post["id"]?.stringValue != nil)
            #expect(delegate.recorded.permissionRequests.map { $0.map(\.name) } == [["publish_actions"]])
            #expect(await session.token?.permissions.isGranted("publish_actions") == true)
        }
    }

    @Test(
        "a token Facebook invalidates closes the session, clears the token and explains why",
        arguments: [
            (EmulatorScenario.appRemoved, 458, "The app was removed. Please log in again."),
            (EmulatorScenario.passwordChanged, 460, "Your Facebook password"),
        ])
    func invalidatedTokenCloses(scenario: EmulatorScenario, subcode: Int, contextual: String) async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.openedSession(store: store)
            let changes = session.stateChanges()
            try await harness.emulator.activate(ScenarioSetting(scenario))

            let error = try #require(await #expect(throws: AuthError.self) { try await session.graph.get("me") })
            #expect(error.category == .authenticationReopenSession)
            #expect(error.code == 190)
            #expect(error.subcode == subcode)
            #expect(await session.state == .closed)
            #expect(try await store.load(harness.key) == nil)
            var iterator = changes.makeAsyncIterator()
            let change = await iterator.next()
            #expect(change?.state == .closed)
            #expect(change?.error?.subcode == subcode)
            // The Scrumptious sample's contextual message, chosen from the subcode.
            var texts = RecoveryTexts.standard
            texts.subcodes[458] = .init(title: "Session Error", message: "The app was removed. Please log in again.")
            #expect(texts.text(for: error).message.hasPrefix(contextual))
        }
    }

    @Test("checkpointed (459): the session stays open and the person is told what to do")
    func checkpointedStaysOpen() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let delegate = RecordingRecoveryDelegate()
            let session = try await harness.openedSession(store: store, recoveryDelegate: delegate)
            try await harness.emulator.activate(ScenarioSetting(.checkpointed))

            let error = try #require(await #expect(throws: AuthError.self) { try await session.graph.get("me") })
            #expect(error.subcode == 459)
            #expect(error.shouldNotifyUser)
            #expect(!error.closesSession)
            #expect(await session.state.isOpen)
            #expect(try await store.load(harness.key) != nil)
            #expect(delegate.recorded.messages.contains { $0.message.contains("www.facebook.com") })
        }
    }

    @Test("unconfirmed (464): the session closes and there is no silent reconnect")
    func unconfirmedNoSilentReconnect() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let delegate = RecordingRecoveryDelegate()
            let session = try await harness.openedSession(store: store, recoveryDelegate: delegate)
            try await harness.emulator.activate(ScenarioSetting(.unconfirmedUser))

            let error = try #require(await #expect(throws: AuthError.self) { try await session.graph.get("me") })
            #expect(error.subcode == 464)
            #expect(await session.state == .closed)
            let reasons = delegate.recorded.reauthentications
            #expect(reasons.count == 1)
            #expect(reasons.first?.allowsSilentReauthentication == false)
            #expect(!delegate.recorded.messages.isEmpty)
        }
    }

    @Test("transient errors are retried and the call recovers")
    func transientRetried() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let delegate = RecordingRecoveryDelegate()
            let session = try await harness.openedSession(store: store, recoveryDelegate: delegate)
            try await harness.emulator.activate(ScenarioSetting(.transient, count: 2))

            let me = try await session.graph.get("me", parameters: ["fields": "id"])
            #expect(me["id"]?.stringValue == harness.userID)
            #expect(delegate.recorded.retries.count == 2)
            #expect(harness.transport.count(endingWith: "/me") == 3)
        }
    }

    @Test("throttling backs off for at least the time Facebook says, then succeeds")
    func throttlingHonoursHint() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let delegate = RecordingRecoveryDelegate()
            let clock = ManualClock(autoAdvance: true)
            let session = try await harness.openedSession(store: store, recoveryDelegate: delegate, clock: clock)
            try await harness.emulator.activate(ScenarioSetting(.appThrottled, count: 1, regainAccessMinutes: 1))

            let me = try await session.graph.get("me", parameters: ["fields": "id"])
            #expect(me["id"]?.stringValue == harness.userID)
            let retries = delegate.recorded.retries
            #expect(retries.count == 1)
            #expect((retries.first ?? .zero) >= .seconds(60))
            #expect(clock.elapsed >= .seconds(60))
        }
    }

    @Test("a duplicate post is not retried")
    func duplicateNotRetried() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["publish_actions"])
            let delegate = RecordingRecoveryDelegate()
            let session = harness.session(store: store, recoveryDelegate: delegate)
            try await session.openActiveSession(allowLoginUI: false)
            try await session.graph.post("me/feed", parameters: ["message": "Same words"])
            let error = try #require(
                await #expect(throws: AuthError.self) {
                    try await session.graph.post("me/feed", parameters: ["message": "Same words"])
                })
            #expect(error.code == 506)
            #expect(harness.transport.count(endingWith: "/me/feed") == 2)
            #expect(delegate.recorded.retries.isEmpty)
            #expect(delegate.recorded.messages.count == 1)
            #expect(await session.state.isOpen)
        }
    }
}

/// Lets a recovery delegate reach the session it is the delegate of.
final class SessionHolder: Sendable {
    private let value = Locked<FacebookSession?>(nil)
    var session: FacebookSession? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

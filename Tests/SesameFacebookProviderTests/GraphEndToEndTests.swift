import Foundation
import Sesame
import SesameEmulator
import SesameFacebook
import SesameTestSupport
import SesameTesting
import Testing

/// The Graph client and the token lifecycle, end to end against the emulator over CurlTransport.
@Suite("Graph client and token lifecycle against the emulator", .serialized)
struct GraphEndToEndTests {
    @Test("a batch with mixed results gives each call its own answer or classified error")
    func batchMixed() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email"])
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)

            let results = try await session.graph.batch([
                GraphRequest(.get, "me", parameters: ["fields": "id"]),
                GraphRequest(.post, "me/feed", parameters: ["message": "needs publish_actions"]),
                GraphRequest(.get, "me/permissions"),
                GraphRequest(.get, "no-such-node-anywhere"),
            ])
            #expect(results.count == 4)
            #expect(try results[0].get().json["id"]?.stringValue == harness.userID)
            guard case .failure(let permissionError) = results[1] else {
                Issue.record("the post without publish_actions succeeded")
                return
            }
            #expect(permissionError.category == .permissions)
            #expect(try results[2].get().json["data"]?.arrayValue?.isEmpty == false)
            guard case .failure(let missing) = results[3] else {
                Issue.record("the unknown node answered")
                return
            }
            #expect(missing.category != .authenticationReopenSession)
            #expect(await session.state.isOpen)
            #expect(harness.transport.count(endingWith: "/\(harness.provider.graphVersion)") == 1)
        }
    }

    @Test("a batch of more than 50 calls is refused before anything is sent")
    func batchLimit() async throws {
        try await FacebookHarness.with { harness throws in
            let client = GraphClient(provider: harness.provider, transport: harness.transport, accessToken: "unused")
            let error = await #expect(throws: AuthError.self) {
                try await client.batch(Array(repeating: GraphRequest(.get, "me"), count: 51))
            }
            #expect(error?.category == .invalid)
        }
    }

    @Test("paging through 250 posts visits every post once and stops when next is absent")
    func pagingThrough250() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["publish_actions", "user_posts"])
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            for batch in 0..<5 {
                let results = try await session.graph.batch(
                    (0..<50).map { GraphRequest(.post, "me/feed", parameters: ["message": "post \(batch * 50 + $0)"]) })
                #expect(results.allSatisfy { (try? $0.get()) != nil })
            }
            var pages = 0
            var ids: [String] = []
            for try await page in session.graph.pages("me/feed", parameters: ["limit": "100"]) {
                pages += 1
                ids += page.data.compactMap { $0["id"]?.stringValue }
            }
            #expect(pages == 3)
            #expect(ids.count == 250)
            #expect(Set(ids).count == 250)
            var messages = 0
            for try await _ in session.graph.items("me/feed", parameters: ["limit": "60"]) { messages += 1 }
            #expect(messages == 250)
        }
    }

    @Test("1,000 concurrent calls with an expiring token cause exactly one refresh")
    func thousandCallsOneRefresh() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            // A long-lived token two minutes before its end: inside the five-minute leeway.
            let old = try await harness.storeIssuedToken(
                in: store, expiresAt: Date().addingTimeInterval(120),
                refreshDate: Date().addingTimeInterval(-50 * 86_400))
            let session = harness.session(store: store, refreshLeeway: 300)
            try await session.openActiveSession(allowLoginUI: false)

            let ids = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<1000 {
                    group.addTask { try await session.graph.get("me", parameters: ["fields": "id"])["id"]?.stringValue }
                }
                var ids: [String?] = []
                for try await id in group { ids.append(id) }
                return ids
            }
            #expect(ids.count == 1000)
            #expect(ids.allSatisfy { $0 == harness.userID })
            #expect(harness.transport.count(endingWith: "/oauth/access_token") == 1)
            let refreshed = try #require(try await store.load(harness.key)?.token)
            #expect(try #require(refreshed.expirationDate) > old.expirationDate!.addingTimeInterval(86_400))
            #expect(await session.state == .openTokenExtended)
        }
    }

    @Test("two processes with the same expiring token refresh it once: the second uses the stored one")
    func twoProcessesOneRefresh() async throws {
        // In a method of its own: `async let` in the scoped closure crashes the Swift 6.3 compiler
        // (SendNonSendable).
        try await FacebookHarness.with { try await twoProcessesOneRefresh(in: $0) }
    }

    private func twoProcessesOneRefresh(in harness: FacebookHarness) async throws {
        // Two sessions sharing only what two processes share: the file store and the lock file.
        let storeURL = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-fb-\(UUID().uuidString)/credentials.json")
        try await harness.storeIssuedToken(
            in: FileCredentialStore(url: storeURL), expiresAt: Date().addingTimeInterval(120),
            refreshDate: Date().addingTimeInterval(-50 * 86_400))
        let gate = GatedTransport(harness.transport, holding: "/oauth/access_token")
        let first = harness.session(store: FileCredentialStore(url: storeURL), transport: gate)
        let second = harness.session(store: FileCredentialStore(url: storeURL), transport: gate)
        gate.arm()

        // Opening renews the due token. The first refresh is held at the token endpoint, inside the lock...
        async let openedFirst = first.openActiveSession(allowLoginUI: false)
        #expect(await waitUntil { gate.heldCount == 1 }, "the first refresh never reached the token endpoint")
        // ... while the second waits for the lock file (or, without a lock, sends its own refresh).
        async let openedSecond = second.openActiveSession(allowLoginUI: false)
        let lockFile = harness.refreshLock.url
        let settled = await waitUntil { gate.matchedCount >= 2 || (FileLocks.waiters(on: lockFile) ?? 0) >= 1 }
        #expect(settled, "the second session neither waited for the lock nor sent a refresh")
        #expect(gate.matchedCount == 1, "the second process refreshed while the first one held the lock")
        gate.release()

        _ = try await (openedFirst, openedSecond)
        let one = try await first.graph.get("me", parameters: ["fields": "id"])
        let two = try await second.graph.get("me", parameters: ["fields": "id"])
        #expect(one["id"] == two["id"])
        #expect(gate.matchedCount == 1)
        #expect(harness.transport.count(endingWith: "/oauth/access_token") == 1)
        #expect(await first.token?.tokenString == second.token?.tokenString)
    }

    @Test("a token older than a day is extended once, and not again within the hour")
    func extensionOncePerHour() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, refreshDate: Date().addingTimeInterval(-2 * 86_400))
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            guard case .extended(let token) = try #require(session.lastTokenExtension) else {
                Issue.record(
                    "opening did not extend a two-day-old token: \(String(describing: session.lastTokenExtension))")
                return
            }
            #expect(await session.state == .openTokenExtended)
            #expect(try await store.load(harness.key)?.token.refreshDate == token.refreshDate)
            guard case .notDue = await session.extendTokenIfNeeded() else {
                Issue.record("a just-extended token was extended again")
                return
            }
            #expect(harness.transport.count(endingWith: "/oauth/access_token") == 1)
        }
    }

    @Test("debug_token introspection reports the token and keeps its expiry dates")
    func introspection() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email"])
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            let info = try await session.introspectToken()
            #expect(info.isValid)
            #expect(info.appID == harness.provider.appID)
            #expect(info.userID == harness.userID)
            #expect(info.scopes.contains("email"))
            #expect(info.dataAccessExpirationDate != nil)
            #expect(await session.token?.expirationDate == info.expirationDate)
            #expect(await session.token?.dataAccessExpirationDate == info.dataAccessExpirationDate)
        }
    }

    @Test("refreshPermissions reads /me/permissions onto the token; revoking one removes it")
    func permissionsRefreshAndRevoke() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email", "user_posts"])
            let session = harness.session(store: store)
            try await session.openActiveSession(allowLoginUI: false)
            let permissions = try await session.refreshPermissions()
            #expect(permissions.granted.isSuperset(of: ["email", "user_posts", "public_profile"]))
            try await session.revokePermission("user_posts")
            #expect(await session.token?.permissions.isGranted("user_posts") == false)
            let again = try await session.refreshPermissions()
            #expect(!again.isGranted("user_posts"))
            #expect(again.isGranted("email"))
            #expect(try await store.load(harness.key)?.token.permissions == again)
        }
    }

    @Test("a token supplied by the person is checked with debug_token and /me before it is stored")
    func existingToken() async throws {
        try await FacebookHarness.with { harness in
            let string = try await harness.emulator.issueToken(permissions: ["email"])
            let store = InMemoryCredentialStore()
            let login = ExistingTokenLogin(provider: harness.provider, transport: harness.transport) { "  \(string)\n" }
            let session = harness.session(store: store, loginUI: login)
            #expect(try await session.openActiveSession(allowLoginUI: true) == .open)
            let stored = try #require(try await store.load(harness.key)?.token)
            #expect(stored.tokenString == string)
            #expect(stored.userID == harness.userID)
            #expect(stored.permissions.isGranted("email"))
            #expect(harness.transport.count(endingWith: "/debug_token") == 1)
        }
    }

    @Test("a supplied token Facebook does not accept is refused and nothing is stored", arguments: ["", "not-a-token"])
    func existingTokenRefused(text: String) async throws {
        try await FacebookHarness.with { harness throws in
            let store = InMemoryCredentialStore()
            let login = ExistingTokenLogin(provider: harness.provider, transport: harness.transport) { text }
            let session = harness.session(store: store, loginUI: login)
            let error = await #expect(throws: AuthError.self) {
                try await session.openActiveSession(allowLoginUI: true)
            }
            #expect(error?.loginFailedReason == .invalidSuppliedToken)
            if !text.isEmpty { #expect(error?.description.contains(text) == false) }
            #expect(await session.state == .closedLoginFailed)
            #expect(try await store.list().isEmpty)
        }
    }
}

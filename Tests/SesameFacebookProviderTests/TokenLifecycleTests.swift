import Foundation
import Sesame
import SesameEmulator
import SesameFacebook
import SesameTestSupport
import SesameTesting
import Testing

/// A store that, once armed, holds the first save at a ``Gate`` until ``release()``: a
/// renewal is kept between its network call and its save while the test does something else.
private final class HeldSaveStore: CredentialStore {
    private let base = InMemoryCredentialStore()
    private let gate = Gate()
    private let saves = Locked<Int?>(nil)

    func arm() { saves.withLock { $0 = 0 } }
    var heldCount: Int { gate.waitingCount }
    func release() { gate.open() }

    func save(_ credential: StoredCredential) async throws {
        let first = saves.withLock { saves in
            guard let count = saves else { return false }
            saves = count + 1
            return count == 0
        }
        if first { await gate.wait() }
        try await base.save(credential)
    }

    func load(_ key: CredentialKey) async throws -> StoredCredential? { try await base.load(key) }
    func delete(_ key: CredentialKey) async throws -> Bool { try await base.delete(key) }
    func list(provider: ProviderID?) async throws -> [StoredCredential] { try await base.list(provider: provider) }
    var backendDescription: String { "held-save" }
}

/// A permission call that reads from Facebook and then writes the token.
enum PermissionCall: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case revokePermission, refreshPermissions
    var testDescription: String { rawValue }
}

@Suite("Facebook session: the core's token lifecycle with Facebook's hooks")
struct FacebookTokenLifecycleTests {
    @Test(
        "a token extension racing a permission call keeps the extended token and the call's change",
        arguments: PermissionCall.allCases)
    func extensionRacingPermissionCall(_ call: PermissionCall) async throws {
        // In a method of its own: `async let` in the scoped closure crashes the Swift 6.3 compiler
        // (SendNonSendable).
        try await FacebookHarness.with { try await extensionRacingPermissionCall(in: $0, call) }
    }

    private func extensionRacingPermissionCall(in harness: FacebookHarness, _ call: PermissionCall) async throws {
        let store = HeldSaveStore()
        // The stored token lists a permission Facebook does not have, for refreshPermissions to drop.
        var issued = try await harness.storeIssuedToken(in: store, permissions: ["email", "user_posts"])
        issued.permissions = PermissionSet(granted: issued.permissions.granted.union(["stale_permission"]))
        try await store.save(StoredCredential(key: harness.key, token: issued))
        let session = harness.session(store: store)
        try await session.openActiveSession(allowLoginUI: false)
        #expect(await session.state == .open)

        // The extension gets its new token from Facebook and is held before it saves it...
        store.arm()
        async let extending = session.extendTokenIfNeeded(force: true)
        #expect(await waitUntil { store.heldCount == 1 }, "the extension never reached the store")
        // ... while the permission call reads from Facebook and writes its change.
        @Sendable func makeCall() async throws {
            switch call {
            case .revokePermission: try await session.revokePermission("user_posts")
            case .refreshPermissions: _ = try await session.refreshPermissions()
            }
        }
        async let permissionCall: Void = makeCall()
        // The call's network part, while the save is held: its write reaches the session and
        // waits behind the extension's.
        #expect(
            await waitUntil { session.session.pendingWriteCount == 2 }, "the permission call's write never came")
        store.release()
        guard case .extended(let extended) = await extending else {
            Issue.record("the forced extension did not extend the token")
            return
        }
        try await permissionCall

        let stored = try #require(try await store.load(harness.key)?.token)
        // The newer token (the extension's dates) is kept...
        #expect(stored.refreshDate == extended.refreshDate)
        #expect(stored.expirationDate == extended.expirationDate)
        // ... with the permission call's change on it.
        switch call {
        case .revokePermission: #expect(!stored.permissions.granted.contains("user_posts"))
        case .refreshPermissions: #expect(!stored.permissions.granted.contains("stale_permission"))
        }
        #expect(stored.permissions.granted.contains("email"))
        #expect(await session.token == stored)
    }

    @Test("refreshing an expiring token saves it exactly once")
    func oneSavePerRefresh() async throws {
        try await FacebookHarness.with { harness in
            let store = CountingCredentialStore()
            // A long-lived token two minutes before its end: due, so opening it renews it.
            let old = try await harness.storeIssuedToken(
                in: store, expiresAt: Date().addingTimeInterval(120),
                refreshDate: Date().addingTimeInterval(-50 * 86_400))
            let savesBefore = store.saveCount
            let session = harness.session(store: store, refreshLeeway: 300)
            try await session.openActiveSession(allowLoginUI: false)

            let fresh = try await session.validToken()
            #expect(try #require(fresh.expirationDate) > old.expirationDate!.addingTimeInterval(86_400))
            #expect(store.saveCount - savesBefore == 1)
            #expect(harness.transport.count(endingWith: "/oauth/access_token") == 1)
            #expect(try await store.load(harness.key)?.token == fresh)
        }
    }

    @Test("a session made without a login UI opens from the store only, and says why it cannot log in")
    func noHiddenLoginUI() async throws {
        try await FacebookHarness.with { harness throws in
            let session = FacebookSession(
                provider: harness.provider, transport: harness.transport, store: InMemoryCredentialStore())
            #expect(session.loginUI == nil)
            #expect(session.configuration.refreshLocking == .none)
            let error = await #expect(throws: AuthError.self) {
                try await session.openActiveSession(allowLoginUI: true)
            }
            #expect(error?.message.contains("no login UI") == true)
            #expect(await session.state == .created)
        }
    }
}

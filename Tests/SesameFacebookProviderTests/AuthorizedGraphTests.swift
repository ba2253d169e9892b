import Foundation
import Sesame
import SesameFacebook
import SesameFacebookEmulator
import SesameTesting
import Testing

/// The Graph client through the core's authorized request, against the emulator: a token
/// Facebook already expired (190/463) ends the login as Facebook's table says, unless another
/// process has saved a newer one, which is then used for one more call.
@Suite("Facebook Graph calls through the core's authorized request", .serialized)
struct AuthorizedGraphTests {
    @Test("a token Facebook already expired: one call, no renewal sent, the session closed and cleared")
    func serverExpiredToken() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.openedSession(store: store)
            try await harness.emulator.activate(ScenarioSetting(.tokenExpired))
            let calls = harness.transport.count(endingWith: "/me")
            let renewals = harness.transport.count(endingWith: "/oauth/access_token")

            let error = try await #require(throws: AuthError.self) { try await session.graph.get("me") }
            #expect(error.code == 190)
            #expect(error.subcode == 463)
            #expect(harness.transport.count(endingWith: "/me") == calls + 1)
            #expect(harness.transport.count(endingWith: "/oauth/access_token") == renewals)
            #expect(await session.state == .closed)
            #expect(try await store.load(harness.key) == nil)
        }
    }

    @Test("a refused token another process already replaced: the stored login is used, the call made once more")
    func replacedElsewhere() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.openedSession(store: store)
            let first = try #require(await session.token)
            try await harness.emulator.activate(ScenarioSetting(.tokenExpired))
            // Another process logged in again and saved its token.
            let newer = try await harness.storeIssuedToken(in: store)
            let calls = harness.transport.count(endingWith: "/me")

            let me = try await session.graph.get("me", parameters: ["fields": "id"])
            #expect(me["id"]?.stringValue == harness.userID)
            #expect(harness.transport.count(endingWith: "/me") == calls + 2)
            #expect(await session.token?.tokenString == newer.tokenString)
            #expect(newer.tokenString != first.tokenString)
            #expect(try await store.load(harness.key)?.token.tokenString == newer.tokenString)
            #expect(await session.state.isOpen)
        }
    }
}

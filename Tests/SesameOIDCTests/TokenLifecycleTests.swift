import Foundation
import Sesame
import SesameOIDC
import SesameTesting
import Testing

@Suite("OIDC session: the core's token lifecycle with the refresh token grant as the hook")
struct OIDCTokenLifecycleTests {
    @Test("a refresh saves the rotated token exactly once")
    func oneSavePerRefresh() async throws {
        try await OIDCHarness.with { harness in
            let store = CountingCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let first = try #require(await session.token)
            let savesBefore = store.saveCount

            let refreshed = try await session.refresh()
            #expect(refreshed.refreshToken != first.refreshToken)
            #expect(store.saveCount - savesBefore == 1)
            #expect(try await store.load(session.key)?.token == refreshed)
            #expect(await session.state == .openTokenExtended)
        }
    }

    @Test("a session made without a configuration takes no lock file")
    func noLockByDefault() async throws {
        try await OIDCHarness.with { harness throws in
            let session = OIDCSession(
                provider: harness.provider, transport: harness.transport, store: InMemoryCredentialStore())
            #expect(session.configuration.refreshLocking == .none)
            #expect(session.session.refreshLocking == .none)
        }
    }
}

import Foundation
import Sesame
import SesameOIDC
import SesameOIDCEmulator
import SesameTesting
import Testing

/// The core's authorized request against the OIDC emulator over real HTTP: a token the issuer
/// already expired, and a resource that asks for more (RFC 6750 §3.1, RFC 9470).
@Suite("OpenID authorized requests against the emulator", .serialized)
struct AuthorizedRequestEndToEndTests {
    @Test("a token the issuer already expired: userinfo renews once, retries once, and succeeds")
    func userinfoAfterServerExpiry() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let first = try #require(await session.token)
            await harness.emulator.invalidateAccessTokens()  // Expired on the issuer's side, not by its expiry.
            let userinfoBefore = harness.emulator.requestCount(path: "/userinfo")

            let claims = try await session.userInfo()
            #expect(claims["sub"]?.stringValue == first.userID)
            #expect(harness.emulator.refreshCounters.refreshGrants == 1)
            #expect(harness.emulator.requestCount(path: "/userinfo") == userinfoBefore + 2)
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.tokenString != first.tokenString)
            #expect(!stored.needsLogin)
        }
    }

    @Test("a resource that needs a scope: one re-authorization with the union of scopes, saved, one replay")
    func insufficientScopeStepsUp() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let browser = harness.browser()
            let login = harness.browserLogin(browser)
            let session = harness.session(store: store, loginUI: login)
            try await session.open(scopes: ["openid", "email"], allowLoginUI: true)
            let resource = HTTPRequest(
                url: try #require(URL(string: harness.endpoints.issuer + "/resource/scope/calendar")))

            // Without login UI: the error names the scope, and nothing else is sent.
            let refused = try await #require(throws: AuthError.self) {
                try await session.session.send(
                    resource, through: harness.transport, taxonomy: harness.provider.taxonomy)
            }
            #expect(refused.category == .permissions)
            #expect(refused.details(as: StepUpRequirement.self)?.scopes == ["calendar"])
            #expect(refused.message.contains("calendar"))
            #expect(browser.urls.count == 1)

            let response = try await session.session.send(
                resource, through: harness.transport, taxonomy: harness.provider.taxonomy, allowLoginUI: true,
                loginUI: login)
            #expect(response.status == 200)
            #expect(browser.urls.count == 2)
            let asked = try #require(
                browser.urls.last.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false) })
            let scope = try #require(asked.queryItems?.first { $0.name == "scope" }?.value)
            #expect(Set(scope.split(separator: " ")) == ["openid", "email", "calendar"])
            #expect(harness.emulator.requestCount(path: "/resource/scope/calendar") == 3)
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.permissions.granted.isSuperset(of: ["openid", "email", "calendar"]))
            // The accumulated scopes stay with the login: the next call needs no step-up.
            #expect(
                try await session.session.send(
                    resource, through: harness.transport, taxonomy: harness.provider.taxonomy
                ).status == 200)
            #expect(browser.urls.count == 2)
        }
    }

    @Test("a resource that needs a recent login: re-authorized once with max_age, then replayed")
    func insufficientUserAuthenticationStepsUp() async throws {
        try await OIDCHarness.with { harness in
            let browser = harness.browser()
            let login = harness.browserLogin(browser)
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: login)
            try await session.open(allowLoginUI: true)
            // 40 s later by the issuer's clock (within the ID token's 60 s leeway for this machine's).
            await harness.emulator.advanceClock(by: 40)
            let resource = HTTPRequest(
                url: try #require(URL(string: harness.endpoints.issuer + "/resource/recent-login/30")))
            let response = try await session.session.send(
                resource, through: harness.transport, taxonomy: harness.provider.taxonomy, allowLoginUI: true,
                loginUI: login)
            #expect(response.status == 200)
            #expect(browser.urls.count == 2)
            let asked = try #require(
                browser.urls.last.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false) })
            #expect(asked.queryItems?.first { $0.name == "max_age" }?.value == "30")
            #expect(harness.emulator.requestCount(path: "/resource/recent-login/30") == 2)
        }
    }

    @Test("logout revokes the login as stored now, after another process rotated its refresh token")
    func logoutRevokesTheStoredLogin() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let first = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await first.open(allowLoginUI: true)
            // Another process renews the login: the refresh token the first session holds is retired.
            let other = harness.session(store: store)
            try await other.open(allowLoginUI: false)
            let renewed = try await other.refresh()
            #expect(renewed.refreshToken != (await first.token)?.refreshToken)

            try await first.logout(revoke: true)
            #expect(try await store.load(first.key) == nil)
            // The live refresh token was revoked, not the retired one: the grant is gone.
            let probeStore = InMemoryCredentialStore()
            try await probeStore.save(StoredCredential(key: first.key, token: renewed))
            let probe = harness.session(store: probeStore)
            try await probe.open(allowLoginUI: false)
            let error = try await #require(throws: AuthError.self) { try await probe.refresh() }
            #expect(error.category == .authenticationReopenSession)
        }
    }
}

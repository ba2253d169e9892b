import Foundation
import Sesame
import SesameCurl
import SesameHTTPServer
import SesameOIDC
import SesameOIDCEmulator
import SesameTesting
import Testing

@Suite("OIDC end to end against the emulator over CurlTransport")
struct OIDCEndToEndTests {
    @Test(
        "a browser login with PKCE and a nonce opens the session with a checked ID token",
        arguments: ["RS256", "ES256"])
    func browserLogin(algorithm: String) async throws {
        try await OIDCHarness.with(algorithm: algorithm) { harness in
            let store = InMemoryCredentialStore()
            let browser = harness.browser()
            let session = harness.session(store: store, loginUI: harness.browserLogin(browser))
            let state = try await session.open(allowLoginUI: true)
            #expect(state == .open)
            let token = try #require(await session.token)
            #expect(token.userID == "248289761001")
            #expect(token.idToken != nil)
            #expect(token.refreshToken != nil)
            let query = try #require(browser.urls.first?.query)
            #expect(query.contains("code_challenge_method=S256"))
            #expect(query.contains("nonce="))
            #expect(query.contains("scope=openid%20profile%20email"))
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.tokenString == token.tokenString)
            #expect(!stored.needsLogin)
        }
    }

    @Test("a device login approved through the admin API, after a slow_down, opens the session")
    func deviceLogin() async throws {
        try await OIDCHarness.with { harness in
            #expect(harness.provider.supportedLoginFlows == [.browser, .device])
            try await harness.activate(.slowDown, count: 1)
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: try harness.deviceLogin())
            #expect(try await session.open(allowLoginUI: true) == .open)
            #expect(await session.token?.userID == "248289761001")
            #expect(harness.emulator.requestCount(path: "/token") >= 2)
        }
    }

    @Test("the person cancelling on the consent page is userCancelled")
    func cancelled() async throws {
        try await OIDCHarness.with { harness in
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser(action: "cancel")))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.category == .userCancelled)
            #expect(await session.state == .closedLoginFailed)
        }
    }

    static let idTokenFaults: [(OIDCScenario, String, Int)] = [
        (.badSignature, "signature", 0), (.wrongIssuer, "issuer", 0), (.wrongAudience, "audience", 0),
        (.expiredIDToken, "expired", 0), (.wrongNonce, "nonce", 0), (.unknownKey, "unknownKey", 0),
        (.clockSkew, "issuedAt", 600),
    ]

    @Test("an ID token failing one check is refused with an error naming that check", arguments: idTokenFaults)
    func idTokenCheck(scenario: OIDCScenario, check: String, seconds: Int) async throws {
        try await OIDCHarness.with { harness in
            try await harness.activate(scenario, seconds: seconds)
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.details(as: IDTokenError.self)?.check.rawValue == check)
            #expect(error.message.contains("\(check) check"))
            #expect(await session.state == .closedLoginFailed)
            #expect(try await store.list().isEmpty)
            if scenario == .unknownKey {
                // The unknown kid made the cache fetch the set once more, and only once.
                #expect(await harness.provider.keys?.fetchCount == 2)
            }
        }
    }

    @Test(
        "an authorization response with another iss, or none where discovery promises one, is refused (RFC 9207)",
        arguments: [OIDCScenario.redirectWrongIssuer, .redirectNoIssuer])
    func responseIssuer(scenario: OIDCScenario) async throws {
        try await OIDCHarness.with { harness in
            #expect(harness.provider.endpoints.authorizationResponseIssParameterSupported)
            try await harness.activate(scenario)
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.loginFailedReason == .issuerMismatch)
            #expect(error.message.contains("RFC 9207 issuer check"))
            #expect(error.message.contains(scenario == .redirectNoIssuer ? "no 'iss'" : "another-issuer.example"))
            #expect(await session.state == .closedLoginFailed)
            #expect(try await store.list().isEmpty)
            // The code was never exchanged.
            #expect(harness.emulator.requestCount(path: "/token") == 0)
        }
    }

    @Test("an authorization response without iss is accepted from a provider that does not promise one")
    func responseIssuerOptional() async throws {
        try await OIDCHarness.with { harness in
            var endpoints = harness.provider.endpoints
            endpoints.authorizationResponseIssParameterSupported = false
            let provider = try OIDCProvider(
                configuration: harness.provider.configuration, endpoints: endpoints, transport: harness.transport)
            try await harness.activate(.redirectNoIssuer)
            let session = OIDCSession(
                provider: provider, transport: harness.transport, store: InMemoryCredentialStore(),
                loginUI: OIDCBrowserLogin(
                    oidc: provider, receiver: LoopbackRedirectReceiver(timeout: .seconds(30)),
                    opener: harness.browser(),
                    transport: harness.transport),
                configuration: .init(refreshLocking: .file(harness.refreshLock)))
            #expect(try await session.open(allowLoginUI: true) == .open)
        }
    }

    @Test("a small clock skew is within the leeway")
    func smallSkew() async throws {
        try await OIDCHarness.with { harness in
            try await harness.activate(.clockSkew, seconds: 30)
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser()))
            #expect(try await session.open(allowLoginUI: true) == .open)
        }
    }

    @Test("after a key rotation the JWKS is fetched again once and the new ID token verifies")
    func keyRotation() async throws {
        try await OIDCHarness.with(algorithm: "ES256") { harness in
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            #expect(await harness.provider.keys?.fetchCount == 1)
            try await harness.activate(.keyRotated)
            let refreshed = try await session.refresh()
            #expect(await harness.provider.keys?.fetchCount == 2)
            let header = try JSONWebToken(compact: try #require(refreshed.idToken)).keyID
            #expect(header == "key-2")
        }
    }

    @Test("a refresh rotates the refresh token, persists the new one, and the old one stops working")
    func refreshRotation() async throws {
        try await OIDCHarness.with { harness in
            let store = OIDCHarness.persistentStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let first = try #require(await session.token)
            let refreshed = try await session.refresh()
            #expect(refreshed.refreshToken != first.refreshToken)
            #expect(refreshed.tokenString != first.tokenString)
            #expect(refreshed.userID == first.userID)
            #expect(await session.state == .openTokenExtended)
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.refreshToken == refreshed.refreshToken)
            // The old refresh token was used up by the rotation.
            let reuse = try await harness.transport.send(
                HTTPRequest(
                    method: .post, url: harness.provider.endpoints.tokenEndpoint,
                    headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Data(
                        FormEncoding.encode([
                            ("grant_type", "refresh_token"), ("refresh_token", first.refreshToken!),
                            ("client_id", OIDCEmulator.defaultClientID),
                        ]).utf8)))
            #expect(harness.provider.taxonomy.classify(reuse).ruleID == "invalid-grant")
        }
    }

    @Test("a revoked refresh token keeps the credential marked needsLogin, and a new login recovers")
    func revokedRefresh() async throws {
        try await OIDCHarness.with { harness in
            let store = OIDCHarness.persistentStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let before = try #require(await session.token)
            try await harness.activate(.refreshRevoked)
            let error = try await #require(throws: AuthError.self) { try await session.refresh() }
            #expect(error.category == .authenticationReopenSession)
            #expect(error.ruleID == "invalid-grant")
            #expect(await session.state == .closed)
            let kept = try #require(try await store.load(session.key))
            #expect(kept.needsLogin)
            #expect(kept.token.refreshToken == before.refreshToken)
            // Opening without UI does not use a credential that needs a login...
            await #expect(throws: AuthError.self) { try await session.open(allowLoginUI: false) }
            #expect(await session.state == .closed)
            // ... and a new login replaces it.
            #expect(try await session.open(allowLoginUI: true) == .open)
            let recovered = try #require(try await store.load(session.key))
            #expect(!recovered.needsLogin)
            #expect(recovered.token.refreshToken != before.refreshToken)
        }
    }

    @Test("a server error on refresh leaves the stored credential as it was")
    func serverErrorOnRefresh() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let before = try #require(try await store.load(session.key))
            try await harness.activate(.serverError, count: 1)
            let error = try await #require(throws: AuthError.self) { try await session.refresh() }
            #expect(error.category == .server)
            #expect(error.httpStatus == 500)
            #expect(try await store.load(session.key) == before)
            #expect(await session.state.isOpen)
        }
    }

    @Test("userinfo answers with the person's claims, refreshing a token the provider refuses")
    func userInfo() async throws {
        try await OIDCHarness.with { harness in
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            let claims = try await session.userInfo()
            #expect(claims["email"]?.stringValue == "alice@example.com")
            let first = try #require(await session.token)
            await harness.emulator.invalidateAccessTokens()  // The provider now answers 401 invalid_token.
            let again = try await session.userInfo()
            #expect(again["sub"]?.stringValue == "248289761001")
            #expect(await session.token?.tokenString != first.tokenString)
        }
    }

    @Test("logout revokes the refresh and access tokens and clears the store")
    func logoutRevokes() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
            try await session.open(allowLoginUI: true)
            try await session.logout(revoke: true)
            #expect(harness.emulator.revokedCount == 2)
            #expect(try await store.list().isEmpty)
            #expect(await session.state == .closed)
        }
    }

    @Test("two named issuers are kept side by side in one store")
    func namedIssuers() async throws {
        try await OIDCHarness.with(providerID: "work") { work in
            try await OIDCHarness.with(algorithm: "ES256", providerID: "gitlab") { gitlab in
                let store = InMemoryCredentialStore()
                for harness in [work, gitlab] {
                    let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
                    try await session.open(allowLoginUI: true)
                }
                let keys = try await store.list().map(\.key.provider)
                #expect(keys == ["gitlab", "work"])
            }
        }
    }

    @Test("discovery refuses a document whose issuer is not the configured one")
    func discoveryIssuerMismatch() async throws {
        try await OIDCHarness.with { harness in
            let other = harness.endpoints.issuer.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            let error = try await #require(throws: AuthError.self) {
                try await OIDCEndpoints.discover(issuer: other, transport: harness.transport)
            }
            #expect(error.category == .invalid)
            #expect(error.message.contains("issuer"))
        }
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameOIDC
import SesameOIDCEmulator
import SesameTesting
import Testing

/// Client authentication chosen from discovery, a refused client's message, and the expiry
/// margin scaled to the token's lifetime (issue 18, items 1 and 2).
@Suite("OIDC client authentication and short-lived tokens")
struct ClientAuthenticationTests {
    struct Choice: Sendable, CustomTestStringConvertible {
        var hasSecret: Bool
        var supported: [String]?
        var expected: OIDCClientAuthMethod
        var testDescription: String { "secret \(hasSecret), supported \(supported ?? ["(absent)"]) → \(expected)" }
    }

    static let choices: [Choice] = [
        Choice(hasSecret: false, supported: nil, expected: .none),
        Choice(hasSecret: false, supported: ["client_secret_basic"], expected: .none),
        Choice(hasSecret: true, supported: nil, expected: .clientSecretBasic),
        Choice(
            hasSecret: true, supported: ["client_secret_post", "client_secret_basic"], expected: .clientSecretBasic),
        Choice(hasSecret: true, supported: ["none", "client_secret_post"], expected: .clientSecretPost),
        Choice(hasSecret: true, supported: ["private_key_jwt"], expected: .clientSecretBasic),
    ]

    @Test("the method follows discovery, client_secret_basic when it names none", arguments: choices)
    func chosenMethod(_ choice: Choice) {
        #expect(
            OIDCClientAuthMethod.chosen(hasSecret: choice.hasSecret, supported: choice.supported) == choice.expected)
    }

    /// A device login, a refresh and a logout with revocation, by a client with `secret`.
    static func roundTrip(
        _ harness: OIDCHarness, secret: String?, method: OIDCClientAuthMethod? = nil
    ) async throws -> OIDCProvider {
        var configuration = OIDCConfiguration(
            issuer: harness.endpoints.issuer, clientID: "confidential-desktop",
            clientSecret: secret.map(ClientSecret.init))
        configuration.clientAuthMethod = method
        let provider = try await OIDCProvider.discover(configuration, transport: harness.transport)
        let login = DeviceLoginFlow(
            dialect: try OIDCDeviceDialect(oidc: provider),
            presenter: AdminDeviceApprover(admin: harness.endpoints.adminURL, transport: harness.transport),
            transport: harness.transport, clock: ManualClock(autoAdvance: true))
        let session = OIDCSession(
            provider: provider, transport: harness.transport, store: InMemoryCredentialStore(), loginUI: login)
        try await session.open(allowLoginUI: true)
        let before = await session.token?.tokenString
        let refreshed = try await session.refresh()
        #expect(refreshed.tokenString != before)
        try await session.logout(revoke: true)
        return provider
    }

    @Test(
        "a confidential client logs in, refreshes and revokes with its secret, by Basic or in the body",
        arguments: [nil, OIDCClientAuthMethod.clientSecretPost])
    func confidentialRoundTrip(_ method: OIDCClientAuthMethod?) async throws {
        try await OIDCHarness.with(algorithm: "ES256") { harness in
            try await harness.emulator.registerClient("confidential-desktop", secret: "desktop secret+/:")
            let revokedBefore = harness.emulator.revokedCount
            let provider = try await Self.roundTrip(harness, secret: "desktop secret+/:", method: method)
            #expect(provider.clientAuthMethod == (method ?? .clientSecretBasic))
            #expect(harness.emulator.revokedCount > revokedBefore, "revocation was authenticated and done")
        }
    }

    @Test("a refused client is told what to configure, without the secret in the message")
    func refusedClient() async throws {
        try await OIDCHarness.with(algorithm: "ES256") { harness in
            try await harness.emulator.registerClient("confidential-desktop", secret: "the-real-secret")
            for (secret, hint) in [(nil, "No client secret is configured"), ("wrong-secret", "client secret was sent")]
            {
                let error = await #expect(throws: AuthError.self) {
                    _ = try await Self.roundTrip(harness, secret: secret)
                }
                let message = error?.message ?? ""
                #expect(error?.category == .invalid)
                #expect(error?.ruleID == "client-refused")
                #expect(message.contains(hint), "\(message)")
                #expect(!message.contains("Contact the app's developer"))
                #expect(!message.contains("wrong-secret") && !message.contains("the-real-secret"))
            }
        }
    }

    @Test("the margin is a quarter of the lifetime, at most 60 s")
    func scaledMargin() {
        let now = Date()
        func token(lifetime: TimeInterval) -> AccessToken {
            AccessToken(
                tokenString: "t", provider: .oidc, appID: "app", expirationDate: now.addingTimeInterval(lifetime),
                refreshDate: now)
        }
        let renewer = TokenRenewer.refreshToken(maximumLeeway: 60) { $0 }
        #expect(renewer.leeway(for: token(lifetime: 3600)) == 60)
        #expect(renewer.leeway(for: token(lifetime: 40)) == 10)
        #expect(TokenRenewer.refreshToken(maximumLeeway: 5) { $0 }.leeway(for: token(lifetime: 60)) == 5)
        #expect(!renewer.isDue(token(lifetime: 52), at: now))
    }

    @Test("a short-lived token without a refresh token is usable right after login, with a warning near its end")
    func shortLivedTokenWithoutRefresh() async throws {
        try await OIDCHarness.with(algorithm: "ES256") { harness throws in
            let store = InMemoryCredentialStore()
            let key = harness.session(store: store).key
            for (age, warns) in [(TimeInterval(8), false), (TimeInterval(45), true)] {
                // The ages count from now, not from the start of the test: at 45 s only a few seconds
                // are left before the session's leeway, less than a slow first round can take (under
                // AddressSanitizer and ThreadSanitizer it did).
                let now = Date()
                let token = AccessToken(
                    tokenString: "short-lived-secret-value", provider: .oidc, appID: OIDCEmulator.defaultClientID,
                    userID: "248289761001", expirationDate: now.addingTimeInterval(52 - age),
                    refreshDate: now.addingTimeInterval(-age))
                try await store.save(StoredCredential(key: key, token: token))
                let session = harness.session(store: store)
                try await session.open(allowLoginUI: false)
                let valid = try await session.validToken()
                #expect(valid.tokenString == token.tokenString, "returned, not refused")
                let warning = session.session.renewer.expiryWarning(for: valid, at: Date())
                #expect((warning != nil) == warns, "\(warning ?? "no warning") at \(age) s of 52 s")
                #expect(warning?.contains("short-lived-secret-value") != true)
            }
        }
    }
}

@Suite("The person's name from the stored ID token")
struct IDTokenPersonNameTests {
    @Test("an OIDC login's token names the person from its ID token, for status to show")
    func personName() async throws {
        try await OIDCHarness.with(algorithm: "ES256") { harness in
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: try harness.deviceLogin())
            try await session.open(allowLoginUI: true)
            let token = try #require(await session.token)
            #expect(token.idTokenPersonName == "Alice Example")
            var bare = token
            bare.idToken = nil
            #expect(bare.idTokenPersonName == nil)
        }
    }
}

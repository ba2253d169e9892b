import Foundation
import Sesame
import SesameCurl
import SesameOIDC
import SesameOIDCEmulator
import SesameTestSupport
import SesameTesting
import Testing

@Suite("Microsoft's {tenantid} issuer is checked against each ID token's tid, never as a wildcard")
struct TenantIssuerTests {
    /// A harness on the emulator answering as Microsoft Entra ID, discovered at `tenant`'s authority.
    static func microsoft(tenant: String) async throws -> OIDCHarness {
        let emulator = try OIDCEmulator(quirks: .microsoft, algorithm: "ES256")
        let endpoints = try await emulator.start()
        let transport = CurlTransport()
        do {
            let provider = try await OIDCProvider.discover(
                OIDCConfiguration(
                    issuer: endpoints.issuer + "/\(tenant)/v2.0", clientID: OIDCEmulator.defaultClientID,
                    scopes: ["openid", "profile", "offline_access"]),
                transport: transport)
            return OIDCHarness(
                emulator: emulator, endpoints: endpoints, transport: transport, provider: provider,
                lockDirectory: FileManager.default.temporaryDirectory.appendingPathComponent(
                    "sesame-oidc-locks-\(UUID().uuidString)", isDirectory: true))
        } catch {
            await emulator.stop()
            throw error
        }
    }

    @Test("the common authority's template is accepted at discovery, and a login's ID token names its own tenant")
    func commonLogsIn() async throws {
        try await withStarted({ try await Self.microsoft(tenant: "common") }, stop: { await $0.stop() }) { harness in
            #expect(harness.provider.endpoints.issuer == harness.endpoints.issuer + "/{tenantid}/v2.0")
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser()))
            #expect(try await session.open(allowLoginUI: true) == .open)
            let token = try #require(await session.token)
            #expect(token.refreshToken != nil)
            let claims = try await harness.provider.idTokenValidator().validate(
                try #require(token.idToken), nonce: nil)
            #expect(claims.issuer == harness.endpoints.issuer + "/\(OIDCQuirks.microsoftWorkTenant)/v2.0")
        }
    }

    @Test("an ID token whose tid is not the tenant its iss names is refused at login")
    func wrongTenantRefused() async throws {
        try await withStarted({ try await Self.microsoft(tenant: "organizations") }, stop: { await $0.stop() }) {
            harness in
            try await harness.activate(.wrongTenant)
            let session = harness.session(
                store: InMemoryCredentialStore(), loginUI: harness.browserLogin(harness.browser()))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.details(as: IDTokenError.self)?.check == .issuer)
            #expect(await session.state == .closedLoginFailed)
        }
    }

    @Test(
        "the template is filled with the token's tid only, and compared exactly",
        arguments: [
            // (tid, iss, accepted)
            ("t1", "https://login.example/t1/v2.0", true),
            ("t1", "https://login.example/t2/v2.0", false),
            ("t1", "https://login.example/t1/v2.0/", false),
            ("t1", "https://evil.example/t1/v2.0", false),
            ("a/../t1", "https://login.example/a/../t1/v2.0", false),
            ("", "https://login.example//v2.0", false),
            (nil, "https://login.example/{tenantid}/v2.0", false),
        ] as [(String?, String, Bool)])
    func templateFilledExactly(tid: String?, iss: String, accepted: Bool) {
        let template = "https://login.example/{tenantid}/v2.0"
        let expected = try? IDTokenValidator.expectedIssuer(template, tenant: tid.map { .string($0) })
        #expect((expected == iss) == accepted, "tid \(tid ?? "missing"), iss \(iss)")
    }

    @Test(
        "discovery accepts a template only for the authority it was fetched from",
        arguments: [
            ("https://login.example/{tenantid}/v2.0", "https://login.example/common/v2.0", true),
            ("https://login.example/{tenantid}/v2.0", "https://login.example/organizations/v2.0", true),
            ("https://login.example/{tenantid}/v2.0", "https://other.example/common/v2.0", false),
            ("https://login.example/{tenantid}/v2.0", "https://login.example/v2.0", false),
            ("https://login.example/{tenantid}/v2.0", "https://login.example/a/b/v2.0", false),
            ("https://{tenantid}.example/{tenantid}/v2.0", "https://x.example/common/v2.0", false),
        ])
    func discoveryTemplate(template: String, configured: String, accepted: Bool) {
        #expect(IDTokenValidator.issuerTemplate(template, matches: configured) == accepted)
    }
}

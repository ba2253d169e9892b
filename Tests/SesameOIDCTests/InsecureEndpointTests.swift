import Foundation
import Sesame
import SesameOIDC
import SesameTesting
import Testing

private func document(issuer: String, token: String) -> HTTPResponse {
    let json: JSONValue = .object([
        "issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/authorize"),
        "token_endpoint": .string(token), "jwks_uri": .string(issuer + "/jwks"),
    ])
    return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(json.jsonText.utf8))
}

@Suite("OIDC endpoints over plain http")
struct InsecureEndpointTests {
    @Test("an http issuer that is not loopback is refused before anything is sent, unless named")
    func insecureIssuer() async throws {
        let transport = RecordingTransport { _, _ in
            document(issuer: "http://idp.example.com", token: "http://idp.example.com/token")
        }
        let configuration = OIDCConfiguration(issuer: "http://idp.example.com", clientID: "app")
        let error = try await #require(throws: AuthError.self) {
            _ = try await OIDCProvider.discover(configuration, transport: transport)
        }
        #expect(error.category == .invalid)
        #expect(error.message.contains("idp.example.com"))
        #expect(transport.requests.isEmpty)

        var optedIn = configuration
        optedIn.allowedInsecureHosts = ["idp.example.com"]
        let provider = try await OIDCProvider.discover(optedIn, transport: transport)
        #expect(provider.endpoints.tokenEndpoint.absoluteString == "http://idp.example.com/token")
    }

    @Test("an https issuer whose discovery document names an http endpoint elsewhere is refused")
    func insecureDiscoveredEndpoint() async throws {
        let transport = RecordingTransport { _, _ in
            document(issuer: "https://idp.example.com", token: "http://evil.example/token")
        }
        let configuration = OIDCConfiguration(issuer: "https://idp.example.com", clientID: "app")
        let error = try await #require(throws: AuthError.self) {
            _ = try await OIDCProvider.discover(configuration, transport: transport)
        }
        #expect(error.message.contains("token endpoint") && error.message.contains("evil.example"))

        let explicit = OIDCConfiguration(
            issuer: "https://idp.example.com",
            endpoints: OIDCEndpoints(
                issuer: "https://idp.example.com", authorizationEndpoint: URL(string: "https://idp.example.com/a")!,
                tokenEndpoint: URL(string: "http://idp.example.com/t")!),
            clientID: "app")
        await #expect(throws: AuthError.self) { _ = try await OIDCProvider.discover(explicit, transport: transport) }
        // Loopback endpoints (the emulator, a local test server) stay allowed.
        let local = RecordingTransport { _, _ in document(issuer: "http://127.0.0.1:9", token: "http://[::1]:9/t") }
        let provider = try await OIDCProvider.discover(
            OIDCConfiguration(issuer: "http://127.0.0.1:9", clientID: "app"), transport: local)
        #expect(provider.endpoints.tokenEndpoint.scheme == "http")
    }
}

@Suite("OIDC endpoints as a discovery document")
struct DiscoveryDocumentTests {
    @Test(
        "endpoints written as a discovery document read back as the same endpoints",
        arguments: [
            OIDCEndpoints(
                issuer: "https://id.example.com", authorizationEndpoint: URL(string: "https://id.example.com/a")!,
                tokenEndpoint: URL(string: "https://id.example.com/t")!),
            OIDCEndpoints(
                issuer: "https://id.example.com/realm", authorizationEndpoint: URL(string: "https://id.example.com/a")!,
                tokenEndpoint: URL(string: "https://id.example.com/t?x=1")!,
                jwksURI: URL(string: "https://id.example.com/jwks")!,
                userinfoEndpoint: URL(string: "https://id.example.com/me")!,
                revocationEndpoint: URL(string: "https://id.example.com/revoke")!,
                deviceAuthorizationEndpoint: URL(string: "https://id.example.com/device")!,
                scopesSupported: ["openid", "email"], authorizationResponseIssParameterSupported: true,
                tokenEndpointAuthMethodsSupported: ["private_key_jwt", "client_secret_post"]),
        ])
    func roundTrip(_ endpoints: OIDCEndpoints) throws {
        let text = endpoints.discoveryDocument.jsonText
        let parsed = try #require(JSONValue(parsing: Data(text.utf8)))
        #expect(try OIDCEndpoints(discoveryDocument: parsed, provider: .oidc) == endpoints)
    }
}

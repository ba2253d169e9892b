import Foundation
import Sesame
import Testing

private let secrets = ["EAAB-the-access-token", "the-refresh-token", "the-id-token"]

private let token = AccessToken(
    tokenString: secrets[0], provider: "facebook", appID: "1234", userID: "100001",
    permissions: PermissionSet(granted: ["email"]), expirationDate: Date().addingTimeInterval(3600),
    refreshToken: secrets[1],
    idToken: secrets[2])

/// Every way a value can end up as text.
private func renderings(_ value: Any) -> [String] {
    var dumped = ""
    dump(value, to: &dumped)
    return [String(describing: value), String(reflecting: value), "\(value)", dumped]
}

@Suite("Secrets stay out of text")
struct RedactionTests {
    @Test("no rendering of a token, stored credential or login request contains a secret")
    func noSecretsInDescriptions() {
        let values: [Any] = [
            token,
            StoredCredential(key: CredentialKey(provider: "facebook", appID: "1234", account: "a"), token: token),
            LoginRequest(provider: "facebook", appID: "1234", currentToken: token),
            [token],
        ]
        for value in values {
            for text in renderings(value) {
                for secret in secrets { #expect(!text.contains(secret), "\(type(of: value)) leaked a secret") }
            }
            #expect(renderings(value).first?.contains(Redaction.placeholder) == true)
        }
    }

    @Test("no rendering of the OAuth values that carry codes, verifiers and client secrets contains one")
    func noSecretsInOAuthValues() throws {
        let verifier = "the-code-verifier-" + String(repeating: "v", count: 40)
        let values: [Any] = [
            try PKCE(verifier: verifier),
            RedirectOutcome.code("the-authorization-code"),
            try #require(
                OAuthTokenResponse(
                    json: .object([
                        "access_token": .string(secrets[0]), "refresh_token": .string(secrets[1]),
                        "id_token": .string(secrets[2]), "token_type": .string("bearer"),
                    ]))),
            DeviceAuthorization(
                deviceCode: "the-device-code", userCode: "ABCD-EFGH",
                verificationURL: URL(string: "https://example.com/device")!, expiresIn: .seconds(600)),
            OAuth2BrowserDialect(
                provider: "generic", errorTaxonomy: NeutralTaxonomy(),
                authorizationEndpoint: URL(string: "https://example.com/authorize")!,
                tokenEndpoint: URL(string: "https://example.com/token")!, clientID: "app",
                clientAuthentication: .clientSecretPost(ClientSecret("the-client-secret"))),
            IssuedToken(
                token,
                answer: OAuthTokenResponse(
                    json: .object(["access_token": .string(secrets[0]), "id_token": .string(secrets[2])])),
                request: LoginRequest(provider: "generic", appID: "app", currentToken: token), renewing: token),
            RFC8628DeviceDialect(
                provider: "generic", errorTaxonomy: NeutralTaxonomy(),
                deviceAuthorizationEndpoint: URL(string: "https://example.com/device")!,
                tokenEndpoint: URL(string: "https://example.com/token")!, clientID: "app",
                clientAuthentication: .clientSecretPost(ClientSecret("the-client-secret"))),
        ]
        let hidden = secrets + [verifier, "the-authorization-code", "the-device-code", "the-client-secret"]
        for value in values {
            for text in renderings(value) {
                for secret in hidden { #expect(!text.contains(secret), "\(type(of: value)) leaked \(secret)") }
            }
        }
    }

    @Test("errors about a session never contain its token")
    func noSecretsInErrors() async throws {
        let store = InMemoryCredentialStore([
            StoredCredential(key: CredentialKey(provider: "facebook", appID: "1234", account: "default"), token: token)
        ])
        let session = Session(provider: "facebook", appID: "1234", store: store)
        try await session.open(allowLoginUI: false)
        var texts: [String] = []
        do {
            _ = try await session.open(allowLoginUI: true)  // already open: no error, no text
            _ = try await session.freshToken(leeway: .seconds(1_000_000_000)) { _ in
                throw AuthError(category: .server, message: "refresh failed")
            }
        } catch {
            texts += renderings(error)
        }
        do {
            try await session.updateToken(token); try await session.closeAndClearTokenInformation();
            try await session.updateToken(token)
        } catch {
            texts += renderings(error)
        }
        #expect(texts.count >= 2)
        for text in texts { for secret in secrets { #expect(!text.contains(secret)) } }
    }

    @Test("authorization headers are redacted in header descriptions")
    func headers() {
        let headers: HTTPHeaders = ["Authorization": "Bearer \(secrets[0])", "Accept": "application/json"]
        #expect(!headers.description.contains(secrets[0]))
        #expect(headers.description.contains("Accept: application/json"))
    }

    @Test("redirect outcomes do not show the authorization code")
    func redirectOutcome() {
        #expect(!RedirectOutcome.code("AQD-secret-code").description.contains("AQD-secret-code"))
    }
}

import Foundation
import Sesame
import Testing

private let secrets = ["EAAB-the-access-token", "the-refresh-token", "the-id-token"]

private let token = AccessToken(
    tokenString: secrets[0], provider: "facebook", appID: "1234", userID: "100001",
    permissions: PermissionSet(granted: ["email"]), expirationDate: Date(), refreshToken: secrets[1],
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
            _ = try await session.freshToken(leeway: 1e9) { _ in
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

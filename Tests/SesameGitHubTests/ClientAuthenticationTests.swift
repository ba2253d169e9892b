import Foundation
import Sesame
import SesameGitHub
import SesameTesting
import Testing

@Suite("GitHub's token-endpoint requests go through the core's ClientAuthentication")
struct GitHubClientAuthenticationTests {
    @Test("a refresh sends a GitHub App's client secret beside the client id; device login sends the id alone")
    func secretOnlyOnRefresh() async throws {
        let provider = GitHubProvider(clientID: "Iv1.app", clientSecret: ClientSecret("s3cr3t-value"))
        let transport = RecordingTransport { _, _ in
            HTTPResponse(
                status: 200, headers: ["Content-Type": "application/json"],
                body: Data(#"{"error":"bad_refresh_token"}"#.utf8))
        }
        let expired = AccessToken(
            tokenString: "ghu_old", provider: .github, appID: provider.credentialAppID, refreshToken: "ghr_old")
        await #expect(throws: AuthError.self) { try await provider.oauth2(transport: transport).refresh(expired) }
        let refresh = FormEncoding.decode(String(decoding: try #require(transport.requests.first?.body), as: UTF8.self))
        #expect(refresh.contains { $0 == ("client_id", "Iv1.app") })
        #expect(refresh.contains { $0 == ("client_secret", "s3cr3t-value") })
        #expect(refresh.contains { $0 == ("refresh_token", "ghr_old") })

        let start = try #require(provider.oauth2(transport: transport).deviceDialect).startRequest(
            for: LoginRequest(provider: .github, appID: provider.credentialAppID, permissions: []))
        let form = FormEncoding.decode(String(decoding: start.body ?? Data(), as: UTF8.self))
        #expect(form.contains { $0 == ("client_id", "Iv1.app") })
        #expect(!form.contains { $0.0 == "client_secret" })
        #expect(start.headers["Accept"] == "application/json")
    }
}

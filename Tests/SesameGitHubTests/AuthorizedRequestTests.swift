import Foundation
import Sesame
import SesameGitHub
import SesameGitHubEmulator
import SesameTesting
import Testing

/// The core's authorized request with GitHub's emulator: an app's own request, made with the
/// session's token, survives a token GitHub already revoked.
@Suite("GitHub authorized requests against the emulator", .serialized)
struct GitHubAuthorizedRequestTests {
    @Test("an app's own HTTPRequest: a token GitHub already revoked is refreshed once and the request sent again")
    func ownRequestAfterRevocation() async throws {
        try await GitHubHarness.with(expiringTokens: true) { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.loggedInSession(store: store)
            let first = try #require(await session.token)
            await harness.emulator.revokeAccessTokens()
            // The app's own transport, which sees only the app's requests (the refresh has its own).
            let network = harness.transport
            let app = RecordingTransport { request, _ in try await network.send(request) }

            var request = HTTPRequest(url: harness.provider.host.apiURL("user"), headers: GitHubClient.standardHeaders)
            request.headers["X-Request-Id"] = "app-42"
            let response = try await session.session.send(request, through: app, taxonomy: harness.provider.taxonomy)
            #expect(response.status == 200)
            #expect(response.json?["login"]?.stringValue == "octocat")
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 2)  // the login, one refresh
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.tokenString != first.tokenString)
            #expect(app.requests.count == 2)
            #expect(app.requests.map { $0.headers["X-Request-Id"] } == ["app-42", "app-42"])
            #expect(
                app.requests.map { $0.headers["Authorization"] }
                    == ["Bearer \(first.tokenString)", "Bearer \(stored.token.tokenString)"])
        }
    }

    @Test("a revoked token that cannot be refreshed: one call, bad credentials, the login recorded as refused")
    func revokedWithoutRefreshToken() async throws {
        try await GitHubHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.loggedInSession(store: store)
            await harness.emulator.revokeAccessTokens()
            let error = try await #require(throws: AuthError.self) { try await session.client(policy: nil).user() }
            #expect(error.ruleID == "bad-credentials")
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 1)
            let stored = try #require(try await store.load(session.key))
            #expect(session.session.condition(of: stored) == .needsLogin(.expired))
        }
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameEmulator
import SesameGitHub
import SesameTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("The GitHub REST client end to end against the emulator over CurlTransport")
struct GitHubAPIEndToEndTests {
    @Test("GET /user gives login, id, name and the token's scopes")
    func user() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(scopes: ["repo", "read:org"])
            let user = try await harness.rawClient(token: pat).user()
            #expect(
                user == GitHubUser(login: "octocat", id: 583_231, name: "The Octocat", scopes: ["repo", "read:org"]))
        }
    }

    @Test("every API answer carries the rate limit, counted down per call")
    func rateHeaders() async throws {
        try await GitHubHarness.with(rateLimit: 100) { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            let client = harness.rawClient(token: pat)
            let first = try #require(try await client.send(.get, "user").rateLimit)
            let second = try #require(try await client.send(.get, "user/repos").rateLimit)
            #expect(first.limit == 100 && first.remaining == 99 && first.resource == "core")
            #expect(second.remaining == 98 && second.used == 2)
            #expect(second.reset > Date())
        }
    }

    @Test("a list is paged by its Link header until there is no next page")
    func paging() async throws {
        try await GitHubHarness.with(repositoryCount: 42) { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            let client = harness.rawClient(token: pat)
            var pages: [GitHubResponse] = []
            for try await page in client.pages("user/repos", query: [("per_page", "10")]) { pages.append(page) }
            #expect(pages.count == 5)
            #expect(pages.first?.links["last"]?.query?.contains("page=5") == true)
            #expect(pages.last?.nextPage == nil)
            var names: [String] = []
            for try await repo in client.items("user/repos", query: [("per_page", "10")]) {
                names.append(try #require(repo["name"]?.stringValue))
            }
            #expect(names == (1...42).map { String(format: "repo-%03d", $0) })
            #expect(harness.emulator.requestCount(path: "/api/v3/user/repos") == 10)
        }
    }

    @Test("a paging link that leaves the API host is refused, so the token is not sent there")
    func foreignLink() async throws {
        let transport = RecordingTransport { request, _ in
            HTTPResponse(
                status: 200, headers: ["Link": "<https://evil.example/steal?page=2>; rel=\"next\""],
                body: Data("[1]".utf8))
        }
        let client = GitHubClient(
            github: GitHubProvider(clientID: "x"), transport: transport, token: "ghp_secret", policy: nil)
        var iterator = client.pages("user/repos").makeAsyncIterator()
        _ = try await iterator.next()
        let error = try await #require(throws: AuthError.self) { _ = try await iterator.next() }
        #expect(error.message.contains("evil.example"))
        #expect(transport.requests.count == 1)
    }

    @Test("the probe finds the API root without a token, and says why when the host is not GitHub")
    func probe() async throws {
        try await GitHubHarness.with { harness in
            let reachable = await harness.provider.probe(transport: harness.transport)
            #expect(reachable == nil, "\(reachable.map(String.init(describing:)) ?? "")")
            var wrong = harness.provider
            wrong.host.apiBaseURL = harness.endpoints.baseURL.appendingPathComponent("nothing-here")
            let error = try #require(await wrong.probe(transport: harness.transport))
            #expect(error.httpStatus == 404)
            // A port bound and never listening, held until the end: the kernel refuses every
            // connection at once. (A port closed again may be another test's server a moment later,
            // which once held this probe for its whole timeout on a loaded machine.)
            let refusing = try RefusedPort()
            defer { refusing.release() }
            var closed = harness.provider
            closed.host.apiBaseURL = URL(string: "http://127.0.0.1:\(refusing.port)/api/v3")!
            #expect(await closed.probe(transport: harness.transport)?.category == .retry)
        }
    }

    // MARK: The named scenarios

    @Test("bad-credentials: 401 says log in again")
    func badCredentials() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.badCredentials, count: 1)
            let error = try await #require(throws: AuthError.self) { try await harness.rawClient(token: pat).user() }
            #expect(error.ruleID == "bad-credentials")
            #expect(error.category == .authenticationReopenSession)
            #expect(error.recoveryTactic == .reauthenticate)
            #expect(error.httpStatus == 401)
            #expect(!error.message.contains(pat))
        }
    }

    @Test("primary-rate-limit: 403 with x-ratelimit-remaining 0 waits until x-ratelimit-reset")
    func primaryRateLimit() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.primaryRateLimit, count: 1, seconds: 90)
            let error = try await #require(throws: AuthError.self) { try await harness.rawClient(token: pat).user() }
            #expect(error.ruleID == "primary-rate-limit")
            #expect(error.category == .throttling)
            let wait = try #require(error.retryAfter)
            #expect(wait >= .seconds(85) && wait <= .seconds(92))
            #expect(error.details(as: GitHubErrorDetails.self)?.rateLimitReset != nil)
        }
    }

    @Test("secondary-rate-limit: 403 with retry-after backs off that long")
    func secondaryRateLimit() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.secondaryRateLimit, count: 1, seconds: 45)
            let error = try await #require(throws: AuthError.self) { try await harness.rawClient(token: pat).user() }
            #expect(error.ruleID == "secondary-rate-limit")
            #expect(error.recoveryTactic == .retryAfterBackoff)
            #expect(error.retryAfter == .seconds(45))
        }
    }

    @Test("sso-required: 403 with X-GitHub-SSO gives the authorisation URL from the header")
    func ssoRequired() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.ssoRequired, count: 1)
            let error = try await #require(throws: AuthError.self) { try await harness.rawClient(token: pat).user() }
            #expect(error.ruleID == "sso-required")
            let url = try #require(error.details(as: GitHubErrorDetails.self)?.ssoURL)
            #expect(
                url.hasPrefix(harness.endpoints.baseURL.absoluteString + "/orgs/sesame-org/sso?authorization_request="))
            #expect(error.message.contains(url))
            #expect(error.userMessage?.contains(url) == true)
            #expect(error.shouldNotifyUser)
        }
    }

    @Test("scope-missing: 403 Resource not accessible names the scope from X-Accepted-OAuth-Scopes")
    func scopeMissing() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(scopes: ["repo"])
            try await harness.activate(.scopeMissing, count: 1, scope: "admin:org")
            let error = try await #require(throws: AuthError.self) { try await harness.rawClient(token: pat).user() }
            #expect(error.ruleID == "missing-scope")
            #expect(error.category == .permissions)
            #expect(error.recoveryTactic == .requestPermissions)
            #expect(error.message.contains("'admin:org'"))
            #expect(error.userMessage?.contains("'admin:org'") == true)
            #expect(error.details(as: GitHubErrorDetails.self)?.acceptedScopes == ["admin:org"])
        }
    }

    @Test("a 404 whose X-Accepted-OAuth-Scopes the token lacks is a missing scope, not a missing page")
    func notFoundForScope() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(scopes: ["gist"])
            let error = try await #require(throws: AuthError.self) {
                try await harness.rawClient(token: pat).send(
                    .post, "user/repos", body: .object(["name": .string("new")]))
            }
            #expect(error.httpStatus == 404)
            #expect(error.ruleID == "missing-scope")
            #expect(error.message.contains("'public_repo' or 'repo'"))
        }
    }

    @Test("422 validation failed shows the body's errors")
    func validationFailed() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            let client = harness.rawClient(token: pat)
            let created = try await client.send(.post, "user/repos", body: .object(["name": .string("fresh")]))
            #expect(created.status == 201)
            let error = try await #require(throws: AuthError.self) {
                try await client.send(.post, "user/repos", body: .object(["name": .string("fresh")]))
            }
            #expect(error.ruleID == "validation-failed")
            #expect(error.category == .badRequest)
            #expect(error.message.contains("Repository.name: custom (name already exists on this account)"))
        }
    }

    // MARK: Recovery and pacing

    @Test("5xx answers are retried with back-off, and the call then succeeds")
    func serverErrorRetried() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.serverError, count: 2)
            let clock = ManualClock(autoAdvance: true)
            let client = GitHubClient(
                github: harness.provider, transport: harness.transport, token: pat,
                policy: RecoveryPolicy(maxAttempts: 3, jitter: .none), clock: clock)
            #expect(try await client.user().login == "octocat")
            #expect(harness.emulator.requestCount(path: "/api/v3/user") == 3)
            #expect(clock.sleeps.count == 1)  // the first retry is at once, the second after a back-off
        }
    }

    @Test("a secondary limit is waited out for its retry-after, then the call is made again")
    func secondaryRetried() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            try await harness.activate(.secondaryRateLimit, count: 1, seconds: 7)
            let clock = ManualClock(autoAdvance: true)
            let client = GitHubClient(
                github: harness.provider, transport: harness.transport, token: pat,
                policy: RecoveryPolicy(jitter: .none), clock: clock)
            #expect(try await client.user().login == "octocat")
            #expect(clock.sleeps == [.seconds(7)])
        }
    }

    @Test("calls slow down as the primary limit runs low, and stop at zero when the reset is too far")
    func pacing() async throws {
        try await GitHubHarness.with(rateLimit: 10) { harness in
            let pat = try await harness.emulator.issuePersonalToken()
            let clock = ManualClock(autoAdvance: true)
            let client = GitHubClient(
                github: harness.provider, transport: harness.transport, token: pat,
                policy: RecoveryPolicy(jitter: .none), governor: GitHubRateLimitGovernor(reserve: 0.5), clock: clock)
            for _ in 0..<10 { _ = try await client.send(.get, "user") }
            // Remaining 9..5 is at or above half: no wait; 4..1 left: each call waits.
            #expect(clock.sleeps.count == 4)
            #expect(clock.sleeps.allSatisfy { $0 > .zero && $0 <= .seconds(10) })
            // None left: the governor would wait until the reset, about an hour, capped at 15 minutes.
            #expect(client.governor.lastLimit()?.remaining == 0)
            #expect(client.governor.delay() == .seconds(900))
        }
    }

    // MARK: Expiring user tokens

    @Test("an expiring user token is refreshed through the session when it is due, and saved")
    func refresh() async throws {
        try await GitHubHarness.with(expiringTokens: true, accessTokenLifetime: 3600) { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.loggedInSession(store: store)
            let first = try #require(await session.token)
            #expect(first.tokenString.hasPrefix("ghu_"))
            #expect(first.refreshToken?.hasPrefix("ghr_") == true)
            let expiry = try #require(first.expirationDate)
            #expect(abs(expiry.timeIntervalSinceNow - 3600) < 60)

            // An hour later the old token is refused; the client's session refreshes before the call.
            await harness.advanceClocks(by: 3601)
            let me = try await session.client(policy: nil).user()
            #expect(me.login == "octocat")
            let second = try #require(await session.token)
            #expect(second.tokenString != first.tokenString)
            #expect(second.refreshToken != first.refreshToken)
            #expect(second.userID == "octocat")
            #expect(try await store.load(session.key)?.token.tokenString == second.tokenString)
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 2)

            // The used refresh token is gone: GitHub answers bad_refresh_token with HTTP 200.
            let error = try await #require(throws: AuthError.self) {
                try await harness.provider.oauth2(transport: harness.transport).refresh(first)
            }
            #expect(error.ruleID == "bad-refresh-token")
            #expect(error.category == .authenticationReopenSession)
        }
    }

    @Test("an expired stored token with a refresh token reopens without UI, refreshed and saved")
    func reopenRefreshes() async throws {
        try await GitHubHarness.with(expiringTokens: true, accessTokenLifetime: 3600) { harness in
            let store = InMemoryCredentialStore()
            let first = try #require(await harness.loggedInSession(store: store).token)
            await harness.advanceClocks(by: 3601)
            let later = harness.session(store: store)
            #expect(try await later.open(allowLoginUI: false).isOpen)
            let token = try #require(await later.token)
            #expect(token.tokenString != first.tokenString)
            #expect(try await store.load(later.key)?.token.tokenString == token.tokenString)
            #expect(try await later.client(policy: nil).user().login == "octocat")
        }
    }

    @Test("a login whose refresh token expired is not sent on reopen; it needs a new login and is kept")
    func reopenRefused() async throws {
        try await GitHubHarness.with(expiringTokens: true, accessTokenLifetime: 3600) { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.loggedInSession(store: store)
            await harness.advanceClocks(by: 200 * 86_400)  // past the refresh token's six months
            let later = harness.session(store: store)
            let refreshesBefore = harness.emulator.requestCount(path: "/login/oauth/access_token")
            let error = try await #require(throws: AuthError.self) { try await later.open(allowLoginUI: false) }
            #expect(error.category == .authenticationReopenSession)
            #expect(await later.state == .created)
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == refreshesBefore)
            let stored = try #require(try await store.load(session.key))
            #expect(later.session.condition(of: stored) == .needsLogin(.refreshTokenExpired))
        }
    }

    @Test("a token refused before its expiry is refreshed once and the call made again")
    func renewAfter401() async throws {
        try await GitHubHarness.with(expiringTokens: true) { harness in
            let session = try await harness.loggedInSession()
            let first = try #require(await session.token)
            await harness.emulator.revokeAccessTokens()
            #expect(try await session.client(policy: nil).user().login == "octocat")
            #expect(await session.token?.tokenString != first.tokenString)
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 2)
        }
    }

    @Test("a refused token that cannot be refreshed is reported as bad credentials, with no refresh tried")
    func noRenewWithoutRefreshToken() async throws {
        try await GitHubHarness.with { harness in
            let session = try await harness.loggedInSession()
            await harness.emulator.revokeAccessTokens()
            let error = try await #require(throws: AuthError.self) { try await session.client(policy: nil).user() }
            #expect(error.ruleID == "bad-credentials")
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 1)
        }
    }

    @Test("a token that does not expire is used as it is, with no refresh")
    func noRefreshNeeded() async throws {
        try await GitHubHarness.with { harness in
            let session = try await harness.loggedInSession()
            let before = try #require(await session.token)
            #expect(try await session.refresh().tokenString == before.tokenString)
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 1)
        }
    }
}

/// A port on 127.0.0.1 that refuses connections while it is held: bound, never listening.
private final class RefusedPort: Sendable {
    let port: Int
    private let socket: Locked<Int32?>

    init() throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RefusedPortError() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw RefusedPortError()
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        socket = Locked(descriptor)
    }

    func release() {
        if let descriptor = socket.withLock({ $0.take() }) { close(descriptor) }
    }

    deinit { release() }
}

private struct RefusedPortError: Error {}

import Foundation
import Sesame
import SesameCurl
import SesameGitHub
import SesameGitHubEmulator
import SesameTesting
import Testing

@Suite("GitHub logins end to end against the emulator over CurlTransport")
struct GitHubLoginEndToEndTests {
    @Test("an approved device login opens the session, stored under the host name as the app id")
    func deviceLogin() async throws {
        try await GitHubHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = try await harness.loggedInSession(store: store, scopes: ["repo", "read:org"])
            let token = try #require(await session.token)
            #expect(token.userID == "octocat")
            #expect(token.tokenString.hasPrefix("gho_"))
            #expect(token.permissions.granted == ["read:org", "repo"])
            #expect(token.expirationDate == nil)
            #expect(
                session.key == CredentialKey(provider: .github, appID: harness.endpoints.hostname, account: "default"))
            let stored = try #require(try await store.load(session.key))
            #expect(stored.token.tokenString == token.tokenString)
            #expect(harness.emulator.requestCount(path: "/login/device/code") == 1)
            #expect(harness.emulator.requestCount(path: "/api/v3/user") == 1)
        }
    }

    @Test("without scopes asked, the login asks for the provider's default scopes")
    func defaultScopes() async throws {
        try await GitHubHarness.with { harness in
            let session = try await harness.loggedInSession()
            #expect(await session.token?.permissions.granted == Set(GitHubProvider.standardScopes))
        }
    }

    @Test("slow_down, answered with HTTP 200, makes the flow poll at the answer's new interval")
    func slowDown() async throws {
        try await GitHubHarness.with { harness in
            try await harness.activate(.slowDown, count: 1)
            let clock = ManualClock(autoAdvance: true)
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: harness.deviceLogin(clock: clock))
            #expect(try await session.open(allowLoginUI: true) == .open)
            // 5 s before the first poll (slow_down, interval 10), then 10 s before the second.
            #expect(clock.sleeps == [.seconds(5), .seconds(10)])
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 2)
        }
    }

    @Test("authorization_pending, answered with HTTP 200, keeps polling until the person approves")
    func pending() async throws {
        try await GitHubHarness.with { harness in
            let clock = ManualClock()
            let flow = harness.deviceLogin(.nothing, clock: clock)
            let login = Task {
                try await flow.logIn(LoginRequest(provider: .github, appID: harness.provider.credentialAppID))
            }
            defer { login.cancel() }
            // Let it poll a few times (each answer "authorization_pending"), then approve. Between
            // polls the flow sleeps on the clock, which the test moves: each sleep follows an answer.
            while true {
                try #require(await clock.waitForSleepers(1), "the device login stopped polling")
                if harness.emulator.requestCount(path: "/login/oauth/access_token") >= 3 { break }
                clock.advance(by: .seconds(60))
            }
            let response = try await harness.transport.send(
                HTTPRequest(url: harness.endpoints.baseURL.appendingPathComponent("login/device")))
            #expect(response.status == 200)
            try await approveTheOnlyCode(harness)
            clock.advance(by: .seconds(60))
            let token = try await login.value
            #expect(token.userID == "octocat")
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") >= 4)
        }
    }

    /// Approves through the device page's form, as the person would in a browser.
    private func approveTheOnlyCode(_ harness: GitHubHarness) async throws {
        // The emulator knows the code; the admin API approves without it, so read it there.
        let codes = harness.emulator.pendingUserCodes
        let code = try #require(codes.first)
        let response = try await harness.transport.send(
            HTTPRequest(
                method: .post, url: harness.endpoints.baseURL.appendingPathComponent("login/device"),
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(FormEncoding.encode([("user_code", code), ("action", "authorize")]).utf8)))
        #expect(response.status == 200)
    }

    @Test("access_denied, answered with HTTP 200, is the person cancelling")
    func denied() async throws {
        try await GitHubHarness.with { harness in
            let store = InMemoryCredentialStore()
            let session = harness.session(store: store, loginUI: harness.deviceLogin(.deny))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.category == .userCancelled)
            #expect(error.ruleID == "access-denied")
            #expect(await session.state == .closedLoginFailed)
            #expect(try await store.list().isEmpty)
        }
    }

    @Test("expired_token, answered with HTTP 200, ends the login as an expired code")
    func expired() async throws {
        try await GitHubHarness.with { harness in
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: harness.deviceLogin(.expire))
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.loginFailedReason == .codeExpired)
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 1)
        }
    }

    @Test("device_flow_disabled, answered with HTTP 200 to the start, says the app must enable it")
    func deviceFlowDisabled() async throws {
        try await GitHubHarness.with { harness in
            try await harness.activate(.deviceFlowDisabled, count: 1)
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: harness.deviceLogin())
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.ruleID == "device-flow-disabled")
            #expect(error.category == .invalid)
            #expect(error.shouldNotifyUser)
            #expect(error.message.contains("Enable Device Flow"))
            #expect(harness.emulator.requestCount(path: "/login/oauth/access_token") == 0)
        }
    }

    @Test("incorrect_client_credentials, answered with HTTP 200, names a configuration problem")
    func wrongClient() async throws {
        try await GitHubHarness.with(clientID: "Iv1.not-this-one") { harness in
            let session = harness.session(store: InMemoryCredentialStore(), loginUI: harness.deviceLogin())
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.ruleID == "client-misconfigured")
            #expect(error.details(as: GitHubErrorDetails.self)?.githubError == "incorrect_client_credentials")
            #expect(error.userMessage?.contains("client id") == true)
        }
    }

    @Test(
        "incorrect_device_code and unsupported_grant_type, answered with HTTP 200, are read as errors",
        arguments: [
            ("urn:ietf:params:oauth:grant-type:device_code", "incorrect_device_code", "incorrect-device-code"),
            ("password", "unsupported_grant_type", "client-misconfigured"),
        ])
    func pollErrors(grantType: String, error expected: String, rule: String) async throws {
        try await GitHubHarness.with { harness in
            let response = try await harness.transport.send(
                HTTPRequest(
                    method: .post, url: harness.provider.host.accessTokenURL,
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                    body: Data(
                        FormEncoding.encode([
                            ("client_id", GitHubEmulator.defaultClientID), ("device_code", "no-such-code"),
                            ("grant_type", grantType),
                        ]).utf8)))
            #expect(response.status == 200)
            let dialect = try #require(harness.provider.oauth2(transport: harness.transport).deviceDialect)
            let context = DevicePollContext(
                authorization: DeviceAuthorization(
                    deviceCode: "no-such-code", userCode: "ABCD-EFGH",
                    verificationURL: harness.endpoints.baseURL, expiresIn: .seconds(900), interval: .seconds(5)),
                interval: .seconds(5), request: LoginRequest(provider: .github, appID: harness.endpoints.hostname))
            guard case .error(let oauth) = try await dialect.readPoll(response, context: context) else {
                Issue.record("the poll answer was not read as an error")
                return
            }
            #expect(oauth.error == expected)
            let classified = harness.provider.taxonomy.classifyLoginError(oauth)
            #expect(classified.ruleID == rule)
            #expect(classified.loginFailedReason == .providerError)
        }
    }

    @Test("a device login through DeviceLoginFlow with a wrong device code fails with incorrect_device_code")
    func flowWithBadCode() async throws {
        // The same answer reached through the flow: the dialect's poll error becomes the thrown error.
        try await GitHubHarness.with { harness in
            let dialect = BadCodeDialect(
                inner: try #require(harness.provider.oauth2(transport: harness.transport).deviceDialect))
            let flow = DeviceLoginFlow(
                dialect: dialect, presenter: DevicePerson(harness: harness, action: .nothing),
                transport: harness.transport, clock: ManualClock(autoAdvance: true))
            let error = try await #require(throws: AuthError.self) {
                try await flow.logIn(LoginRequest(provider: .github, appID: harness.endpoints.hostname))
            }
            #expect(error.ruleID == "incorrect-device-code")
        }
    }

    // MARK: A token supplied by the person

    @Test("a personal access token is checked with GET /user, then stored with its login and scopes")
    func withToken() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(user: "hubot", scopes: ["repo", "gist"])
            let store = InMemoryCredentialStore()
            let login = OAuth2TokenLogin(provider: harness.provider.oauth2(transport: harness.transport)) { pat + "\n" }
            let session = harness.session(store: store, loginUI: login, account: "hubot")
            #expect(try await session.open(allowLoginUI: true) == .open)
            let token = try #require(await session.token)
            #expect(token.tokenString == pat)
            #expect(token.userID == "hubot")
            #expect(token.permissions.granted == ["gist", "repo"])
            #expect(token.expirationDate == nil)
            #expect(try await store.load(session.key)?.token.tokenString == pat)
            #expect(harness.emulator.requestCount(path: "/api/v3/user") == 1)
        }
    }

    @Test("a fine-grained token has no scopes, and an expiring one keeps GitHub's expiry date")
    func fineGrained() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(scopes: nil, expiresIn: 30 * 86_400)
            #expect(pat.hasPrefix("github_pat_"))
            let token = try await OAuth2TokenLogin(provider: harness.provider.oauth2(transport: harness.transport)) {
                pat
            }
            .logIn(LoginRequest(provider: .github, appID: harness.endpoints.hostname))
            #expect(token.permissions.granted.isEmpty)
            let expiry = try #require(token.expirationDate)
            #expect(abs(expiry.timeIntervalSinceNow - 30 * 86_400) < 120)
        }
    }

    @Test("a token GitHub refuses is not stored, and the error never shows it")
    func refusedToken() async throws {
        try await GitHubHarness.with { harness in
            let bogus = "ghp_thisTokenDoesNotExist0123456789"
            let store = InMemoryCredentialStore()
            let session = harness.session(
                store: store,
                loginUI: OAuth2TokenLogin(provider: harness.provider.oauth2(transport: harness.transport)) { bogus })
            let error = try await #require(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
            #expect(error.loginFailedReason == .invalidSuppliedToken)
            #expect(error.httpStatus == 401)
            #expect(!error.description.contains(bogus))
            #expect(!String(describing: error.underlyingError as Any).contains(bogus))
            #expect(try await store.list().isEmpty)
        }
    }

    @Test("an empty or spaced token is refused before anything is sent", arguments: ["", "  ", "ghp_a b", "ghp_ü"])
    func malformedToken(text: String) async throws {
        let transport = RecordingTransport(always: HTTPResponse(status: 500))
        let login = OAuth2TokenLogin(provider: GitHubProvider(clientID: "x").oauth2(transport: transport)) { text }
        let error = try await #require(throws: AuthError.self) {
            try await login.logIn(LoginRequest(provider: .github, appID: "github.com"))
        }
        #expect(error.loginFailedReason == .invalidSuppliedToken)
        #expect(transport.requests.isEmpty)
    }

    @Test("a token lacking a scope the login asks for is refused, naming the scope")
    func tokenLacksScope() async throws {
        try await GitHubHarness.with { harness in
            let pat = try await harness.emulator.issuePersonalToken(scopes: ["gist"])
            let login = OAuth2TokenLogin(provider: harness.provider.oauth2(transport: harness.transport)) { pat }
            let error = try await #require(throws: AuthError.self) {
                try await login.logIn(
                    LoginRequest(provider: .github, appID: harness.endpoints.hostname, permissions: [.read("repo")]))
            }
            #expect(error.message.contains("lacks the scope repo"))
        }
    }
}

/// Starts like GitHub's dialect but polls with a device code GitHub never issued.
private struct BadCodeDialect: DeviceLoginDialect {
    let inner: any DeviceLoginDialect
    var provider: ProviderID { inner.provider }
    var errorTaxonomy: any ErrorTaxonomy { inner.errorTaxonomy }
    func startRequest(for request: LoginRequest) throws -> HTTPRequest { try inner.startRequest(for: request) }
    func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        var authorization = try inner.authorization(from: response, for: request)
        authorization.deviceCode = "not-the-code"
        return authorization
    }
    func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest { try inner.pollRequest(context) }
    func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        try await inner.readPoll(response, context: context)
    }
}

@Suite("The GitHub emulator in-process")
struct GitHubInProcessTests {
    @Test("a device login and a paged list work through the in-process transport, without sockets")
    func inProcess() async throws {
        let emulator = GitHubEmulator(repositoryCount: 3)
        let transport = emulator.transport
        let base = emulator.baseURL
        let github = GitHubProvider(
            host: GitHubHost(
                hostname: base.host ?? "", oauthBaseURL: base, apiBaseURL: base.appendingPathComponent("api/v3")),
            clientID: GitHubEmulator.defaultClientID)
        struct Approver: DeviceCodePresenter {
            let emulator: GitHubEmulator
            func present(_ authorization: DeviceAuthorization) async {
                try? await emulator.approveDevice(userCode: authorization.userCode, user: "octocat")
            }
        }
        let flow = GitHubSession.deviceLogin(
            provider: github, transport: transport, presenter: Approver(emulator: emulator),
            clock: ManualClock(autoAdvance: true))
        let token = try await flow.logIn(LoginRequest(provider: .github, appID: github.credentialAppID))
        #expect(token.userID == "octocat")
        let client = GitHubClient(github: github, transport: transport, token: token.tokenString, policy: nil)
        var names: [String] = []
        for try await repo in client.items("user/repos", query: [("per_page", "1")]) {
            names.append(repo["name"]?.stringValue ?? "?")
        }
        #expect(names == ["repo-001", "repo-002", "repo-003"])
        #expect(emulator.requestCount(path: "/api/v3/user") == 1)
    }
}

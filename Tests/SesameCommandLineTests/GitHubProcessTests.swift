import Foundation
import Sesame
import SesameDesktop
import SesameGitHubEmulator
import SesameTestSupport
import Testing

/// `sesame` with GitHub as a process: the built-in emulator with nothing configured, and an
/// in-test GitHub emulator reached through `SESAME_GITHUB_URL` (laid out as an Enterprise
/// Server) for device login, token login, status, scenarios, hosts kept apart and git.
@Suite("sesame with GitHub, as a process")
struct GitHubProcessTests {
    init() { TestProviders.bootstrap() }

    /// A running in-test emulator and the environment that points `sesame` at it.
    struct Server {
        let emulator: GitHubEmulator
        let endpoints: GitHubEmulatorEndpoints
        var environment: [String: String] {
            [
                "SESAME_GITHUB_URL": endpoints.baseURL.absoluteString,
                "SESAME_GITHUB_CLIENT_ID": GitHubEmulator.defaultClientID,
            ]
        }

        init(expiringTokens: Bool = false, accessTokenLifetime: TimeInterval = 28_800) async throws {
            emulator = GitHubEmulator(
                expiringTokens: expiringTokens, accessTokenLifetime: accessTokenLifetime, devicePollInterval: 1)
            endpoints = try await emulator.start()
        }

        /// Runs `body` with a started emulator, and awaits its stop afterwards.
        static func with<T>(
            expiringTokens: Bool = false, accessTokenLifetime: TimeInterval = 28_800, _ body: (Server) async throws -> T
        ) async throws -> T {
            try await withStarted(
                { try await Server(expiringTokens: expiringTokens, accessTokenLifetime: accessTokenLifetime) },
                stop: { await $0.emulator.stop() }, body)
        }
    }

    /// Runs `sesame login github ...` and approves (or denies) its device code in `server`.
    static func deviceLogin(
        _ cli: CLIHarness, _ arguments: [String] = [], server: Server, user: String? = nil, deny: Bool = false
    ) async throws -> ProcessResult {
        let process = try await cli.start("sesame", ["login", "github"] + arguments, environment: server.environment)
        let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z0-9]{4}-[A-Z0-9]{4}\n"#)
        #expect(printed.contains("open \(server.endpoints.baseURL.absoluteString)/login/device"))
        let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z0-9]{4}-[A-Z0-9]{4})\s*\n/#).map { String($0.1) })
        if deny {
            try await server.emulator.denyDevice(userCode: code)
        } else {
            try await server.emulator.approveDevice(userCode: code, user: user)
        }
        let result = await process.finish()
        cli.record("sesame login github \(arguments.joined(separator: " "))", result)
        return result
    }

    static func github(in status: ProcessResult) throws -> JSONValue {
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)), "\(status.standardError)")
        try DesktopProcessTests.expectStatusSchema(document)
        return try #require(document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == "github" })
    }

    @Test("with nothing configured: the built-in emulator's device login, status, token, switch and logout")
    func builtInEmulator() async throws {
        let cli = try CLIHarness()
        let auto = ["SESAME_EMULATOR_APPROVE": "auto"]
        let login = try await cli.run("sesame", ["login", "github"], environment: auto)
        #expect(login.status == 0, "\(login.standardError)")
        #expect(login.standardError.contains("built-in GitHub emulator"))
        #expect(login.standardOutput.contains("Logged in to the GitHub emulator as The Octocat (octocat)"))
        #expect(login.standardOutput.contains("granted: gist, read:org, repo"))
        let second = try await cli.run("sesame", ["login", "github", "--account", "work"], environment: auto)
        #expect(second.status == 0, "\(second.standardError)")

        // A later run starts a new emulator, which still knows the tokens it issued.
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        #expect(status.status == 0, "\(status.standardError)")
        let github = try Self.github(in: status)
        #expect(github["emulator"]?.boolValue == true)
        #expect(github["app_id"]?.stringValue == "github-emulator.localhost")
        #expect(github["details"]?["host"]?.stringValue == "github-emulator.localhost")
        let accounts = try #require(github["accounts"]?.arrayValue)
        #expect(accounts.count == 2)
        let work = try #require(accounts.first { $0["account"]?.stringValue == "work" })
        #expect(work["active"]?.boolValue == true)
        #expect(work["token_valid"]?.boolValue == true)
        #expect(work["user_id"]?.stringValue == "octocat")
        #expect(work["last_usage"]?["limit"]?.doubleValue == 5000)
        #expect(work["last_usage"]?["scopes"]?.arrayValue?.contains(.string("repo")) == true)

        let stored = try await cli.storedTokens()
        #expect(stored.count == 2)
        let switched = try await cli.run("sesame", ["switch", "github", "default"])
        #expect(switched.status == 0, "\(switched.standardError)")
        let token = try await cli.run("sesame", ["token", "github"])
        #expect(token.status == 0, "\(token.standardError)")
        #expect(stored.contains(String(token.standardOutput.dropLast())))
        #expect(token.standardOutput.hasPrefix("gho_"))

        let logout = try await cli.run("sesame", ["logout", "github"])
        #expect(logout.status == 0, "\(logout.standardError)")
        #expect(logout.standardOutput.contains("Logged out of the GitHub emulator account 'default' (user octocat)"))
        #expect(logout.standardOutput.contains("GitHub keeps the app's grant"))
        #expect(try await cli.storedTokens().count == 1)

        // The built-in emulator's scenarios come from the environment.
        let refused = try await cli.run(
            "sesame", ["status", "--json", "--timeout", "60"],
            environment: ["SESAME_GITHUB_EMULATOR_SCENARIO": "bad-credentials"])
        #expect(refused.status == 77, "\(refused.standardError)")
        let remaining = try #require(try Self.github(in: refused)["accounts"]?[0])
        #expect(remaining["account"]?.stringValue == "work")
        #expect(remaining["validity"]?.stringValue == "invalid")
        let unknown = try await cli.run(
            "sesame", ["token", "github"], environment: ["SESAME_GITHUB_EMULATOR_SCENARIO": "no-such-thing"])
        #expect(unknown.status == 78)
        #expect(unknown.standardError.contains("bad-credentials"))
        cli.expectNoTokenLeaks(stored)
    }

    @Test("device login against a configured GitHub, --with-token, and a denied or disabled device login")
    func configuredHost() async throws {
        try await Server.with { server in
            let cli = try CLIHarness()
            let login = try await Self.deviceLogin(cli, ["--scopes", "repo"], server: server, user: "hubot")
            #expect(login.status == 0, "\(login.standardError)")
            #expect(
                login.standardOutput.contains("Logged in to GitHub Enterprise (\(server.endpoints.hostname)) as Hubot"))
            #expect(login.standardOutput.contains("granted: repo"))

            let personal = try await server.emulator.issuePersonalToken(scopes: ["repo", "read:org"])
            let withToken = try await cli.run(
                "sesame", ["login", "github", "--with-token", "--account", "pat"], input: Data((personal + "\n").utf8),
                environment: server.environment)
            #expect(withToken.status == 0, "\(withToken.standardError)")
            #expect(
                withToken.standardOutput.contains("as The Octocat (octocat), account 'pat'; granted: read:org, repo"))
            let token = try await cli.run("sesame", ["token", "github"], environment: server.environment)
            #expect(token.standardOutput == personal + "\n")

            let refused = try await cli.run(
                "sesame", ["login", "github", "--with-token", "--account", "bad"],
                input: Data("ghp_notAToken123\n".utf8),
                environment: server.environment)
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("not accepted"))

            let denied = try await Self.deviceLogin(cli, ["--account", "denied"], server: server, deny: true)
            #expect(denied.status == 1, "\(denied.standardError)")

            await server.emulator.activate(GitHubScenarioSetting(.deviceFlowDisabled))
            let disabled = try await cli.run(
                "sesame", ["login", "github", "--account", "disabled"], environment: server.environment)
            #expect(disabled.status != 0)
            #expect(disabled.standardError.contains("does not allow signing in with a code"))
            await server.emulator.clearScenarios()

            let browser = try await cli.run("sesame", ["login", "github", "--web"], environment: server.environment)
            #expect(browser.status == 64)
            #expect(browser.standardError.contains("device code"))

            // GitHub lets no desktop app revoke a grant: the login goes, and the command says where to revoke it.
            let stored = try await cli.storedTokens()
            let revoke = try await cli.run(
                "sesame", ["logout", "github", "--account", "pat", "--revoke"], environment: server.environment)
            #expect(revoke.status == 69, "\(revoke.standardError)")
            #expect(revoke.standardError.contains("/settings/applications"))
            #expect(try await cli.storedTokens().count == stored.count - 1)

            let clear = try await cli.run(
                "sesame", ["token", "github"], environment: ["SESAME_GITHUB_URL": "http://github.example.com"])
            #expect(clear.status == 78)
            #expect(clear.standardError.contains("clear text"))
            cli.expectNoTokenLeaks(try await cli.storedTokens() + [personal])
        }
    }

    @Test("the device poll's HTTP-200 answers through the CLI: slow_down is obeyed, expired_token ends the login")
    func devicePollAnswers() async throws {
        try await Server.with { server in
            let cli = try CLIHarness()
            await server.emulator.activate(GitHubScenarioSetting(.slowDown, count: 1))
            let polls = server.emulator.requestCount(path: "/login/oauth/access_token")
            let slowed = try await Self.deviceLogin(cli, server: server)
            #expect(slowed.status == 0, "\(slowed.standardError)")
            #expect(server.emulator.requestCount(path: "/login/oauth/access_token") - polls >= 2)

            let process = try await cli.start(
                "sesame", ["login", "github", "--account", "late"], environment: server.environment)
            _ = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z0-9]{4}-[A-Z0-9]{4}\n"#)
            await server.emulator.advanceClock(by: 3600)
            let expired = await process.finish()
            cli.record("sesame login github --account late", expired)
            #expect(expired.status != 0)
            #expect(expired.standardError.contains("expired"), "\(expired.standardError)")
            #expect(try await cli.storedTokens().count == 1)
        }
    }

    /// What `sesame status` shows for each scenario of the emulator.
    static let scenarios: [(GitHubScenario, AccountCheck.Validity, String, Int32)] = [
        (.badCredentials, .invalid, "no longer valid", 77),
        (.ssoRequired, .unverified, "/orgs/sesame-org/sso", 75),
        (.primaryRateLimit, .unverified, "rate limit", 75),
        (.secondaryRateLimit, .unverified, "rate limit", 75),
        (.scopeMissing, .unverified, "admin:org", 75),
        (.serverError, .unverified, "GitHub", 75),
    ]

    @Test("each emulator scenario as sesame status reports it", arguments: 0..<6)
    func scenario(_ index: Int) async throws {
        let (scenario, validity, text, exit) = Self.scenarios[index]
        try await Server.with { server in
            let cli = try CLIHarness()
            let personal = try await server.emulator.issuePersonalToken()
            let login = try await cli.run(
                "sesame", ["login", "github", "--with-token"], input: Data(personal.utf8),
                environment: server.environment)
            #expect(login.status == 0, "\(login.standardError)")
            await server.emulator.activate(GitHubScenarioSetting(scenario))
            let status = try await cli.run(
                "sesame", ["status", "--json", "--timeout", "60"], environment: server.environment)
            #expect(status.status == exit, "\(scenario): \(status.standardOutput) \(status.standardError)")
            let account = try #require(try Self.github(in: status)["accounts"]?[0])
            #expect(account["validity"]?.stringValue == validity.rawValue, "\(scenario)")
            #expect(
                account["problem"]?.stringValue?.contains(text) == true, "\(scenario): \(account["problem"] ?? .null)")
            cli.expectNoTokenLeaks([personal])
        }
    }

    @Test("--hostname keeps each host's logins apart, and git credential fill gets each host's own")
    func hostsApartAndGit() async throws {
        let git = URL(fileURLWithPath: "/usr/bin/git")
        try #require(
            FileManager.default.isExecutableFile(atPath: git.path),
            "git is not installed; scripts/bootstrap installs it")
        try await Server.with { server in
            let cli = try CLIHarness()
            let octocat = try await server.emulator.issuePersonalToken()
            let hubot = try await server.emulator.issuePersonalToken(user: "hubot")
            let local = try await cli.run(
                "sesame", ["login", "github", "--with-token"], input: Data(octocat.utf8),
                environment: server.environment)
            #expect(local.status == 0, "\(local.standardError)")
            let enterprise = try await cli.run(
                "sesame", ["login", "github", "--with-token", "--hostname", "ghe.example.com", "--account", "work"],
                input: Data(hubot.utf8),
                environment: server.environment)
            #expect(enterprise.status == 0, "\(enterprise.standardError)")
            #expect(enterprise.standardOutput.contains("as Hubot (hubot)"))

            // One login per host, each host with its own active account: neither replaced the other.
            #expect(Set(try await cli.storedTokens()) == [octocat, hubot])
            let token = try await cli.run("sesame", ["token", "github"], environment: server.environment)
            #expect(token.standardOutput == octocat + "\n")
            let other = try await cli.run(
                "sesame", ["token", "github"],
                environment: server.environment.merging(["SESAME_GITHUB_HOSTNAME": "ghe.example.com"]) { $1 })
            #expect(other.standardOutput == hubot + "\n")

            var environment = cli.environment.merging(server.environment) { $1 }
            environment.merge([
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "LANG": "C.UTF-8",
            ]) {
                $1
            }
            let sesame = try ProcessRunner.builtExecutable("sesame")
            func fill(_ request: String) async throws -> ProcessResult {
                let result = try await ProcessRunner.run(
                    git,
                    [
                        "-c", "credential.helper=", "-c", "credential.helper=!\(sesame.path) git-credential",
                        "credential",
                        "fill",
                    ],
                    input: Data(request.utf8), environment: environment, killAfter: .seconds(30))
                // Not recorded for the leak check: git's output is where the token belongs.
                #expect(!result.standardError.contains("ghp_"), "\(result.standardError)")
                return result
            }
            let loopback = try await fill("protocol=http\nhost=\(server.endpoints.hostname)\n\n")
            #expect(loopback.status == 0, "\(loopback.standardError)")
            #expect(loopback.standardOutput.contains("username=octocat\npassword=\(octocat)\n"))
            let ghe = try await fill("url=https://ghe.example.com/org/repo.git\n\n")
            #expect(ghe.status == 0, "\(ghe.standardError)")
            #expect(ghe.standardOutput.contains("username=hubot\npassword=\(hubot)\n"))
            let wrongUser = try await fill("protocol=https\nhost=ghe.example.com\nusername=octocat\n\n")
            #expect(wrongUser.status != 0)
            #expect(!wrongUser.standardOutput.contains("password="))

            // store is a no-op; erase forgets nothing without --forget-refused.
            for operation in ["store", "erase"] {
                let result = try await cli.run(
                    "sesame", ["git-credential", operation],
                    input: Data("protocol=https\nhost=ghe.example.com\nusername=hubot\npassword=\(hubot)\n\n".utf8),
                    environment: server.environment)
                #expect(result.status == 0, "\(result.standardError)")
                #expect(result.standardOutput.isEmpty)
            }
            #expect(Set(try await cli.storedTokens()) == [octocat, hubot])
            let forget = try await cli.run(
                "sesame", ["git-credential", "--forget-refused", "erase"],
                input: Data("protocol=https\nhost=ghe.example.com\nusername=hubot\npassword=\(hubot)\n\n".utf8),
                environment: server.environment)
            #expect(forget.status == 0, "\(forget.standardError)")
            #expect(try await cli.storedTokens() == [octocat])

            // With no setting at all, commands use the previous login's host (ghe.example.com here).
            let remembered = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
            #expect(try Self.github(in: remembered)["details"]?["host"]?.stringValue == "ghe.example.com")
            cli.expectNoTokenLeaks([octocat, hubot])
        }
    }

    @Test("git credential fill refreshes an expiring token through the session and saves the new one")
    func gitRefreshesExpiringTokens() async throws {
        try await Server.with(expiringTokens: true, accessTokenLifetime: 60) { server in
            let cli = try CLIHarness()
            let login = try await Self.deviceLogin(cli, server: server)
            #expect(login.status == 0, "\(login.standardError)")
            let before = try await cli.storedTokens()
            #expect(before.count == 1)
            // Fifty seconds later the 60 s token is inside its leeway (a quarter of its lifetime): it is
            // refreshed when used.
            try await cli.age(by: 50)
            let answer = try await cli.run(
                "sesame", ["git-credential", "get"],
                input: Data("protocol=http\nhost=\(server.endpoints.hostname)\n\n".utf8),
                environment: server.environment)
            #expect(answer.status == 0, "\(answer.standardError)")
            let after = try await cli.storedTokens()
            #expect(after.count == 1)
            #expect(after != before)
            #expect(answer.standardOutput.hasPrefix("username=octocat\npassword=\(after[0])\npassword_expiry_utc="))
            let nothing = try await cli.run(
                "sesame", ["git-credential", "get"], input: Data("protocol=https\nhost=gitlab.com\n\n".utf8),
                environment: server.environment)
            #expect(nothing.status == 0)
            #expect(nothing.standardOutput.isEmpty)
            #expect(nothing.standardError.isEmpty)
            let oddHost = try await cli.run(
                "sesame", ["git-credential", "get"], input: Data("protocol=https\nhost=not a host/x\n\n".utf8),
                environment: server.environment)
            #expect(oddHost.status == 0, "\(oddHost.standardError)")
            #expect(oddHost.standardOutput.isEmpty)
        }
    }

    @Test("a request git would not send is refused with exit 65 and one 'sesame git-credential:' in front")
    func gitMalformedRequest() async throws {
        let cli = try CLIHarness()
        let refused = try await cli.run(
            "sesame", ["git-credential", "get"], input: Data("protocol=https\nno equals\n".utf8))
        #expect(refused.status == 65)
        #expect(refused.standardOutput.isEmpty)
        #expect(
            refused.standardError.hasPrefix("sesame git-credential: the request from git cannot be read: line 2"),
            "\(refused.standardError)")
        #expect(refused.standardError.components(separatedBy: "sesame git-credential:").count == 2)
    }

    @Test("explain-error --provider github, providers and doctor")
    func explainProvidersDoctor() async throws {
        let cli = try CLIHarness()
        let sso = try await cli.run(
            "sesame",
            [
                "explain-error", "--provider", "github", "--status", "403", "--header",
                "X-GitHub-SSO: required; url=https://github.com/orgs/acme/sso?authorization_request=AbC", "--body",
                #"{"message":"Resource protected by organization SAML enforcement."}"#, "--json",
            ])
        #expect(sso.status == 0, "\(sso.standardError)")
        #expect(sso.standardOutput.contains("https://github.com/orgs/acme/sso?authorization_request=AbC"))
        let limited = try await cli.run(
            "sesame",
            [
                "explain-error", "--provider", "github", "--status", "403", "--header", "x-ratelimit-remaining: 0",
                "--header", "x-ratelimit-reset: \(Int(Date().timeIntervalSince1970) + 120)", "--body",
                #"{"message":"API rate limit exceeded for user ID 1."}"#,
            ])
        #expect(limited.status == 0, "\(limited.standardError)")
        #expect(limited.standardOutput.contains("primary-rate-limit"))

        let providers = try await cli.run("sesame", ["providers"])
        #expect(providers.standardOutput.contains("github\n"))
        #expect(providers.standardOutput.contains("SESAME_GITHUB_HOSTNAME"))
        #expect(providers.standardOutput.contains("SESAME_GITHUB_CLIENT_ID"))

        let unconfigured = try await cli.run("sesame", ["doctor", "--storage", "file"])
        #expect(unconfigured.standardOutput.contains("GitHub: nothing is configured"), "\(unconfigured.standardOutput)")
        try await Server.with { server in
            let configured = try await cli.run(
                "sesame", ["doctor", "--storage", "file"], environment: server.environment)
            #expect(
                configured.standardOutput.contains("GitHub API at \(server.endpoints.apiURL.absoluteString) answers."),
                "\(configured.standardOutput)")
            #expect(configured.standardOutput.contains("GitHub client id \(GitHubEmulator.defaultClientID)"))
        }
    }
}

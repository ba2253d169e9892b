import Foundation
import Sesame
import SesameCurl
import SesameFacebookEmulator
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sesame` and the examples run as processes against the built-in emulator, each test in its
/// own temporary XDG directories with file storage.
@Suite("sesame and the examples as processes")
struct DesktopProcessTests {
    init() { TestProviders.bootstrap() }

    @Test("device login approved through the admin API; the next run opens silently; status, token, logout")
    func deviceLoginLifecycle() async throws {
        let cli = try CLIHarness()
        let login = try await cli.start("sesame", ["login", "facebook", "--scopes", "email"])
        try await cli.approveDevice(of: login)
        let result = await login.finish()
        cli.record("sesame login facebook", result)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.contains("Using Sesame's built-in Facebook emulator (no app id is configured"))
        #expect(result.standardOutput.contains("Logged in to the Facebook emulator as Sam Sesame (100000000000001)"))
        #expect(result.standardOutput.contains("email"))

        // A second start: the cached token opens the session without any login UI.
        let again = try await cli.run("fb-login", [])
        #expect(again.status == 0)
        #expect(again.standardOutput.contains("session: created → createdTokenLoaded"))
        #expect(again.standardOutput.contains("Welcome back, Sam Sesame"))
        #expect(!again.standardError.contains("enter the code"))

        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        #expect(status.status == 0)
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        try Self.expectStatusSchema(document)
        let account = try #require(document["providers"]?[0]?["accounts"]?[0])
        #expect(account["user_id"]?.stringValue == "100000000000001")
        #expect(account["user_name"]?.stringValue == "Sam Sesame")
        #expect(account["granted"]?.arrayValue?.contains(.string("email")) == true)
        #expect(account["active"]?.boolValue == true)
        #expect(account["token_valid"]?.boolValue == true)
        #expect(document["providers"]?[0]?["storage"]?["reason"]?.stringValue?.contains("SESAME_STORAGE") == true)

        let token = try await cli.run("sesame", ["token", "facebook"])
        #expect(token.status == 0)
        let stored = try await cli.storedTokens()
        #expect(stored == [token.standardOutput.trimmingCharacters(in: .newlines)])

        let logout = try await cli.run("sesame", ["logout", "facebook"])
        #expect(logout.status == 0)
        #expect(try await cli.storedTokens().isEmpty)
        let after = try await cli.run("sesame", ["token", "facebook"])
        #expect(after.status == 77)
        #expect(after.standardError.contains("sesame login facebook"))
        // No token: the login screen and a device login again.
        let relogin = try await cli.start("fb-login", [])
        try await cli.approveDevice(of: relogin)
        let fresh = await relogin.finish()
        cli.record("fb-login", fresh)
        #expect(fresh.standardOutput.contains("Log in with Facebook"))
        #expect(fresh.standardOutput.contains("session: created → opening"))
        #expect(fresh.standardOutput.contains("Logged in as Sam Sesame."))
        cli.expectNoTokenLeaks(stored + (try await cli.storedTokens()))
    }

    @Test("--web opens the browser on the dialog; the person continues there and is sent back to the app")
    func browserLogin() async throws {
        let cli = try CLIHarness()
        // A stand-in for xdg-open that records the address it was asked to open; the test then
        // does what the person's browser would.
        let bin = cli.root.appending(path: "bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let opened = cli.root.appending(path: "opened.txt")
        let script = bin.appending(path: "xdg-open")
        try Data("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(opened.path)'\n".utf8).write(to: script)
        #expect(chmod(script.path, 0o755) == 0)
        let login = try await cli.start(
            "sesame", ["login", "facebook", "--web", "--scopes", "email"],
            environment: [
                "PATH": bin.path + ":" + (cli.environment["PATH"] ?? "/usr/bin:/bin"), "DISPLAY": ":99",
                "SESAME_EMULATOR_APPROVE": "off",
            ])
        let printed = try await login.waitForError(matching: #"If none appeared, open this address:\n\n\s+\S+\n"#)
        let dialog = try #require(
            printed.firstMatch(of: #/\n\s+(http://127\.0\.0\.1:\d+/v[\d.]+/dialog/oauth\?\S+)\n/#).map { String($0.1) })
        #expect(try String(contentsOf: opened, encoding: .utf8) == dialog + "\n")

        // The browser: the consent page, then Continue with what it offers.
        let browser = CurlTransport()
        let page = try await browser.send(HTTPRequest(url: try #require(URL(string: dialog))))
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 200)
        #expect(html.contains(#"value="email""#))
        let requestID = try #require(html.firstMatch(of: #/name="request_id" value="([^"]+)"/#).map { String($0.1) })
        let user = try #require(html.firstMatch(of: #/name="user" value="([^"]+)"/#).map { String($0.1) })
        let form = [
            ("request_id", requestID), ("user", user), ("permission", "public_profile"), ("permission", "email"),
            ("action", "continue"),
        ]
        let answer = try await browser.send(
            HTTPRequest(
                method: .post, url: try #require(URL(string: String(dialog.prefix { $0 != "?" }) + "/confirm")),
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(FormEncoding.encode(form).utf8)))
        #expect([302, 303].contains(answer.status))
        let location = try #require(answer.headers["Location"])
        #expect(location.hasPrefix("http://127.0.0.1:"))
        let back = try await browser.send(HTTPRequest(url: try #require(URL(string: location))))
        #expect(back.status == 200)
        #expect(String(decoding: back.body, as: UTF8.self).contains("You can close this window"))

        let result = await login.finish()
        cli.record("sesame login facebook --web", result)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("Logged in to the Facebook emulator as Sam Sesame (100000000000001)"))
        #expect(result.standardOutput.contains("email"))
        #expect(!result.standardError.contains("[emulator]"), "the emulator approved it itself")
        cli.expectNoTokenLeaks(try await cli.storedTokens())
    }

    /// The documented `status --json` schema: these keys, these types.
    static func expectStatusSchema(_ document: JSONValue) throws {
        #expect(document["version"]?.lenientInt == 2)
        let providers = try #require(document["providers"]?.arrayValue)
        for provider in providers {
            #expect(
                Set(try #require(provider.objectValue).keys) == [
                    "provider", "display_name", "app_id", "emulator", "details", "storage", "problem", "unreadable",
                    "accounts",
                ])
            #expect(provider["provider"]?.stringValue != nil)
            #expect(provider["app_id"]?.stringValue != nil)
            #expect(provider["emulator"]?.boolValue != nil)
            #expect(provider["details"]?.objectValue != nil)
            #expect(["keyring", "file", "memory"].contains(provider["storage"]?["backend"]?.stringValue ?? ""))
            #expect(provider["storage"]?["description"]?.stringValue != nil)
            #expect(provider["storage"]?["reason"]?.stringValue != nil)
            for account in try #require(provider["accounts"]?.arrayValue) {
                let keys = Set(try #require(account.objectValue).keys)
                #expect(
                    keys == [
                        "account", "active", "user_id", "user_name", "granted", "declined", "expires_at",
                        "data_access_expires_at", "validity", "checked_online", "needs_login", "token_valid",
                        "problem", "last_usage", "granular_scopes",
                    ])
                let validity = try #require(account["validity"]?.stringValue)
                #expect(["valid", "invalid", "unverified", "not_checked"].contains(validity))
                #expect(account["needs_login"]?.boolValue == (validity == "invalid"))
                #expect(account["granted"]?.arrayValue != nil && account["declined"]?.arrayValue != nil)
                if let expiry = account["expires_at"]?.stringValue {
                    #expect(ISO8601DateFormatter().date(from: expiry) != nil)
                }
            }
        }
    }

    @Test("--with-token reads standard input, checks the token, and refuses a bad one without echoing it")
    func withToken() async throws {
        let cli = try CLIHarness()
        try await cli.run("sesame", ["login", "facebook"], environment: ["SESAME_EMULATOR_APPROVE": "auto"])
        let token = try await cli.run("sesame", ["token", "facebook"])
        let secret = token.standardOutput.trimmingCharacters(in: .newlines)
        try await cli.run("sesame", ["logout", "facebook"])  // forgets it here; the emulator still accepts it

        let login = try await cli.run(
            "sesame", ["login", "facebook", "--with-token"], input: Data((secret + "\n").utf8))
        #expect(login.status == 0, "\(login.standardError)")
        #expect(try await cli.storedTokens() == [secret])

        let bogus = "EAAbogus0token0that0facebook0never0issued"
        let refused = try await cli.run(
            "sesame", ["login", "facebook", "--with-token", "--account", "other"], input: Data(bogus.utf8))
        #expect(refused.status == 65)
        #expect(refused.standardError.contains("not accepted"))
        #expect(!(refused.standardOutput + refused.standardError).contains(bogus))
        #expect(try await cli.storedTokens() == [secret])
        cli.expectNoTokenLeaks([secret, bogus])
    }

    @Test("accounts: a second login under another name, switch, and status marks the active one")
    func accounts() async throws {
        let cli = try CLIHarness()
        let approve = ["SESAME_EMULATOR_APPROVE": "auto"]
        try await cli.run("sesame", ["login", "facebook"], environment: approve)
        try await cli.run("sesame", ["login", "facebook", "--account", "work"], environment: approve)
        let unknown = try await cli.run("sesame", ["switch", "facebook", "nobody"])
        #expect(unknown.status == 77)
        #expect(unknown.standardError.contains("default, work"))
        #expect(try await cli.run("sesame", ["switch", "facebook", "default"]).status == 0)
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        let accounts = try #require(JSONValue(parsing: Data(status.standardOutput.utf8))?["providers"]?[0]?["accounts"])
        let active = (accounts.arrayValue ?? []).filter { $0["active"]?.boolValue == true }.map { $0["account"] }
        #expect(active == [.string("default")])
        cli.expectNoTokenLeaks(try await cli.storedTokens())
    }

    /// A scenario for `fb-publish`, and what its output must show.
    struct PublishCase: Sendable, CustomTestStringConvertible {
        var scenario: String
        var status: Int32
        var shows: [String]
        var hides: [String] = []
        var testDescription: String { scenario }
    }

    @Test(
        "fb-publish under each relevant scenario",
        arguments: [
            PublishCase(scenario: "", status: 0, shows: ["Posted: 100000000000001_"]),
            PublishCase(
                scenario: "transient,count=1", status: 0, shows: ["before attempt 2", "Posted: 100000000000001_"]),
            PublishCase(
                scenario: "app-throttled,count=1,regainAccessMinutes=0", status: 0,
                shows: ["(#4) Application request limit", "before attempt 2", "Posted:"]),
            PublishCase(
                scenario: "permission-revoked,count=1", status: 0,
                shows: ["Facebook needs your permission again to publish", "Posted:"]),
            PublishCase(scenario: "app-removed", status: 0, shows: ["Session Error", "removed", "Posted:"]),
            // One message, titled by the recovery processor, never followed by a generic second one.
            PublishCase(
                scenario: "duplicate-post", status: 1,
                shows: ["Already Posted: You already posted this."], hides: ["Something Went Wrong"]),
            PublishCase(
                scenario: "unknown-error", status: 1,
                shows: ["before attempt 4", "Facebook Is Unavailable: Facebook is having trouble right now."],
                hides: ["Unknown error", "Unable to post to open graph"]),
        ])
    func publish(_ example: PublishCase) async throws {
        let cli = try CLIHarness()
        let approve = ["SESAME_EMULATOR_APPROVE": "auto"]
        // Logged in with publish_actions granted first, so the scenario meets the post itself.
        let first = try await cli.run("fb-publish", ["first post"], environment: approve)
        #expect(first.status == 0, "\(first.standardOutput)\(first.standardError)")
        #expect(first.standardOutput.contains("Asking for permission to publish"))
        let result = try await cli.run(
            "fb-publish", ["hello, \(example.scenario)"],
            environment: approve.merging(["SESAME_EMULATOR_SCENARIO": example.scenario]) { $1 })
        #expect(result.status == example.status, "\(result.standardOutput)\(result.standardError)")
        for text in example.shows { #expect(result.standardOutput.contains(text), "\(result.standardOutput)") }
        for text in example.hides { #expect(!result.standardOutput.contains(text), "\(result.standardOutput)") }
        #expect(!result.standardOutput.contains("Asking for permission to publish"))  // granted already
        cli.expectNoTokenLeaks(try await cli.storedTokens())
    }

    /// What `fb-errors NAME` must show for a scenario, by the one rule: the title of the tactic (or the
    /// provider's own when it asks to notify), and `userMessage` when `shouldNotifyUser`, otherwise the
    /// `contextualMessage` that the row chose by code and subcode; or no alert at all.
    static let alerts: [(String, String?, String?)] = [
        ("app-removed", "Session Error", "The app was removed. Please log in again."),
        ("password-changed", "Session Error", "Your Facebook password was changed."),
        ("token-expired", "Session Error", "Your Facebook login has expired."),
        ("invalid-session", "Session Error", "Your Facebook session is no longer valid."),
        ("checkpointed", "Account Locked", "Log in at www.facebook.com to unlock it"),
        ("unconfirmed-user", "Account Not Confirmed", "Your Facebook account is not confirmed yet."),
        ("permission-revoked", "Permission Error", "Allow it when Facebook asks"),
        ("duplicate-post", "Already Posted", "You already posted this."),
        ("user-message", "You're Temporarily Blocked", "You've been temporarily blocked"),
        ("app-throttled", "Please Wait", "Wait a little, then try again."),
        ("user-throttled", "Please Wait", "Wait a little, then try again."),
        ("page-throttled", "Please Wait", "Wait a little, then try again."),
        ("rate-limited", "Please Wait", "Wait a little, then try again."),
        ("transient", "Please Wait", "Facebook is having trouble right now."),
        ("unknown-error", "Please Wait", "Facebook is having trouble right now."),
        ("drop-connection", "Something Went Wrong", "Something went wrong for a moment."),
        ("slow", nil, nil),
        ("legacy-forms", nil, nil),
    ]

    @Test("the table above covers every emulator scenario")
    func everyScenarioIsCovered() {
        #expect(Set(Self.alerts.map(\.0)) == Set(EmulatorScenario.allCases.map(\.rawValue)))
    }

    @Test("fb-errors shows the alert the one rule gives for each scenario", arguments: Self.alerts)
    func errorAlert(_ scenario: String, _ title: String?, _ message: String?) async throws {
        let cli = try CLIHarness(storage: "memory")
        let result = try await cli.run("fb-errors", [scenario])
        #expect(result.status == 0, "\(result.standardError)")
        // The box joins wrapped lines with "│ ... │"; unwrap it to read the message.
        let text = result.standardOutput.split(separator: "\n").map {
            $0.trimmingCharacters(in: CharacterSet(charactersIn: "│ "))
        }.joined(separator: " ")
        if let title, let message {
            #expect(result.standardOutput.contains("│ \(title) "))
            #expect(text.contains(message), "\(result.standardOutput)")
            #expect(result.standardOutput.contains("[ OK ]"))
        } else {
            #expect(!result.standardOutput.contains("[ OK ]"))
            #expect(result.standardOutput.contains("no error"))
        }
    }

    @Test("fb-errors reads an error body from standard input; a cancelled login shows nothing")
    func errorFromStandardInput() async throws {
        let cli = try CLIHarness(storage: "memory")
        let removed = try await cli.run(
            "fb-errors", ["-"], input: Data(#"{"error":{"code":190,"error_subcode":458,"type":"OAuthException"}}"#.utf8)
        )
        #expect(removed.standardOutput.contains("The app was removed. Please log in again."))
        let all = try await cli.run("fb-errors", ["--all"])
        #expect(all.status == 0)
        #expect(all.standardOutput.components(separatedBy: "== ").count - 1 == EmulatorScenario.allCases.count)
    }

    @Test(
        "usage errors exit 64 with a sentence and the usage",
        arguments: [
            ["login"], ["login", "myspace"], ["login", "facebook", "--device", "--web"],
            ["login", "facebook", "--with-token", "--web"], ["status", "--jsn"], ["token"],
            ["switch", "facebook"], ["permissions", "facebook", "request"],
            ["permissions", "facebook", "request", "publish_actions", "--audience", "nobody"],
            ["permissions", "facebook", "frobnicate"], ["logout", "facebook", "extra"], ["nonsense"],
            ["login", "facebook", "--storage", "cloud"], ["emulator", "--port", "99999"],
        ])
    func usageErrors(_ arguments: [String]) async throws {
        let cli = try CLIHarness()
        let result = try await cli.run("sesame", arguments)
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("USAGE"))
    }

    @Test("--help on every command, from the tree, exits 0")
    func help() async throws {
        let cli = try CLIHarness()
        for command in [
            "login", "status", "token", "logout", "switch", "permissions", "doctor", "emulator", "explain-error",
            "providers", "git-credential",
        ] {
            let result = try await cli.run("sesame", [command, "--help"])
            #expect(result.status == 0)
            #expect(result.standardOutput.hasPrefix("sesame \(command): "))
        }
    }

    @Test("the keyring is never silently replaced by a file")
    func noSilentDowngrade() async throws {
        let cli = try CLIHarness(storage: "keyring")
        // A session bus address where nothing listens: there is no keyring to be had.
        let deadBus = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(cli.root.path)/no-bus-here"]
        let result = try await cli.run("sesame", ["status"], environment: deadBus)
        #expect(result.status == 69, "\(result.standardError)")
        #expect(result.standardError.contains("--storage file"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: cli.root.appending(path: "state/sesame/credentials.json").path))

        // keyring-or-file does fall back, and says so.
        let fallback = try await cli.run("sesame", ["status", "--storage", "keyring-or-file"], environment: deadBus)
        #expect(fallback.status == 77, "nothing is logged in: \(fallback.standardError)")
        #expect((fallback.standardOutput + fallback.standardError).contains("the keyring is not available"))
    }

    @Test(
        "with the desktop keyring: the login is kept in the Secret Service, found by secret-tool, and reopens silently",
        .enabled(
            if: ProcessInfo.processInfo.environment["SESAME_TEST_KEYRING"] == "1",
            "needs the private keyring that scripts/with-keyring starts (SESAME_TEST_KEYRING=1)"))
    func keyringLifecycle() async throws {
        let cli = try CLIHarness(storage: "keyring")
        let account = "keyring-\(UUID().uuidString.prefix(8))"
        let login = try await cli.start("sesame", ["login", "facebook", "--account", account])
        try await cli.approveDevice(of: login)
        let result = await login.finish()
        cli.record("sesame login facebook --account \(account)", result)
        #expect(result.status == 0, "\(result.standardError)")

        // Scrumptious's second start: the cached token, now in the keyring, opens the session silently.
        let again = try await cli.run("fb-login", [])
        #expect(again.standardOutput.contains("session: created → createdTokenLoaded"), "\(again.standardOutput)")
        #expect(!again.standardError.contains("enter the code"))

        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        #expect(document["providers"]?[0]?["storage"]?["backend"]?.stringValue?.contains("keyring") == true)
        #expect(!FileManager.default.fileExists(atPath: cli.root.appending(path: "state/sesame/credentials.json").path))

        // Interoperable: secret-tool finds the item by its attributes; its secret holds the token.
        // gnome-keyring, busy with the keyring tests' writers in parallel, can hide its login
        // collection for a moment ("does not exist"); a read in that window is asked again, for
        // up to 3 s, before it counts as missing.
        let secretTool = URL(fileURLWithPath: "/usr/bin/secret-tool")
        var found = try await ProcessRunner.run(secretTool, ["lookup", "provider", "facebook", "account", account])
        var token = try await cli.run("sesame", ["token", "facebook", "--account", account])
        for _ in 0..<30 where found.status != 0 || token.status != 0 {
            // Polling the keyring, which announces nothing when the collection shows again.
            try await Task.sleep(for: .milliseconds(100))
            found = try await ProcessRunner.run(secretTool, ["lookup", "provider", "facebook", "account", account])
            token = try await cli.run("sesame", ["token", "facebook", "--account", account])
        }
        #expect(found.status == 0, "\(found.standardError)\n\(status.standardOutput)")
        #expect(token.status == 0, "\(token.standardError)")
        let tokenString = token.standardOutput.trimmingCharacters(in: .newlines)
        // The secret is the credential's JSON in base64 (schema_version 2).
        let secret = try #require(
            Data(base64Encoded: found.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)),
            "the item's secret is not base64")
        #expect(!tokenString.isEmpty && String(decoding: secret, as: UTF8.self).contains(tokenString))

        let logout = try await cli.run("sesame", ["logout", "facebook", "--account", account])
        #expect(logout.status == 0)
        let gone = try await ProcessRunner.run(secretTool, ["lookup", "provider", "facebook", "account", account])
        #expect(gone.standardOutput.isEmpty)
        cli.expectNoTokenLeaks([tokenString])
    }
}

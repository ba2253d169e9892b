import AcmeEmulator
import Foundation
import Sesame
import Testing

/// `acme-sesame`, the `sesame` command with Acme added from outside Sesame's package, run as a
/// process: every command works for the fourth provider as for the built-in three.
@Suite("acme-sesame: a fourth provider from another package")
struct AcmeSesameTests {
    /// Logs in to the built-in emulator as `account`, approved automatically.
    static func logIn(_ home: Home, _ arguments: [String] = []) async throws -> Outcome {
        let login = try await home.run(["login", "acme"] + arguments)
        #expect(login.status == 0, "\(login.standardError)")
        return login
    }

    /// The `acme` entry of `status --json`.
    static func acme(in status: Outcome) throws -> JSONValue {
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)), "\(status.standardError)")
        #expect(document["version"]?.doubleValue == 2)
        return try #require(document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == "acme" })
    }

    @Test("login acme: device login against the built-in emulator, approved automatically")
    func deviceLogin() async throws {
        let home = try Home()
        let login = try await Self.logIn(home)
        #expect(login.standardError.contains("Using the built-in Acme emulator"))
        #expect(login.standardError.contains("To sign in to the Acme emulator, open http://127.0.0.1:"))
        #expect(login.standardError.contains("[emulator] Approving this login as Wile E. Coyote"))
        #expect(
            login.standardOutput.contains(
                "Logged in to the Acme emulator as Wile E. Coyote (1001), account 'default'; granted: profile."))
        let stored = try await home.acmeLogins()
        #expect(stored.map(\.key.appID) == [AcmeEmulator.defaultClientID])
        #expect(stored.first?.token.refreshToken != nil)
        #expect(!login.standardOutput.contains(stored[0].token.tokenString))
    }

    @Test("login acme --web: the browser login with PKCE and a loopback redirect, the consent approved")
    func browserLogin() async throws {
        let home = try Home()
        let login = try await Self.logIn(home, ["--web", "--no-browser", "--account", "web", "--scopes", "read,write"])
        #expect(login.standardError.contains("/oauth/authorize?"))
        #expect(login.standardError.contains("code_challenge_method=S256"))
        #expect(login.standardOutput.contains("as Wile E. Coyote (1001), account 'web'; granted: read, write."))
        #expect(try await home.acmeLogins().map(\.key.account) == ["web"])
    }

    @Test("status and status --json show the Acme login, checked with the emulator's /api/me")
    func status() async throws {
        let home = try Home()
        _ = try await Self.logIn(home)
        let text = try await home.run(["status", "--timeout", "60"])
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.contains("Acme"))
        #expect(text.standardOutput.contains("Wile E. Coyote"))

        // A later run starts a new emulator, which knows the tokens the login's run issued.
        let status = try await home.run(["status", "--json", "--timeout", "60"])
        #expect(status.status == 0, "\(status.standardError)")
        let acme = try Self.acme(in: status)
        #expect(acme["display_name"]?.stringValue == "Acme")
        #expect(acme["emulator"]?.boolValue == true)
        #expect(acme["app_id"]?.stringValue == AcmeEmulator.defaultClientID)
        let account = try #require(acme["accounts"]?[0])
        #expect(account["account"]?.stringValue == "default")
        #expect(account["active"]?.boolValue == true)
        #expect(account["validity"]?.stringValue == "valid")
        #expect(account["checked_online"]?.boolValue == true)
        #expect(account["user_id"]?.stringValue == "1001")
        #expect(account["user_name"]?.stringValue == "Wile E. Coyote")
        #expect(account["granted"]?.arrayValue == [.string("profile")])
    }

    @Test("token acme prints the token; once expired it is refreshed, and the retired refresh token is refused")
    func tokenAndRefresh() async throws {
        let home = try Home()
        _ = try await Self.logIn(home)
        let before = try #require(try await home.acmeLogins().first)
        let token = try await home.run(["token", "acme"])
        #expect(token.status == 0, "\(token.standardError)")
        #expect(token.standardOutput == before.token.tokenString + "\n")

        // Two hours on, the hour-long access token has expired: the core renews it with the
        // refresh token, the emulator rotates that, and the new login is saved before it is used.
        try await home.age(by: 7200)
        let expired = try #require(try await home.acmeLogins().first)
        let renewed = try await home.run(["token", "acme"])
        #expect(renewed.status == 0, "\(renewed.standardError)")
        let after = try #require(try await home.acmeLogins().first)
        #expect(renewed.standardOutput == after.token.tokenString + "\n")
        #expect(after.token.tokenString != before.token.tokenString)
        #expect(after.token.refreshToken != before.token.refreshToken)
        #expect(after.token.userID == "1001")
        let emulator = AcmeEmulator()
        try emulator.restoreState(from: try Data(contentsOf: home.emulatorState))
        #expect(emulator.refreshCounts.answered == 1)
        let status = try await home.run(["status", "--json", "--timeout", "60"])
        #expect(try Self.acme(in: status)["accounts"]?[0]?["validity"]?.stringValue == "valid")

        // The refresh token the emulator retired, sent again (a copy of the old login), is refused,
        // and the login is kept, marked as needing a new login.
        try await home.store.save(expired)
        let reused = try await home.run(["token", "acme"])
        #expect(reused.status == 77, "\(reused.standardError)")
        #expect(reused.standardError.contains("Log in again with 'acme-sesame login acme'"), "\(reused.standardError)")
        #expect(try await home.acmeLogins().first?.needsLogin == true)
        #expect(!reused.standardError.contains(expired.token.refreshToken ?? "-"))
    }

    @Test("switch acme OTHER makes another login active; logout acme removes one, --revoke revokes it too")
    func switchAndLogout() async throws {
        let home = try Home()
        _ = try await Self.logIn(home)
        _ = try await Self.logIn(home, ["--account", "other"])
        let logins = try await home.acmeLogins()
        let tokens = Dictionary(uniqueKeysWithValues: logins.map { ($0.key.account, $0.token.tokenString) })
        #expect(try await home.run(["token", "acme"]).standardOutput == tokens["other"].map { $0 + "\n" })

        let switched = try await home.run(["switch", "acme", "default"])
        #expect(switched.status == 0, "\(switched.standardError)")
        #expect(switched.standardOutput == "The account 'default' of the Acme emulator is now the active one.\n")
        #expect(try await home.run(["token", "acme"]).standardOutput == tokens["default"].map { $0 + "\n" })
        let unknown = try await home.run(["switch", "acme", "nobody"])
        #expect(unknown.status == 77)
        #expect(unknown.standardError.contains("'nobody'"))

        let logout = try await home.run(["logout", "acme"])
        #expect(logout.status == 0, "\(logout.standardError)")
        #expect(logout.standardOutput == "Logged out of the Acme emulator account 'default' (user 1001).\n")
        #expect(logout.standardError.contains("Account 'other' is now the active one."))
        #expect(try await home.acmeLogins().map(\.key.account) == ["other"])

        let revoke = try await home.run(["logout", "acme", "--revoke"])
        #expect(revoke.status == 0, "\(revoke.standardError)")
        #expect(revoke.standardOutput.contains("account 'other' (user 1001); its tokens were revoked."))
        #expect(try await home.acmeLogins().isEmpty)
        let gone = try await home.run(["token", "acme"])
        #expect(gone.status == 77)
        #expect(gone.standardError.contains("Not logged in to the Acme emulator"))
    }

    /// A response, the category it gets and the row that says so: Acme's own, or the core's base
    /// row that AcmeErrors.json extends.
    static let errors: [(status: Int, body: String, category: String, row: String)] = [
        (400, #"{"error":"invalid_grant"}"#, "authenticationReopenSession", "invalid-grant (AcmeErrors.json, row 1)"),
        (400, #"{"error":"access_denied"}"#, "userCancelled", "access-denied (BaseErrors.json, row 2)"),
        (400, #"{"error":"slow_down"}"#, "throttling", "slow-down (BaseErrors.json, row 5)"),
        (503, "<html><body>Bad gateway</body></html>", "server", "server-5xx (AcmeErrors.json, row 7)"),
        (401, "", "authenticationReopenSession", "unauthorized (BaseErrors.json, row 14)"),
    ]

    @Test("explain-error --provider acme classifies by Acme's own error table", arguments: errors)
    func explainError(status: Int, body: String, category: String, row: String) async throws {
        let home = try Home()
        let arguments = ["explain-error", "--provider", "acme", "--status", String(status), "--body", body]
        let text = try await home.run(arguments)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.standardOutput.hasPrefix("Acme, HTTP \(status)\n"))
        #expect(text.standardOutput.contains(row))
        let json = try await home.run(arguments + ["--json"])
        #expect(json.status == 0, "\(json.standardError)")
        #expect(JSONValue(parsing: Data(json.standardOutput.utf8))?["category"]?.stringValue == category)
    }

    @Test("doctor shows Acme's lines: the built-in emulator, a configured server that answers, a refused address")
    func doctor() async throws {
        let home = try Home()
        let builtIn = try await home.run(["doctor"])
        #expect(builtIn.status == 0, "\(builtIn.standardOutput)\(builtIn.standardError)")
        #expect(
            builtIn.standardOutput.contains(
                "• Acme: nothing is configured, so the built-in Acme emulator is used; to use an Acme server, set "
                    + "SESAME_ACME_URL and SESAME_ACME_CLIENT_ID."))

        let configured = try await withEmulator { _, base in
            let configured = try await home.run(
                ["doctor"],
                environment: [
                    "SESAME_ACME_URL": base.absoluteString, "SESAME_ACME_CLIENT_ID": AcmeEmulator.defaultClientID,
                ])
            #expect(
                configured.standardOutput.contains("✓ The Acme server at \(base.absoluteString) answers (HTTP 404)."))
            return configured
        }
        #expect(configured.status == 0, "\(configured.standardOutput)\(configured.standardError)")
        #expect(configured.standardOutput.contains("✓ Acme client id acme-sesame-demo."))

        let clear = try await home.run(
            ["doctor"], environment: ["SESAME_ACME_URL": "http://acme.example.com", "SESAME_ACME_CLIENT_ID": "app"])
        #expect(clear.status == 69)
        #expect(clear.standardOutput.contains("✗ Acme configuration: SESAME_ACME_URL: The Acme server"))
        #expect(clear.standardOutput.contains("plain http to acme.example.com"))
    }

    @Test("a configured Acme server: device login approved on the server, then status and token against it")
    func configuredServer() async throws {
        let home = try Home()
        try await withEmulator { emulator, base in
            let environment = [
                "SESAME_ACME_URL": base.absoluteString, "SESAME_ACME_CLIENT_ID": AcmeEmulator.defaultClientID,
            ]
            let login = try home.start(["login", "acme", "--scopes", "read"], environment: environment)
            let printed = try await login.waitForError(containing: "Waiting for you")
            #expect(printed.contains("To sign in to Acme (127.0.0.1), open \(base.absoluteString)/device"))
            #expect(!printed.contains("[emulator]"))
            let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z]{4}-[A-Z]{4})\s*\n/#).map { String($0.1) })
            try emulator.approveDevice(userCode: code, user: "roadrunner")
            let result = await login.finish()
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.contains("Logged in to Acme (127.0.0.1) as Road Runner (1002)"))

            let status = try await home.run(["status", "--json", "--timeout", "60"], environment: environment)
            let acme = try Self.acme(in: status)
            #expect(acme["emulator"]?.boolValue == false)
            #expect(acme["details"]?["server"]?.stringValue == base.absoluteString)
            #expect(acme["accounts"]?[0]?["validity"]?.stringValue == "valid")
            let token = try await home.run(["token", "acme"], environment: environment)
            #expect(token.status == 0)
            // One /api/me at the login, one for status; token needs none.
            #expect(emulator.requestCount(path: "/api/me") == 2)
        }
        #expect(!FileManager.default.fileExists(atPath: home.emulatorState.path))
    }

    @Test("emulator acme runs the Acme emulator in the foreground until SIGTERM")
    func foregroundEmulator() async throws {
        let home = try Home()
        let running = try home.start(["emulator", "acme"])
        let banner = try await running.waitForOutput(containing: "Press Ctrl-C to stop.")
        #expect(banner.contains("Sesame Acme emulator"))
        #expect(banner.contains("Client id:    acme-sesame-demo"))
        running.terminate()
        let result = await running.finish()
        #expect(result.status == 0, "\(result.standardError)")
    }
}

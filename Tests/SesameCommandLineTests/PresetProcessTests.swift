import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// `sesame` as a process with the presets Sesame ships, each against the OpenID emulator
/// answering as that provider documents it (`OIDCEmulator(quirks:)`): login, status, token renewed
/// once after expiry, logout with revocation where the provider revokes, and the quirk that makes
/// each preset what it is.
@Suite("sesame with the presets (Google, Microsoft, GitLab, Dropbox, Slack), as a process", .serialized)
struct PresetProcessTests {
    init() { TestProviders.bootstrap() }

    /// Runs `body` with an emulator answering as `quirks`' provider and its root address;
    /// awaits its stop afterwards.
    static func withEmulator<T>(
        _ quirks: OIDCQuirks, _ body: (OIDCEmulator, String) async throws -> T
    ) async throws -> T {
        let emulator = try OIDCEmulator(quirks: quirks, algorithm: "ES256", devicePollInterval: 1)
        return try await withStarted({ try await emulator.start().issuer }, stop: { _ in await emulator.stop() }) {
            try await body(emulator, $0)
        }
    }

    /// Runs `sesame login … --web` with a stand-in browser opener, and does what the person's
    /// browser would: the consent page, Allow, back to the loopback receiver. Returns the result
    /// and the authorization address the login opened.
    static func browserLogin(
        _ cli: CLIHarness, _ arguments: [String], root: String, environment: [String: String] = [:]
    ) async throws -> (ProcessResult, URL) {
        let bin = cli.root.appending(path: "bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let opener = bin.appending(path: "xdg-open")
        try Data("#!/bin/sh\nexit 0\n".utf8).write(to: opener)
        #expect(chmod(opener.path, 0o755) == 0)
        let process = try await cli.start(
            "sesame", ["login"] + arguments + ["--web"],
            environment: environment.merging([
                "PATH": bin.path + ":" + (cli.environment["PATH"] ?? "/usr/bin:/bin"), "DISPLAY": ":99",
            ]) { $1 })
        let printed = try await process.waitForError(matching: #"If none appeared, open this address:\n\n\s+\S+\n"#)
        let address = try #require(
            printed.firstMatch(of: #/\n\s+(http://127\.0\.0\.1:\d+/\S+)\n/#).map { String($0.1) })
        let url = try #require(URL(string: address))
        let browser = CurlTransport()
        let page = try await browser.send(HTTPRequest(url: url))
        let html = String(decoding: page.body, as: UTF8.self)
        let request = try #require(html.firstMatch(of: #/name="request" value="([^"]+)"/#).map { String($0.1) })
        let decision = try await browser.send(
            HTTPRequest(
                method: .post, url: try #require(URL(string: root + "/authorize")),
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(FormEncoding.encode([("request", request), ("action", "allow")]).utf8)))
        let location = try #require(decision.headers["Location"], "the consent did not redirect: \(decision.status)")
        _ = try await browser.send(HTTPRequest(url: try #require(URL(string: location))))
        let result = await process.finish()
        cli.record("sesame login \(arguments.joined(separator: " ")) --web", result)
        return (result, url)
    }

    /// The query parameters of `url`.
    static func query(_ url: URL) -> [String: String] {
        Dictionary(
            (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map {
                ($0.name, $0.value ?? "")
            },
            uniquingKeysWith: { first, _ in first })
    }

    /// `status --json`'s entry for `name`.
    static func status(
        _ cli: CLIHarness, _ name: String, environment: [String: String] = [:]
    ) async throws
        -> JSONValue?
    {
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"], environment: environment)
        #expect(status.status == 0, "\(status.standardError)")
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        return OIDCProcessTests.provider(name, in: document)
    }

    /// Ages the stored login past its expiry, then checks that `sesame token NAME` renews it with
    /// one refresh grant and prints the new token. (The emulator's clock stays: the ID token of the
    /// renewal would be issued in this machine's future.)
    static func expectRenewedOnce(
        _ cli: CLIHarness, _ emulator: OIDCEmulator, _ name: String, lifetime: TimeInterval,
        environment: [String: String] = [:]
    ) async throws {
        let before = try await cli.storedTokens()
        try await cli.age(by: lifetime + 60)
        let grants = emulator.refreshCounters.refreshGrants
        let token = try await cli.run("sesame", ["token", name], environment: environment)
        #expect(token.status == 0, "\(token.standardError)")
        let after = try await cli.storedTokens()
        #expect(after.count == 1 && after != before)
        #expect(token.standardOutput == (after.first ?? "-") + "\n")
        #expect(emulator.refreshCounters.refreshGrants == grants + 1)
        // Still valid: a second token is the same, with no refresh.
        let again = try await cli.run("sesame", ["token", name], environment: environment)
        #expect(again.standardOutput == token.standardOutput)
        #expect(emulator.refreshCounters.refreshGrants == grants + 1)
    }

    @Test(
        "google: the browser login sends access_type=offline and prompt=consent and the public secret; status, one renewal without rotation, logout --revoke"
    )
    func google() async throws {
        try await Self.withEmulator(.google) { emulator, root in
            let cli = try CLIHarness()
            let secret = ["SESAME_GOOGLE_CLIENT_SECRET": OIDCQuirks.googleDesktopClientSecret]
            // Google lists a device flow, but not for Desktop apps: the preset logs in with the browser.
            let device = try await cli.run(
                "sesame",
                ["login", "google", "--device", "--issuer", root, "--client-id", OIDCEmulator.defaultClientID],
                environment: secret)
            #expect(device.status != 0)
            #expect(device.standardError.contains("--web"), "\(device.standardError)")
            // Without the secret, Google refuses the code; the login fails and says so.
            let (refused, _) = try await Self.browserLogin(
                cli, ["google", "--issuer", root, "--client-id", OIDCEmulator.defaultClientID], root: root)
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("client_secret is missing"), "\(refused.standardError)")

            // The secret is public: it may be given on the command line.
            let (login, opened) = try await Self.browserLogin(
                cli,
                [
                    "google", "--issuer", root, "--client-id", OIDCEmulator.defaultClientID, "--client-secret",
                    OIDCQuirks.googleDesktopClientSecret,
                ], root: root)
            #expect(login.status == 0, "\(login.standardError)")
            let query = Self.query(opened)
            #expect(opened.path == "/o/oauth2/v2/auth")
            #expect(query["access_type"] == "offline")
            #expect(query["prompt"] == "consent")
            #expect(query["scope"] == "openid email profile")
            // The emulator gives a refresh token only for that: the stored login has one.
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.refreshToken != nil)

            let entry = try await Self.status(cli, "google", environment: secret)
            #expect(entry != nil)
            try await Self.expectRenewedOnce(cli, emulator, "google", lifetime: 3600, environment: secret)
            // Not rotated: the stored refresh token is the one of the login.
            #expect(try await cli.store.list(provider: nil).first?.token.refreshToken == stored.token.refreshToken)

            let tokens = try await cli.storedTokens()
            let logout = try await cli.run("sesame", ["logout", "google", "--revoke"], environment: secret)
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(emulator.revokedCount >= 1)
            #expect(try await cli.storedTokens().isEmpty)
            cli.expectNoTokenLeaks(tokens)
        }
    }

    @Test(
        "microsoft: --tenant organizations, a device login validated against its tid, status, one renewal; a wrong tid is refused"
    )
    func microsoft() async throws {
        try await Self.withEmulator(.microsoft) { emulator, root in
            let cli = try CLIHarness()
            let arguments = [
                "microsoft", "--issuer", root + "/{tenant}/v2.0", "--tenant", "organizations", "--client-id",
                OIDCEmulator.defaultClientID,
            ]
            try await emulator.activate(OIDCScenarioSetting(.wrongTenant))
            let refused = try await OIDCProcessTests.login(cli, arguments, issuer: root)
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("issuer"), "\(refused.standardError)")
            #expect(try await cli.storedTokens().isEmpty)

            let login = try await OIDCProcessTests.login(cli, arguments, issuer: root)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(emulator.requestCount(path: "/organizations/v2.0/.well-known/openid-configuration") >= 1)
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.refreshToken != nil)  // offline_access is among the preset's scopes
            #expect(try await Self.status(cli, "microsoft") != nil)
            try await Self.expectRenewedOnce(cli, emulator, "microsoft", lifetime: 3600)
            let logout = try await cli.run("sesame", ["logout", "microsoft"])
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(try await cli.storedTokens().isEmpty)
        }
    }

    @Test("gitlab: a device login, status, one renewal that rotates the refresh token, logout --revoke")
    func gitlab() async throws {
        try await Self.withEmulator(.gitlab) { emulator, root in
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(
                cli, ["gitlab", "--issuer", root, "--client-id", OIDCEmulator.defaultClientID], issuer: root)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(emulator.requestCount(path: "/oauth/authorize_device") == 1)
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(try await Self.status(cli, "gitlab") != nil)
            try await Self.expectRenewedOnce(cli, emulator, "gitlab", lifetime: 7200)
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(renewed.token.refreshToken != stored.token.refreshToken)
            let logout = try await cli.run("sesame", ["logout", "gitlab", "--revoke"])
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(emulator.revokedCount >= 1)
            #expect(emulator.requestCount(path: "/oauth/revoke") >= 1)
        }
    }

    /// What `sesame` needs in its environment to reach `root` as `name`'s provider: each endpoint
    /// moved to the emulator, and the client.
    static func endpoints(_ name: String, root: String, _ paths: [String: String]) -> [String: String] {
        var environment = ["SESAME_\(name.uppercased())_CLIENT_ID": OIDCEmulator.defaultClientID]
        for (endpoint, path) in paths { environment["SESAME_\(name.uppercased())_\(endpoint)_URL"] = root + path }
        return environment
    }

    @Test(
        "dropbox: a browser login with --client-id asking token_access_type=offline, the account from POST get_current_account, one renewal that keeps the refresh token, logout --revoke with the bearer token"
    )
    func dropbox() async throws {
        try await Self.withEmulator(.dropbox) { emulator, root in
            let cli = try CLIHarness()
            let environment = Self.endpoints(
                "dropbox", root: root,
                [
                    "AUTHORIZATION": "/oauth2/authorize", "TOKEN": "/oauth2/token",
                    "REVOCATION": "/2/auth/token/revoke",
                    "IDENTITY": "/2/users/get_current_account",
                ])
            // The client id on the command line, as for the OpenID presets; later commands read it
            // from the environment.
            let (login, opened) = try await Self.browserLogin(
                cli, ["dropbox", "--client-id", OIDCEmulator.defaultClientID], root: root,
                environment: environment.merging(["SESAME_DROPBOX_CLIENT_ID": ""]) { $1 })
            #expect(login.status == 0, "\(login.standardError)")
            #expect(Self.query(opened)["token_access_type"] == "offline")
            #expect(Self.query(opened)["code_challenge_method"] == "S256")
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.userID == "dbid:248289761001")
            #expect(stored.token.refreshToken != nil)
            #expect(emulator.requestCount(path: "/2/users/get_current_account") >= 1)
            #expect(try await Self.status(cli, "dropbox", environment: environment) != nil)

            try await Self.expectRenewedOnce(cli, emulator, "dropbox", lifetime: 14_400, environment: environment)
            #expect(try await cli.store.list(provider: nil).first?.token.refreshToken == stored.token.refreshToken)

            let tokens = try await cli.storedTokens()
            let logout = try await cli.run("sesame", ["logout", "dropbox", "--revoke"], environment: environment)
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(emulator.requestCount(path: "/2/auth/token/revoke") == 1)
            #expect(emulator.revokedCount >= 1)
            cli.expectNoTokenLeaks(tokens)
        }
    }

    @Test(
        "slack: a login with --client-id, the person's token from authed_user, auth.test, one rotating renewal; a refused refresh, ok:false on HTTP 200, asks to sign in again"
    )
    func slack() async throws {
        try await Self.withEmulator(.slack) { emulator, root in
            let cli = try CLIHarness()
            var environment = Self.endpoints(
                "slack", root: root,
                [
                    "AUTHORIZATION": "/oauth/v2/authorize", "TOKEN": "/api/oauth.v2.access",
                    "REVOCATION": "/api/auth.revoke", "IDENTITY": "/api/auth.test",
                ])
            environment["SESAME_SLACK_CLIENT_SECRET"] = OIDCQuirks.slackClientSecret
            let (login, opened) = try await Self.browserLogin(
                cli, ["slack", "--client-id", OIDCEmulator.defaultClientID], root: root,
                environment: environment.merging(["SESAME_SLACK_CLIENT_ID": ""]) { $1 })
            #expect(login.status == 0, "\(login.standardError)")
            #expect(Self.query(opened)["user_scope"] == "identify")
            #expect(Self.query(opened)["scope"] == nil)
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.userID == "U248289761001")
            #expect(stored.token.refreshToken != nil)
            #expect(try await Self.status(cli, "slack", environment: environment) != nil)

            try await Self.expectRenewedOnce(cli, emulator, "slack", lifetime: 43_200, environment: environment)
            #expect(try await cli.store.list(provider: nil).first?.token.refreshToken != stored.token.refreshToken)

            // The grant revoked at Slack: the refresh answers HTTP 200 with "ok": false.
            await emulator.revokeGrants()
            try await cli.age(by: 43_200 + 60)
            let refused = try await cli.run("sesame", ["token", "slack"], environment: environment)
            #expect(refused.status != 0)
            #expect(refused.standardOutput.isEmpty)
            #expect(refused.standardError.contains("invalid_refresh_token"), "\(refused.standardError)")
            #expect(refused.standardError.contains("sign in again"), "\(refused.standardError)")
        }
    }
}

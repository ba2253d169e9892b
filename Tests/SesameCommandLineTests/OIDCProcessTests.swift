import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// `sesame` as a process against an in-test OIDC emulator: login by device code approved over
/// the admin API, status, token, logout with revocation, and named issuers side by side.
@Suite("sesame with an OpenID provider, as a process")
struct OIDCProcessTests {
    init() { TestProviders.bootstrap() }

    /// Runs `body` with `emulator` (by default one that asks for one second between device
    /// polls) started, and its issuer; awaits the emulator's stop afterwards.
    static func withEmulator<T>(
        _ emulator: OIDCEmulator? = nil, _ body: (OIDCEmulator, String) async throws -> T
    ) async throws -> T {
        let emulator = try emulator ?? OIDCEmulator(devicePollInterval: 1)
        return try await withStarted({ try await emulator.start().issuer }, stop: { _ in await emulator.stop() }) {
            try await body(emulator, $0)
        }
    }

    /// Runs `sesame login ...` and approves its device code through the emulator's admin API.
    static func login(
        _ cli: CLIHarness, _ arguments: [String], issuer: String, user: String? = nil,
        environment: [String: String] = [:]
    ) async throws -> ProcessResult {
        let process = try await cli.start("sesame", ["login"] + arguments, environment: environment)
        let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z]{4}-[A-Z]{4}\n"#)
        let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z]{4}-[A-Z]{4})\s*\n/#).map { String($0.1) })
        #expect(printed.contains("open \(issuer)/device"))
        var body: [String: JSONValue] = ["user_code": .string(code)]
        if let user { body["user"] = .string(user) }
        let response = try await CurlTransport().send(
            .postJSON(URL(string: "\(issuer)/__sesame/device")!, .object(body)))
        #expect(response.status == 200, "admin approve: \(String(decoding: response.body, as: UTF8.self))")
        let result = await process.finish()
        cli.record("sesame login \(arguments.joined(separator: " "))", result)
        return result
    }

    /// `sesame login`'s arguments for the emulator at `issuer` with its default client.
    static func loginArguments(_ issuer: String) -> [String] {
        ["oidc", "--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID]
    }

    static func statusDocument(_ cli: CLIHarness) async throws -> JSONValue {
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        #expect(status.status == 0, "\(status.standardError)")
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        try DesktopProcessTests.expectStatusSchema(document)
        return document
    }

    static func provider(_ name: String, in document: JSONValue) -> JSONValue? {
        document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == name }
    }

    @Test(
        "a confidential client: refused without its secret (the message says what to set), logged in with it from the environment; a 40 s token is usable at once"
    )
    func confidentialClient() async throws {
        let emulator = try OIDCEmulator(
            algorithm: "ES256", clients: ["desktop-confidential": "s3cret-of-the-client"], accessTokenLifetime: 40,
            devicePollInterval: 1)
        try await Self.withEmulator(emulator) { emulator, issuer in
            let cli = try CLIHarness()
            let arguments = ["oidc", "--issuer", issuer, "--client-id", "desktop-confidential"]

            let refused = try await cli.run("sesame", ["login"] + arguments)
            #expect(refused.status != 0)
            #expect(refused.standardError.lowercased().contains("secret"), "\(refused.standardError)")

            let process = try await cli.start(
                "sesame", ["login"] + arguments, environment: ["SESAME_OIDC_CLIENT_SECRET": "s3cret-of-the-client"])
            let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z]{4}-[A-Z]{4}\n"#)
            let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z]{4}-[A-Z]{4})\s*\n/#).map { String($0.1) })
            let approve = try await CurlTransport().send(
                .postJSON(URL(string: "\(issuer)/__sesame/device")!, .object(["user_code": .string(code)])))
            #expect(approve.status == 200)
            let login = await process.finish()
            cli.record("sesame login oidc (confidential)", login)
            #expect(login.status == 0, "\(login.standardError)")

            // 40 s of lifetime: before, the fixed 60 s margin refused it as expired right after login.
            let token = try await cli.run(
                "sesame", ["token", "oidc"], environment: ["SESAME_OIDC_CLIENT_SECRET": "s3cret-of-the-client"])
            #expect(token.status == 0, "\(token.standardError)")
            #expect(!token.standardOutput.isEmpty)
            cli.expectNoTokenLeaks(["s3cret-of-the-client"])
        }
    }

    @Test(
        "a login's issuer endpoints are kept for a day: token works with the issuer gone, and asks it again once they are older"
    )
    func discoveryKept() async throws {
        try await Self.withEmulator { emulator, issuer in
            let cli = try CLIHarness()
            let login = try await Self.login(cli, Self.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 0, "\(login.standardError)")
            let stored = try await cli.storedTokens()
            await emulator.stop()

            // The token is valid and the endpoints were discovered a moment ago: no request at all.
            let offline = try await cli.run("sesame", ["token", "oidc"])
            #expect(offline.status == 0, "\(offline.standardError)")
            #expect(offline.standardOutput == (stored.first ?? "-") + "\n")

            // Kept more than a day ago: the issuer is asked again, and it is gone.
            let cacheFile = cli.root.appending(path: "state/sesame/oidc-discovery.json")
            var kept = try #require(JSONValue(parsing: try Data(contentsOf: cacheFile))?.objectValue)
            var entry = try #require(kept[issuer]?.objectValue, "no endpoints kept for \(issuer): \(kept)")
            entry["fetched_at"] = .number(Date().timeIntervalSince1970 - 25 * 3600)
            kept[issuer] = .object(entry)
            try Data(JSONValue.object(kept).jsonText.utf8).write(to: cacheFile)
            let stale = try await cli.run("sesame", ["token", "oidc"])
            #expect(stale.status != 0, "\(stale.standardOutput)")
            #expect(stale.standardOutput.isEmpty)
        }
    }

    @Test("device login, status --json, token, logout --revoke; the token shows only in 'sesame token'")
    func lifecycle() async throws {
        try await Self.withEmulator { emulator, issuer in
            let cli = try CLIHarness()

            let login = try await Self.login(cli, Self.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(login.standardOutput.contains("Logged in to oidc (\(issuer)) as Alice Example (248289761001)"))

            let document = try await Self.statusDocument(cli)
            let oidc = try #require(Self.provider("oidc", in: document))
            #expect(oidc["app_id"]?.stringValue == OIDCEmulator.defaultClientID)
            #expect(oidc["details"]?["issuer"]?.stringValue == issuer)
            let account = try #require(oidc["accounts"]?[0])
            #expect(account["account"]?.stringValue == "default")
            #expect(account["active"]?.boolValue == true)
            #expect(account["user_id"]?.stringValue == "248289761001")
            #expect(account["granted"]?.arrayValue?.contains(.string("openid")) == true)
            #expect(account["token_valid"]?.boolValue == true)

            let stored = try await cli.storedTokens()
            #expect(stored.count == 1)
            // No --issuer: the issuer and client of the last login are remembered.
            let token = try await cli.run("sesame", ["token", "oidc"])
            #expect(token.status == 0, "\(token.standardError)")
            #expect(token.standardOutput == stored[0] + "\n")

            #expect(emulator.revokedCount == 0)
            let logout = try await cli.run("sesame", ["logout", "oidc", "--revoke"])
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(logout.standardOutput.contains("its tokens were revoked"))
            #expect(emulator.revokedCount == 2)  // the refresh token and the access token
            #expect(emulator.requestCount(path: "/revoke") == 2)
            #expect(try await cli.storedTokens().isEmpty)

            let after = try await cli.run("sesame", ["token", "oidc"])
            #expect(after.status == 77)
            #expect(after.standardError.contains("sesame login oidc"))
            cli.expectNoTokenLeaks(stored)
        }
    }

    @Test("two issuers named in the config file log in side by side under their own provider ids")
    func namedIssuers() async throws {
        try await Self.withEmulator { work, workIssuer in
            try await Self.withEmulator { gitlab, gitlabIssuer in
                let cli = try CLIHarness()
                let config = cli.root.appending(path: "config/sesame")
                try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
                let file: JSONValue = .object([
                    "oidc": .object([
                        "work": .object([
                            "issuer": .string(workIssuer), "client_id": .string(OIDCEmulator.defaultClientID),
                            "scopes": .array([.string("openid"), .string("email")]),
                        ]),
                        "gitlab": .object([
                            "issuer": .string(gitlabIssuer), "client_id": .string(OIDCEmulator.defaultClientID),
                        ]),
                    ])
                ])
                try Data(file.jsonText.utf8).write(to: config.appending(path: "config.json"))

                let first = try await Self.login(cli, ["work"], issuer: workIssuer)
                #expect(first.status == 0, "\(first.standardError)")
                let second = try await Self.login(cli, ["gitlab"], issuer: gitlabIssuer, user: "248289761002")
                #expect(second.status == 0, "\(second.standardError)")
                #expect(second.standardOutput.contains("Bob Example (248289761002)"))

                let store = FileCredentialStore(url: cli.root.appending(path: "state/sesame/credentials.json"))
                let keys = try await store.list(provider: nil).map(\.key.provider.rawValue).sorted()
                #expect(keys == ["gitlab", "work"])

                let document = try await Self.statusDocument(cli)
                let workStatus = try #require(Self.provider("work", in: document))
                #expect(workStatus["details"]?["issuer"]?.stringValue == workIssuer)
                #expect(workStatus["accounts"]?[0]?["user_id"]?.stringValue == "248289761001")
                #expect(workStatus["accounts"]?[0]?["granted"]?.arrayValue?.contains(.string("profile")) == false)
                #expect(
                    Self.provider("gitlab", in: document)?["accounts"]?[0]?["user_id"]?.stringValue == "248289761002")
                #expect(Self.provider("oidc", in: document) == nil)

                let workToken = try await cli.run("sesame", ["token", "work"])
                let gitlabToken = try await cli.run("sesame", ["token", "gitlab"])
                #expect(workToken.status == 0 && gitlabToken.status == 0)
                #expect(!workToken.standardOutput.isEmpty && workToken.standardOutput != gitlabToken.standardOutput)

                let logout = try await cli.run("sesame", ["logout", "work", "--revoke"])
                #expect(logout.status == 0, "\(logout.standardError)")
                #expect(work.revokedCount == 2 && gitlab.revokedCount == 0)
                #expect(try await store.list(provider: nil).map(\.key.provider.rawValue) == ["gitlab"])

                let unknown = try await cli.run("sesame", ["login", "wrok"])
                #expect(unknown.status == 64)
                #expect(unknown.standardError.contains("did you mean 'work'?"))
                cli.expectNoTokenLeaks(
                    [workToken.standardOutput, gitlabToken.standardOutput].map {
                        $0.trimmingCharacters(in: .whitespacesAndNewlines)
                    })
            }
        }
    }

    @Test(
        "a missing issuer or client id is a usage error that says what to give",
        arguments: [
            (["login", "oidc", "--client-id", "x"], "--issuer URL"),
            (["login", "oidc", "--issuer", "http://127.0.0.1:9"], "--client-id ID"),
            (["token", "oidc"], "--issuer URL"),
            (["login", "oidc", "--issuer", "ftp://x", "--client-id", "x"], "http(s)"),
            (["login", "facebook", "--issuer", "http://127.0.0.1:9"], "--issuer is an option of oidc"),
            (["login", "oidc", "--with-token"], "do not take --with-token"),
        ])
    func usageErrors(_ arguments: [String], _ says: String) async throws {
        let cli = try CLIHarness()
        let result = try await cli.run("sesame", arguments)
        #expect(result.status == 64)
        #expect(result.standardError.contains(says), "\(result.standardError)")
        #expect(result.standardError.contains("USAGE"))
        #expect(result.standardOutput.isEmpty)
    }

    @Test("sesame emulator oidc prints an issuer that 'sesame login oidc' logs in to, and stops on SIGTERM")
    func emulatorCommand() async throws {
        try await withEmulatorProcess(["oidc"]) { banner in
            let issuer = try #require(
                banner.firstMatch(of: #/Issuer:\s+(http://127\.0\.0\.1:\d+)\n/#).map { String($0.1) })
            #expect(banner.contains("Client id:    \(OIDCEmulator.defaultClientID)"))
            #expect(banner.contains("sesame login oidc --issuer \(issuer) --client-id \(OIDCEmulator.defaultClientID)"))

            let cli = try CLIHarness()
            let login = try await Self.login(cli, Self.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(login.standardOutput.contains("as Alice Example (248289761001)"))
        }
    }
}

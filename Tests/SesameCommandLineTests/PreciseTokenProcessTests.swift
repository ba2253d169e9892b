import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCommandLine

/// Issue 51 item 4: `sesame token --json`, `--min-valid` and `--scopes`, run as processes against
/// the OpenID emulator, which counts the refresh grants it makes.
@Suite("sesame token --json, --min-valid and --scopes, against the OpenID emulator", .serialized)
struct PreciseTokenProcessTests {
    typealias Travel = TimeTravelProcessTests

    /// A logged-in home and the emulator, with the stored login's access token `left` seconds
    /// from its expiry (when given).
    static func withLogin(
        left: TimeInterval? = nil, _ body: (CLIHarness, Travel.RotatingProvider) async throws -> Void
    ) async throws {
        try await Travel.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Travel.logIn(cli, to: provider)
            if let left {
                let expiry = try #require(try await Travel.storedLogin(cli).token.expirationDate)
                try await Travel.advance(cli, provider, by: expiry.timeIntervalSinceNow - left)
            }
            try await body(cli, provider)
        }
    }

    @Test("--json prints one object of version 1 and nothing else on standard output")
    func jsonShape() async throws {
        try await Self.withLogin { cli, provider in
            let result = try await cli.run("sesame", ["token", "oidc", "--json"], environment: provider.environment)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.hasSuffix("}\n") && result.standardOutput.filter { $0 == "\n" }.count == 1)
            let json = try #require(JSONValue(parsing: Data(result.standardOutput.utf8)), "not JSON")
            let object = try #require(json.objectValue)
            #expect(
                Set(object.keys)
                    == [
                        "version", "token", "type", "expires_at", "expires_in", "scopes", "provider", "issuer",
                        "account",
                    ])
            let stored = try await Travel.storedLogin(cli).token
            #expect(json["version"]?.doubleValue == 1)
            #expect(json["token"]?.stringValue == stored.tokenString, "not the stored token")
            #expect(json["type"]?.stringValue == "Bearer")
            let expiresAt = try #require(
                json["expires_at"]?.stringValue.flatMap { ISO8601DateFormatter().date(from: $0) })
            let expiry = try #require(stored.expirationDate)
            #expect(abs(expiresAt.timeIntervalSince(expiry)) < 1.5)
            let expiresIn = try #require(json["expires_in"]?.doubleValue)
            #expect(abs(expiresIn - expiry.timeIntervalSinceNow) < 5)
            #expect(json["scopes"]?.arrayValue?.compactMap(\.stringValue) == stored.permissions.granted.sorted())
            #expect(json["scopes"]?.arrayValue?.isEmpty == false)
            #expect(json["provider"]?.stringValue == "oidc")
            #expect(json["issuer"]?.stringValue == provider.base)
            #expect(json["account"]?.stringValue == "default")
        }
    }

    @Test(
        "--min-valid 10m renews a token with 5 minutes left (one grant, the new one lasts) and leaves one with 20",
        arguments: [(300.0, 1), (1200.0, 0)])
    func minValid(left: TimeInterval, grants: Int) async throws {
        try await Self.withLogin(left: left) { cli, provider in
            let before = try await Travel.stats(provider)
            let result = try await cli.run(
                "sesame", ["token", "oidc", "--json", "--min-valid", "10m"], environment: provider.environment)
            #expect(result.status == 0, "\(result.standardError)")
            let after = try await Travel.stats(provider)
            #expect(after.grants - before.grants == grants, "\(after)")
            let json = try #require(JSONValue(parsing: Data(result.standardOutput.utf8)), "not JSON")
            #expect(try #require(json["expires_in"]?.doubleValue) >= 600)
            #expect(json["token"]?.stringValue == (try await Travel.storedLogin(cli)).token.tokenString)
        }
    }

    @Test(
        "the credential helpers take --min-valid: a token with 5 minutes left is renewed before it is handed on",
        arguments: ["kubectl-credential", "docker-credential-sesame"])
    func helpers(helper: String) async throws {
        try await Self.withLogin(left: 300) { cli, provider in
            let before = try await Travel.stats(provider)
            let result: ProcessResult
            if helper == "kubectl-credential" {
                result = try await cli.run(
                    "sesame", ["kubectl-credential", "oidc", "--token-type", "access", "--min-valid", "10m"],
                    environment: provider.environment)
            } else {
                try CredentialHelperProcessTests.mapRegistries(cli, ["r.example": .string("oidc")])
                result = try await cli.run(
                    "docker-credential-sesame", ["--min-valid", "10m", "get"], input: Data("r.example\n".utf8),
                    environment: provider.environment)
            }
            #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
            #expect(try await Travel.stats(provider).grants - before.grants == 1)
            let stored = try await Travel.storedLogin(cli).token
            #expect(stored.expirationDate.map { $0.timeIntervalSinceNow >= 600 } == true)
            let json = try #require(JSONValue(parsing: Data(result.standardOutput.utf8)), "not JSON")
            let handed = json["status"]?["token"]?.stringValue ?? json["Secret"]?.stringValue
            #expect(handed == stored.tokenString, "the helper did not hand on the renewed token")
        }
    }

    @Test("20 processes at once with --min-valid reaching past the expiry make exactly one grant, all print it")
    func storm() async throws {
        try await Self.withLogin(left: 300) { cli, provider in
            let before = try await Travel.stats(provider)
            let (results, _) = try await Travel.runAtOnce(
                20, cli, ["token", "oidc", "--min-valid", "10m"], environment: provider.environment)
            let after = try await Travel.stats(provider)
            #expect(after.grants - before.grants == 1, "\(after)")
            #expect(results.allSatisfy { $0.status == 0 }, "\(Travel.failures(results))")
            let stored = try await Travel.storedLogin(cli)
            #expect(Travel.allPrinted(stored.token.tokenString, results))
            #expect(stored.token.expirationDate.map { $0.timeIntervalSinceNow >= 600 } == true)
        }
    }

    @Test("--min-valid longer than the issuer's tokens live renews once, then exits 78 printing no token")
    func minValidBeyondLifetime() async throws {
        try await Self.withLogin { cli, provider in
            let before = try await Travel.stats(provider)
            let result = try await cli.run(
                "sesame", ["token", "oidc", "--min-valid", "2h"], environment: provider.environment)
            #expect(result.status == 78, "\(result.standardError)")
            #expect(result.standardOutput.isEmpty)
            #expect(result.standardError.contains("Even a fresh token"), "\(result.standardError)")
            #expect(try await Travel.stats(provider).grants - before.grants == 1)
        }
    }

    @Test("--scopes the login lacks, without a terminal: exit 77 naming them; granted ones print the token")
    func missingScopes() async throws {
        try await Self.withLogin { cli, provider in
            let granted = try await Travel.storedLogin(cli).token.permissions.granted.sorted()
            let first = try #require(granted.first)
            let missing = try await cli.run(
                "sesame", ["token", "oidc", "--scopes", "\(first),payments.write,admin"],
                environment: provider.environment)
            #expect(missing.status == 77, "\(missing.standardError)")
            #expect(missing.standardOutput.isEmpty)
            #expect(
                missing.standardError.contains("lacks the scopes admin, payments.write;"), "\(missing.standardError)")
            #expect(
                missing.standardError.contains(
                    "--scopes " + (granted + ["admin", "payments.write"]).sorted().joined(separator: ",")))
            let present = try await cli.run(
                "sesame", ["token", "oidc", "--scopes", granted.joined(separator: ",")],
                environment: provider.environment)
            #expect(present.status == 0, "\(present.standardError)")
            #expect(present.standardOutput == (try await Travel.storedLogin(cli)).token.tokenString + "\n")
        }
    }

    @Test("--scopes the login lacks, on a terminal: a new login for the union, same account, then the token")
    func stepUp() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("script(1) is missing; scripts/bootstrap installs bsdutils")
            return
        }
        try await Self.withLogin { cli, provider in
            let granted = try await Travel.storedLogin(cli).token.permissions.granted
            let (output, errors) = (cli.root.appending(path: "token.txt"), cli.root.appending(path: "errors.txt"))
            var environment = provider.environment
            environment["SESAME"] = try ProcessRunner.builtExecutable("sesame").path
            environment["SESAME_BROWSER"] = "none"
            // Standard input is script(1)'s terminal; the token and the login's lines go to files.
            let process = try await LiveProcess(
                URL(fileURLWithPath: "/usr/bin/script"),
                [
                    "-qec",
                    "\"$SESAME\" token oidc --scopes openid,payments.write > '\(output.path)' 2> '\(errors.path)'",
                    "/dev/null",
                ], environment: cli.environment.merging(environment) { $1 }, input: Data())
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(60)
            var code: String?
            while code == nil, clock.now < deadline {
                let text = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
                code = text.firstMatch(of: #/\n\s+([A-Z0-9]{4}-[A-Z0-9]{4})\s*\n/#).map { String($0.1) }
                if code == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            if let code { _ = try await Travel.admin(provider, .post, "device", ["user_code": .string(code)]) }
            let result = await process.finish()
            try #require(code != nil, "no device code: \((try? String(contentsOf: errors, encoding: .utf8)) ?? "")")
            #expect(result.status == 0, "\(result.standardOutput)")
            let stored = try await Travel.storedLogin(cli)
            #expect(stored.key.account == "default")
            #expect(stored.token.permissions.granted == granted.union(["payments.write"]))
            #expect(try String(contentsOf: output, encoding: .utf8) == stored.token.tokenString + "\n")
        }
    }

    @Test(
        "--min-valid takes whole numbers with units, for token and the credential helpers",
        arguments: [("90s", 90), ("10m", 600), ("1h30m", 5400), ("0s", 0)])
    func durations(text: String, seconds: Int64) throws {
        TestProviders.bootstrap()
        #expect(
            try SesameCLI.parse(["token", "oidc", "--min-valid", text])
                == .provider(
                    ProviderCommand(provider: "oidc", action: .token(TokenOptions(minValid: .seconds(seconds))))))
        #expect(
            try SesameCLI.parse(["git-credential", "--min-valid=\(text)", "get"])
                == .gitCredential(GitCredentialCommand(operation: "get", minValid: .seconds(seconds))))
    }

    @Test("--min-valid refuses what is not a duration", arguments: ["10", "10x", "m", "-5m", "", "99999999h"])
    func badDurations(text: String) {
        TestProviders.bootstrap()
        #expect(throws: UsageError.self) { try SesameCLI.parse(["token", "oidc", "--min-valid", text]) }
    }
}

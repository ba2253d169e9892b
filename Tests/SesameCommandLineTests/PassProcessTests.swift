import Foundation
import Sesame
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// `sesame` as a process on a machine without a desktop: a clean environment (no D-Bus, no
/// display, as under `env -i`), a real GnuPG and `pass`, and the OpenID emulator's device login.
@Suite("sesame with the password store (pass), without D-Bus, as a process")
struct PassProcessTests {
    init() { TestProviders.bootstrap() }

    /// A harness whose programs see only `home`'s GnuPG and password store, and `storage`.
    static func harness(_ home: GnuPGHome, storage: String?) throws -> CLIHarness {
        try CLIHarness(storage: storage, clean: home.environment.merging(["NO_COLOR": "1"]) { $1 })
    }

    static func entryName(_ issuer: String, account: String = "default") -> String {
        let encoded = issuer.addingPercentEncoding(
            withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-_.@+=,")))!
        return "sesame/oidc/\(encoded)/\(OIDCEmulator.defaultClientID)/\(account)"
    }

    @Test(
        "--storage pass: login (device flow), token, status, logout; `pass show` prints the token Sesame stored"
    )
    func explicitPass() async throws {
        try await withGnuPGHome { home in
            try await OIDCProcessTests.withEmulator { _, issuer in
                let cli = try Self.harness(home, storage: "pass")
                let login = try await OIDCProcessTests.login(
                    cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
                #expect(login.status == 0, "\(login.standardError)")

                let token = try await cli.run("sesame", ["token", "oidc"])
                #expect(token.status == 0, "\(token.standardError)")
                let shown = try await home.run("pass", ["show", Self.entryName(issuer)])
                #expect(
                    shown.split(separator: "\n").first.map(String.init)
                        == token.standardOutput.trimmingCharacters(in: .newlines))
                #expect(shown.contains("\nrefresh_token: "))

                let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
                #expect(status.status == 0, "\(status.standardError)")
                let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
                let storage = OIDCProcessTests.provider("oidc", in: document)?["storage"]
                #expect(storage?["backend"]?.stringValue == "pass", "\(status.standardOutput)")
                #expect(storage?["reason"]?.stringValue?.contains("'pass' from SESAME_STORAGE") == true)

                let logout = try await cli.run("sesame", ["logout", "oidc"])
                #expect(logout.status == 0, "\(logout.standardError)")
                let gone = try await home.runAllowingFailure("pass", ["show", Self.entryName(issuer)])
                #expect(gone.status != 0)
                #expect(
                    !FileManager.default.fileExists(
                        atPath: cli.root.appending(path: "state/sesame/credentials.json").path))
                cli.expectNoTokenLeaks([token.standardOutput.trimmingCharacters(in: .newlines)])
            }
        }
    }

    @Test("the default policy without D-Bus picks an initialised password store and says why; an edited entry is read")
    func autoPicksPass() async throws {
        try await withGnuPGHome { home in
            try await OIDCProcessTests.withEmulator { _, issuer in
                let cli = try Self.harness(home, storage: nil)
                let login = try await OIDCProcessTests.login(
                    cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
                #expect(login.status == 0, "\(login.standardError)")
                let status = try await cli.run("sesame", ["status"])
                #expect(status.standardOutput.contains("password store \(home.store.path)"), "\(status.standardOutput)")
                #expect(status.standardOutput.contains("storage mode 'auto' from default: there is no desktop keyring"))

                // The person edits the entry with pass: a note added, the token changed.
                let name = Self.entryName(issuer)
                var lines = try await home.run("pass", ["show", name]).split(separator: "\n").map(String.init)
                lines[0] = "edited-token"
                lines.insert("note: edited by hand", at: 1)
                try await home.run("pass", ["insert", "-m", "-f", name], input: lines.joined(separator: "\n"))
                let token = try await cli.run("sesame", ["token", "oidc"])
                #expect(token.standardOutput == "edited-token\n", "\(token.standardError)")

                let doctor = try await cli.run("sesame", ["doctor"])
                #expect(doctor.standardOutput.contains("password store"), "\(doctor.standardOutput)")
                #expect(doctor.standardOutput.contains("no session bus"), "\(doctor.standardOutput)")
            }
        }
    }

    @Test("the default policy with neither a keyring nor an initialised store refuses (69), naming the three choices")
    func autoRefuses() async throws {
        try await withGnuPGHome { home in
            try FileManager.default.removeItem(at: home.store.appendingPathComponent(".gpg-id"))
            let cli = try Self.harness(home, storage: nil)
            for arguments in [["login", "oidc", "--issuer", "http://127.0.0.1:9/", "--client-id", "x"], ["status"]] {
                let refused = try await cli.run("sesame", arguments)
                #expect(refused.status == 69, "\(arguments): \(refused.standardError)")
                for choice in ["pass init KEYID", "desktop session with a keyring", "--storage file"] {
                    #expect(refused.standardError.contains(choice), "\(arguments): \(refused.standardError)")
                }
            }
            #expect(
                !FileManager.default.fileExists(atPath: cli.root.appending(path: "state/sesame/credentials.json").path))
        }
    }

    @Test("login is refused before it starts when .gpg-id is unsigned and PASSWORD_STORE_SIGNING_KEY is set")
    func signingKeyFromTheEnvironment() async throws {
        try await withGnuPGHome { home in
            let cli = try Self.harness(home, storage: "pass")
            let arguments = ["login", "oidc", "--issuer", "http://127.0.0.1:9/", "--client-id", "x"]
            let refused = try await cli.run(
                "sesame", arguments, environment: ["PASSWORD_STORE_SIGNING_KEY": home.fingerprint])
            #expect(refused.status == 74, "\(refused.standardError)")
            #expect(refused.standardError.contains("has no signature"), "\(refused.standardError)")
            #expect(refused.standardError.contains("PASSWORD_STORE_SIGNING_KEY"), "\(refused.standardError)")
            #expect(!FileManager.default.fileExists(atPath: home.store.appendingPathComponent("sesame").path + "/oidc"))
        }
    }

    @Test("doctor flags a store folder others may write, with the fix, and suggests auto-expand-secmem until it is set")
    func doctorFlagsTheStore() async throws {
        try await withGnuPGHome { home in
            let cli = try Self.harness(home, storage: "pass")
            let folder = home.store.appendingPathComponent("sesame")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            #expect(chmod(folder.path, 0o777) == 0)
            let flagged = try await cli.run("sesame", ["doctor"])
            let unsafe =
                "✗ Password store (pass): The password-store folder \(folder.path) could be changed by other users"
            #expect(flagged.standardOutput.contains(unsafe), "\(flagged.standardOutput)")
            #expect(flagged.standardOutput.contains("chmod go-w '\(folder.path)'"))
            #expect(flagged.status == 69, "\(flagged.standardOutput)")
            let agentConf = home.home.appendingPathComponent("gpg-agent.conf")
            let secmem = "no auto-expand-secmem in \(agentConf.path)"
            #expect(flagged.standardOutput.contains(secmem), "\(flagged.standardOutput)")

            #expect(chmod(folder.path, 0o700) == 0)
            let conf = try String(contentsOf: agentConf, encoding: .utf8)
            try (conf + "auto-expand-secmem 0x30000\n").write(to: agentConf, atomically: true, encoding: .utf8)
            let fine = try await cli.run("sesame", ["doctor"])
            #expect(fine.standardOutput.contains("✓ Password store (pass): \(home.store.path), initialised."))
            #expect(!fine.standardOutput.contains("✗ Password store"), "\(fine.standardOutput)")
            #expect(!fine.standardOutput.contains(secmem), "\(fine.standardOutput)")
        }
    }

    @Test("a wrong passphrase and a cancelled prompt exit 69, a missing secret key 74; the login is kept")
    func failures() async throws {
        try await withGnuPGHome { home in
            try await OIDCProcessTests.withEmulator { _, issuer in
                let cli = try Self.harness(home, storage: "pass")
                let login = try await OIDCProcessTests.login(
                    cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
                #expect(login.status == 0, "\(login.standardError)")
                try await home.forgetPassphrase()
                try home.setPinentryAnswer("wrong")
                let wrong = try await cli.run("sesame", ["token", "oidc"])
                #expect(wrong.status == 69, "\(wrong.standardError)")
                #expect(wrong.standardError.contains("passphrase"), "\(wrong.standardError)")
                try home.setPinentryAnswer(nil)
                let cancelled = try await cli.run("sesame", ["token", "oidc"])
                #expect(cancelled.status == 69, "\(cancelled.standardError)")
                #expect(cancelled.standardError.contains("cancelled"), "\(cancelled.standardError)")

                try await home.gpg(["--batch", "--yes", "--delete-secret-keys", home.fingerprint])
                let noKey = try await cli.run("sesame", ["token", "oidc"])
                #expect(noKey.status == 74, "\(noKey.standardError)")
                #expect(noKey.standardError.contains("gpg --import"), "\(noKey.standardError)")
                let entry = home.store.appendingPathComponent(Self.entryName(issuer) + ".gpg")
                #expect(FileManager.default.fileExists(atPath: entry.path))
            }
        }
    }
}

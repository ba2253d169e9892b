import Foundation
import Sesame
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// OpenID logins stored before Sesame recorded a login's issuer (keyed by provider, client id and
/// account only): `status` and `doctor` say what they are, `token` takes one over when its ID token
/// names the issuer, and `logout` removes one that cannot be told apart.
@Suite("OpenID logins stored before issuers were recorded, as a process")
struct LegacyLoginProcessTests {
    init() { TestProviders.bootstrap() }

    /// Runs `body` with a started emulator and awaits its stop, whether `body` threw or not.
    static func withEmulator(_ body: (OIDCEmulator, String) async throws -> Void) async throws {
        try await withStarted(
            {
                let emulator = try OIDCEmulator(devicePollInterval: 1)
                return (emulator, try await emulator.start().issuer)
            }, stop: { await $0.0.stop() }, { try await body($0.0, $0.1) })
    }

    /// Logs in, then rewrites the stored login as an older Sesame kept it: without an issuer.
    static func legacyLogin(_ cli: CLIHarness, issuer: String, idTokenIssuer: String? = nil) async throws -> String {
        let login = try await OIDCProcessTests.login(
            cli, ["oidc", "--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID], issuer: issuer)
        #expect(login.status == 0, "\(login.standardError)")
        let store = cli.fileStore
        var stored = try #require(try await store.list(provider: nil).first)
        #expect(stored.key.issuer == issuer)
        try await store.delete(stored.key)
        stored.key.issuer = nil
        if let idTokenIssuer {
            stored.token.idToken = IssuerIdentityTokens.unsigned(issuer: idTokenIssuer)
        }
        try await store.save(stored)
        return stored.token.tokenString
    }

    @Test("one whose ID token names the issuer: status and doctor say it is taken over, token takes it over")
    func takenOver() async throws {
        try await Self.withEmulator { _, issuer in
            let cli = try CLIHarness()
            let token = try await Self.legacyLogin(cli, issuer: issuer)
            let status = try await cli.run("sesame", ["status", "--timeout", "60"])
            #expect(status.standardOutput.contains("taken over for \(issuer) when next used"), "\(status)")
            let doctor = try await cli.run("sesame", ["doctor"])
            #expect(doctor.standardOutput.contains("stored before Sesame recorded issuers"), "\(doctor)")
            #expect(doctor.standardOutput.contains("sesame token oidc"))

            let printed = try await cli.run("sesame", ["token", "oidc"])
            #expect(printed.status == 0, "\(printed.standardError)")
            #expect(printed.standardOutput == token + "\n")
            let keys = try await cli.fileStore.list(provider: nil).map(\.key)
            #expect(keys.map(\.issuer) == [issuer], "moved under its issuer, the old entry gone")
            cli.expectNoTokenLeaks([token])
        }
    }

    @Test("one whose ID token names another issuer: never presented, said so, and logout removes it")
    func leftAloneThenRemoved() async throws {
        try await Self.withEmulator { emulator, issuer in
            let cli = try CLIHarness()
            let token = try await Self.legacyLogin(cli, issuer: issuer, idTokenIssuer: "https://other.example")
            let requests = emulator.requestCount(path: "/userinfo") + emulator.requestCount(path: "/token")

            let printed = try await cli.run("sesame", ["token", "oidc"])
            #expect(printed.status == 77)
            #expect(printed.standardOutput.isEmpty)
            let status = try await cli.run("sesame", ["status", "--timeout", "60"])
            #expect(status.standardOutput.contains("cannot be told to come from \(issuer)"), "\(status)")
            let doctor = try await cli.run("sesame", ["doctor"])
            #expect(doctor.standardOutput.contains("sesame logout oidc"), "\(doctor)")
            #expect(
                emulator.requestCount(path: "/userinfo") + emulator.requestCount(path: "/token") == requests,
                "nothing was sent to this issuer")

            let logout = try await cli.run("sesame", ["logout", "oidc"])
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(logout.standardOutput.contains("stored before Sesame recorded issuers"))
            #expect(try await cli.fileStore.list(provider: nil).isEmpty)
            cli.expectNoTokenLeaks([token])
        }
    }
}

/// ID tokens for records made by hand.
enum IssuerIdentityTokens {
    /// A JWT with `iss` = `issuer` and no signature: only ever read for its issuer, as an old
    /// record's.
    static func unsigned(issuer: String) -> String {
        func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }
        return part(#"{"alg":"none"}"#) + "." + part(#"{"iss":"\#(issuer)","sub":"someone"}"#) + "."
    }
}

import Foundation
import Sesame
import SesameCommandLine
import SesameCurl
import SesameHTTPServer
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// Issue 47, items 9 to 14: what django-oauth-toolkit, an OpenID provider nobody here wrote,
/// exposed, reproduced against the OpenID emulator configured the same way, with `sesame` as a
/// process.
@Suite("sesame against an issuer configured as django-oauth-toolkit deployments are, as a process")
struct RealIssuerProcessTests {
    init() { TestProviders.bootstrap() }

    /// What kubectl sets, asking for a non-interactive `v1` credential.
    static let execInfo =
        #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#

    @Test(
        "kubectl-credential renews the login when the ID token kubectl gets has expired, though the access token is not due"
    )
    func expiredIDTokenIsRenewed() async throws {
        // ID tokens of 8 s, access tokens of 40 s, as at Microsoft Entra (shorter ID tokens).
        let emulator = try OIDCEmulator(accessTokenLifetime: 40, devicePollInterval: 1, idTokenLifetime: 8)
        try await OIDCProcessTests.withEmulator(emulator) { emulator, issuer in
            let cli = try CLIHarness()
            // The issuer's clock 10 s behind, for the login only: its ID token is stored 10 s old,
            // expired 2 s ago (within the minute of skew a login accepts), while the access token
            // has all its 40 s: where a login is 10 s after it was made, without waiting 10 s.
            try await emulator.activate(OIDCScenarioSetting(.clockSkew, seconds: -10))
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            try #require(login.status == 0, "\(login.standardError)")
            await emulator.clearScenarios()
            let stored = try #require(try await cli.store.list(provider: nil).first)
            let oldIDToken = try #require(stored.token.idToken)
            #expect(try #require(jwtExpiry(oldIDToken)) < Date(), "the stored ID token has not expired")

            let result = try await cli.run(
                "sesame", ["kubectl-credential", "oidc"], environment: ["KUBERNETES_EXEC_INFO": Self.execInfo])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(emulator.refreshCounters.refreshGrants == 1, "no refresh was tried")
            let credential = try #require(JSONValue(parsing: Data(result.standardOutput.utf8)))
            let handed = try #require(credential["status"]?["token"]?.stringValue)
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(handed != oldIDToken && handed == renewed.token.idToken, "kubectl did not get the new ID token")
            let stamp = try #require(credential["status"]?["expirationTimestamp"]?.stringValue)
            let stated = try #require(ISO8601DateFormatter().date(from: stamp), "not RFC 3339: \(stamp)")
            #expect(stated > Date().addingTimeInterval(-1) && stated <= Date().addingTimeInterval(9))

            // The access token is what an API server taking access tokens gets: it is not due, so
            // nothing is renewed for it.
            let access = try await cli.run(
                "sesame", ["kubectl-credential", "oidc", "--token-type", "access"],
                environment: ["KUBERNETES_EXEC_INFO": Self.execInfo])
            #expect(access.status == 0, "\(access.standardError)")
            #expect(access.standardOutput.contains(renewed.token.tokenString))
            #expect(emulator.refreshCounters.refreshGrants == 1)
        }
    }

    @Test("logout --revoke finds a revocation endpoint listed only in the RFC 8414 metadata, and revokes there")
    func revocationInMetadataOnly() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            await emulator.setRevocationEndpoint(listed: .metadata)
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            try #require(login.status == 0, "\(login.standardError)")
            let stored = try await cli.storedTokens()

            let logout = try await cli.run("sesame", ["logout", "oidc", "--revoke"])
            #expect(logout.status == 0, "\(logout.standardError)")
            #expect(logout.standardOutput.contains("its tokens were revoked"), "\(logout.standardOutput)")
            #expect(emulator.revokedCount == 2)  // the refresh token and the access token
            #expect(emulator.requestCount(path: "/.well-known/oauth-authorization-server") >= 1)
            #expect(try await cli.storedTokens().isEmpty)
            cli.expectNoTokenLeaks(stored)
        }
    }

    @Test("logout --revoke at an issuer with no revocation endpoint anywhere removes the login and exits 69")
    func noRevocationEndpoint() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            await emulator.setRevocationEndpoint(listed: .nowhere)
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            try #require(login.status == 0, "\(login.standardError)")

            let logout = try await cli.run("sesame", ["logout", "oidc", "--revoke"])
            #expect(logout.status == 69, "\(logout.standardOutput)\(logout.standardError)")
            #expect(logout.standardError.contains("revocation_endpoint"), "\(logout.standardError)")
            #expect(logout.standardError.contains("removed here"), "\(logout.standardError)")
            #expect(emulator.requestCount(path: "/revoke") == 0)
            #expect(try await cli.storedTokens().isEmpty)

            // Without --revoke nothing is promised, and nothing fails.
            let again = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            try #require(again.status == 0, "\(again.standardError)")
            let plain = try await cli.run("sesame", ["logout", "oidc"])
            #expect(plain.status == 0, "\(plain.standardError)")
        }
    }

    @Test(
        "doctor ticks discovery only when it works, at the address a login uses; a wrong issuer is named as such"
    )
    func doctorDiscovery() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            let cli = try CLIHarness()
            func doctor(_ configured: String) async throws -> String {
                let result = try await cli.run(
                    "sesame", ["doctor"],
                    environment: [
                        "SESAME_OIDC_ISSUER": configured, "SESAME_OIDC_CLIENT_ID": OIDCEmulator.defaultClientID,
                    ])
                return result.standardOutput
            }

            // doctor bounds each probe at 3 s; under ThreadSanitizer on a loaded machine the issuer
            // can miss that bound, so a probe that did not answer is asked again (twice at most).
            var right = try await doctor(issuer)
            for _ in 0..<2 where right.contains("did not answer in time") { right = try await doctor(issuer) }
            #expect(
                right.contains("✓ 'oidc' discovery at \(issuer)/.well-known/openid-configuration answers"), "\(right)")

            // The site's root with the issuer's path left out: the discovery URL answers 404.
            let wrong = try await doctor(issuer + "/o")
            #expect(!wrong.contains("✓ 'oidc' discovery"), "\(wrong)")
            #expect(wrong.contains("✗ 'oidc' discovery at \(issuer)/o/.well-known/openid-configuration"), "\(wrong)")
            #expect(wrong.contains("answered HTTP 404"), "\(wrong)")
            #expect(wrong.contains("is not the issuer"), "\(wrong)")

            // A trailing slash: the address is the one a login asks, not '…//.well-known/…', and
            // the document's issuer is not the one typed.
            let slash = try await doctor(issuer + "/")
            #expect(!slash.contains("//.well-known"), "\(slash)")
            #expect(!slash.contains("✓ 'oidc' discovery"), "\(slash)")
            #expect(slash.contains("✗ 'oidc' discovery at \(issuer)/.well-known/openid-configuration"), "\(slash)")
            #expect(slash.contains("not '\(issuer)/' as configured"), "\(slash)")

            // A login to the wrong issuer says which address failed, not an error-table sentence.
            let login = try await cli.run(
                "sesame", ["login", "oidc", "--issuer", issuer + "/o", "--client-id", OIDCEmulator.defaultClientID])
            #expect(login.status != 0)
            #expect(
                login.standardError.contains("\(issuer)/o/.well-known/openid-configuration answered HTTP 404"),
                "\(login.standardError)")
            #expect(!login.standardError.contains("error code this table knows"), "\(login.standardError)")
            #expect(emulator.requestCount(path: "/o/.well-known/openid-configuration") >= 2)
        }
    }

    @Test("a device login answered without an ID token takes the user id from userinfo's sub")
    func deviceLoginWithoutIDToken() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            try await emulator.activate(OIDCScenarioSetting(.deviceNoIDToken))
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(
                login.standardOutput.contains("Logged in to oidc (\(issuer)) as Alice Example (248289761001)"),
                "\(login.standardOutput)")
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.idToken == nil, "the scenario let an ID token through")
            #expect(stored.token.userID == "248289761001")
        }
    }

    @Test("an ID token issued in the future is the clock: said so, exit 78, not a missing service")
    func futureIssuedAtIsTheClock() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            // The issuer's clock ten minutes ahead of this machine's, beyond the minute of leeway.
            try await emulator.activate(OIDCScenarioSetting(.clockSkew, seconds: 600))
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 78, "\(login.standardError)")
            #expect(login.standardError.contains("ahead of this machine's clock"), "\(login.standardError)")
            #expect(login.standardError.contains("timedatectl"), "\(login.standardError)")
            #expect(try await cli.storedTokens().isEmpty)
        }
    }

    @Test(
        "login --help and sesame(1) say which redirect URI to register and what device login needs",
        arguments: [["login", "--help"], ["manpage"]])
    func redirectURIDocumented(_ arguments: [String]) async throws {
        let cli = try CLIHarness()
        let result = try await cli.run("sesame", arguments)
        #expect(result.status == 0, "\(result.standardError)")
        // What the loopback receiver listens on: the path is its default, the port is chosen per login.
        let path = LoopbackRedirectReceiver().callbackPath
        let text = result.standardOutput.replacingOccurrences(of: "\\", with: "")
        #expect(text.contains("http://127.0.0.1\(path)"), "\(text)")
        #expect(text.contains("any port"))
        #expect(text.contains("device_authorization_endpoint"))
    }

    @Test(
        "an access token the issuer refused, as status saw, is not handed out again: the next 'sesame token' renews it"
    )
    func refusedAccessTokenIsRenewed() async throws {
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            let cli = try CLIHarness()
            let login = try await OIDCProcessTests.login(cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer)
            #expect(login.status == 0, "\(login.standardError)")
            let dead = try #require(try await cli.storedTokens().first)

            // The issuer revokes every access token it issued; the refresh token still works.
            await emulator.invalidateAccessTokens()
            let status = try await cli.run("sesame", ["status", "--timeout", "60"])
            #expect(status.status == 75, "\(status.standardOutput)\(status.standardError)")
            #expect(status.standardOutput.contains("refused the access token"), "\(status.standardOutput)")
            #expect(emulator.refreshCounters.refreshGrants == 0)

            let token = try await cli.run("sesame", ["token", "oidc"])
            #expect(token.status == 0, "\(token.standardError)")
            let handed = token.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!handed.isEmpty && handed != dead, "sesame token handed out the access token the issuer refused")
            #expect(emulator.refreshCounters.refreshGrants == 1)
            #expect(try await cli.storedTokens() == [handed])

            // The renewed login works: status checks it with the issuer and is content.
            let after = try await cli.run("sesame", ["status", "--timeout", "60"])
            #expect(after.status == 0, "\(after.standardOutput)\(after.standardError)")
            cli.expectNoTokenLeaks([dead, handed])
        }
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// Issue 47, items 9 to 14: what django-oauth-toolkit, an OpenID provider nobody here wrote,
/// exposed, reproduced against the OpenID emulator configured the same way, with `sesame` as a
/// process.
@Suite("sesame against an issuer configured as django-oauth-toolkit deployments are, as a process")
struct RealIssuerProcessTests {
    init() { TestProviders.bootstrap() }

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

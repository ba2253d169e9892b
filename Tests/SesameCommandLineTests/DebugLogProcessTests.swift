import Foundation
import Sesame
import SesameTestSupport
import Testing

/// Issue 48 item 7: `sesame --debug` (or `SESAME_DEBUG=1`) prints Sesame's log events on standard
/// error, as `GH_DEBUG` does for gh, with no token in them; without either, nothing.
@Suite("sesame --debug: the log on standard error, no secret in it", .serialized)
struct DebugLogProcessTests {
    enum Switch: String, CaseIterable, CustomTestStringConvertible {
        case flag = "sesame --debug token"
        case variable = "SESAME_DEBUG=1 sesame token"
        var testDescription: String { rawValue }
    }

    @Test(
        "a renewal by sesame token prints its HTTP exchanges, renewal decisions and store operations on standard error, and no token",
        arguments: Switch.allCases)
    func renewalLogged(_ debug: Switch) async throws {
        try await TimeTravelProcessTests.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await TimeTravelProcessTests.logIn(cli, to: provider)
            let login = try await TimeTravelProcessTests.storedLogin(cli)
            let quiet = try await cli.run("sesame", ["token", provider.name])
            #expect(quiet.status == 0 && quiet.standardError.isEmpty, "\(quiet.standardError)")

            let expiry = try #require(login.token.expirationDate)
            try await TimeTravelProcessTests.advance(cli, provider, by: expiry.timeIntervalSinceNow + 2)
            let result =
                switch debug {
                case .flag: try await cli.run("sesame", ["--debug", "token", provider.name])
                case .variable:
                    try await cli.run("sesame", ["token", provider.name], environment: ["SESAME_DEBUG": "1"])
                }
            #expect(result.status == 0, "\(result.standardError)")
            let renewed = try await TimeTravelProcessTests.storedLogin(cli)
            #expect(result.standardOutput == renewed.token.tokenString + "\n")
            let log = result.standardError
            for line in [
                "[sesame debug] token due; renewing", "[sesame debug] renewal claimed; stored login read again",
                "[sesame info] token renewed and saved", "[sesame debug] HTTP exchange: ",
                "method=POST", "path=/token", "status=200", "operation=load", "operation=save",
                "store=FileCredentialStore",
            ] {
                #expect(log.contains(line), "no '\(line)' in:\n\(log)")
            }
            let secrets = TimeTravelProcessTests.secrets(of: login) + TimeTravelProcessTests.secrets(of: renewed)
            TimeTravelProcessTests.expectQuietErrors([result], secrets)
        }
    }
}

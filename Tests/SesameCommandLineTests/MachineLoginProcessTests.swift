import Foundation
import Sesame
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// Issue 51 item 2: logins with no person (`sesame login NAME --client-credentials`), as processes.
@Suite("Machine logins: the client credentials grant, as processes")
struct MachineLoginProcessTests {
    init() { TestProviders.bootstrap() }

    static let clientID = "ci-runner"
    static let secret = "ci-runner-secret-f00d"
    static var secretEnvironment: [String: String] { ["SESAME_OIDC_CLIENT_SECRET": secret] }

    static func emulator() throws -> OIDCEmulator {
        try OIDCEmulator(clients: [clientID: secret], accessTokenLifetime: 3600, devicePollInterval: 1)
    }

    static func loginArguments(_ issuer: String) -> [String] {
        ["login", "oidc", "--issuer", issuer, "--client-id", clientID, "--client-credentials", "--scopes", "jobs"]
    }

    @Test(
        "login --client-credentials stores a login of the client itself, with its grant and no refresh token; without a secret it is refused before any request"
    )
    func clientCredentialsLogin() async throws {
        try await OIDCProcessTests.withEmulator(try Self.emulator()) { emulator, issuer in
            let cli = try CLIHarness()
            let refused = try await cli.run("sesame", Self.loginArguments(issuer))
            #expect(refused.status == 78, "\(refused.standardError)")
            #expect(refused.standardError.contains("SESAME_OIDC_CLIENT_SECRET"), "\(refused.standardError)")
            #expect(emulator.grantCount("client_credentials") == 0)

            let login = try await cli.run("sesame", Self.loginArguments(issuer), environment: Self.secretEnvironment)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(emulator.grantCount("client_credentials") == 1)
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.machineGrant == .clientCredentials)
            #expect(stored.token.refreshToken == nil && stored.token.userID == nil)
            #expect(stored.token.permissions.granted == ["jobs"])
            #expect(stored.key.issuer == issuer)

            let token = try await cli.run("sesame", ["token", "oidc"], environment: Self.secretEnvironment)
            #expect(token.status == 0, "\(token.standardError)")
            #expect(token.standardOutput == stored.token.tokenString + "\n")
            #expect(emulator.grantCount("client_credentials") == 1, "a valid token was renewed")
            cli.expectNoTokenLeaks([Self.secret])
        }
    }

    @Test("20 'sesame token' processes on an expired client-credentials login make one grant, and all print its token")
    func twentyProcessesOneGrant() async throws {
        try await OIDCProcessTests.withEmulator(try Self.emulator()) { emulator, issuer in
            let cli = try CLIHarness()
            let login = try await cli.run("sesame", Self.loginArguments(issuer), environment: Self.secretEnvironment)
            try #require(login.status == 0, "\(login.standardError)")
            var expired = try #require(try await cli.store.list(provider: nil).first)
            expired.token.expirationDate = Date().addingTimeInterval(-30)
            expired.token.refreshDate = Date().addingTimeInterval(-3630)
            try await cli.store.save(expired)

            let results = try await withThrowingTaskGroup(of: ProcessResult.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await cli.run("sesame", ["token", "oidc"], environment: Self.secretEnvironment)
                    }
                }
                return try await group.reduce(into: [ProcessResult]()) { $0.append($1) }
            }
            for result in results { #expect(result.status == 0, "\(result.standardError)") }
            #expect(
                emulator.grantCount("client_credentials") == 2,
                "the login and \(emulator.grantCount("client_credentials") - 1) renewals")
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(renewed.token.tokenString != expired.token.tokenString)
            #expect(renewed.token.machineGrant == .clientCredentials && !renewed.needsLogin)
            #expect(Set(results.map(\.standardOutput)) == [renewed.token.tokenString + "\n"])
            cli.expectNoTokenLeaks([Self.secret])
        }
    }
}

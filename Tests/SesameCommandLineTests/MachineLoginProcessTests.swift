import Foundation
import SesameOIDCEmulator
import SesamePostgres
import SesameTestSupport
import Testing

@testable import Sesame

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
            let expired = try await cli.expireStoredLogin()

            let results = try await cli.runAtOnce(20, ["token", "oidc"], environment: Self.secretEnvironment)
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

    @Test(
        "client credentials with private_key_jwt: a key file's assertions authenticate the client and renew its login, no secret anywhere; doctor checks that the issuer lists the method; a loose key file is refused",
        arguments: ["ES256", "RS256"])
    func privateKeyJWT(algorithm: String) async throws {
        let key = try SignatureSigningKey(generating: try #require(SignatureAlgorithm(rawValue: algorithm)))
        try await OIDCProcessTests.withEmulator(try OIDCEmulator(devicePollInterval: 1)) { emulator, issuer in
            let cli = try CLIHarness()
            let keyFile = cli.root.appending(path: "client.pem").path
            #expect(FileManager.default.createFile(atPath: keyFile, contents: Data(key.pem.utf8)))
            #expect(chmod(keyFile, 0o600) == 0)
            let environment = [
                "SESAME_OIDC_ISSUER": issuer, "SESAME_OIDC_CLIENT_ID": Self.clientID,
                "SESAME_OIDC_CLIENT_KEY_FILE": keyFile, "SESAME_OIDC_CLIENT_KEY_ID": "ci-key-1",
            ]
            let before = try await cli.run("sesame", ["doctor"], environment: environment)
            #expect(
                before.standardOutput.contains(
                    "'oidc' authenticates the client with private_key_jwt, but the issuer's "
                        + "token_endpoint_auth_methods_supported lists client_secret_basic, client_secret_post, none"),
                "\(before.standardOutput)")

            let jwk = JSONValue.object(Dictionary(uniqueKeysWithValues: key.publicJWKMembers.map { ($0, .string($1)) }))
            try await emulator.registerClient(Self.clientID, publicKey: jwk)
            // doctor bounds each probe at 3 s; under ThreadSanitizer on a loaded machine the issuer
            // can miss that bound, so a probe that did not answer is asked again (twice at most).
            var after = try await cli.run("sesame", ["doctor"], environment: environment)
            for _ in 0..<2 where after.standardOutput.contains("did not answer in time") {
                after = try await cli.run("sesame", ["doctor"], environment: environment)
            }
            #expect(
                after.standardOutput.contains(
                    "'oidc' authenticates the client with private_key_jwt, which the issuer supports"),
                "\(after.standardOutput)")

            let login = try await cli.run(
                "sesame", ["login", "oidc", "--client-credentials"], environment: environment)
            #expect(login.status == 0, "\(login.standardError)")
            #expect(emulator.grantCount("client_credentials") == 1)
            var stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(stored.token.machineGrant == .clientCredentials)
            stored.token.expirationDate = Date().addingTimeInterval(-30)
            stored.token.refreshDate = Date().addingTimeInterval(-3630)
            try await cli.store.save(stored)
            let token = try await cli.run("sesame", ["token", "oidc"], environment: environment)
            #expect(token.status == 0, "\(token.standardError)")
            #expect(emulator.grantCount("client_credentials") == 2, "the expired login was not renewed")
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(token.standardOutput == renewed.token.tokenString + "\n")

            #expect(chmod(keyFile, 0o644) == 0)
            let loose = try await cli.run(
                "sesame", ["login", "oidc", "--client-credentials"], environment: environment)
            #expect(loose.status == 78, "\(loose.standardError)")
            #expect(loose.standardError.contains("chmod 600 \(keyFile)"), "\(loose.standardError)")
            #expect(!loose.standardError.contains("PRIVATE KEY"))
            #expect(emulator.grantCount("client_credentials") == 2)
        }
    }

    @Test(
        "a fleet on PostgreSQL: 4 machines × 5 'sesame token' processes on an expired client-credentials login make one grant"
    )
    func fleetOneGrant() async throws {
        try await withPostgres { server in
            try await OIDCProcessTests.withEmulator(try Self.emulator()) { emulator, issuer in
                let fleet = try FleetProcessTests.Fleet(server)
                let environment = Self.secretEnvironment.merging([
                    "SESAME_OIDC_ISSUER": issuer, "SESAME_OIDC_CLIENT_ID": Self.clientID,
                ]) { $1 }
                let login = try await fleet.machines[0].run(
                    "sesame", ["login", "oidc", "--client-credentials"], environment: environment)
                try #require(login.status == 0, "\(login.standardError)")
                var expired = try #require(try await fleet.store.list(provider: nil).first)
                expired.token.expirationDate = Date().addingTimeInterval(-30)
                expired.token.refreshDate = Date().addingTimeInterval(-3630)
                try await fleet.store.save(expired)

                let results = try await fleet.runAtOnce(5, ["token", "oidc"], environment: environment)
                for result in results { #expect(result.status == 0, "\(result.standardError)") }
                #expect(
                    emulator.grantCount("client_credentials") == 2,
                    "the login and \(emulator.grantCount("client_credentials") - 1) renewals across the fleet")
                let renewed = try #require(try await fleet.store.list(provider: nil).first)
                #expect(renewed.token.tokenString != expired.token.tokenString)
                #expect(Set(results.map(\.standardOutput)) == [renewed.token.tokenString + "\n"])
            }
        }
    }
}

extension CLIHarness {
    /// Marks the one stored login's access token expired and due for renewal, as an hour later.
    @discardableResult
    func expireStoredLogin() async throws -> StoredCredential {
        var expired = try #require(try await store.list(provider: nil).first)
        expired.token.expirationDate = Date().addingTimeInterval(-30)
        expired.token.refreshDate = Date().addingTimeInterval(-3630)
        try await store.save(expired)
        return expired
    }

    /// `count` `sesame ARGUMENTS` processes, all started at once.
    func runAtOnce(_ count: Int, _ arguments: [String], environment: [String: String]) async throws -> [ProcessResult] {
        try await withThrowingTaskGroup(of: ProcessResult.self) { group in
            for _ in 0..<count {
                group.addTask { try await self.run("sesame", arguments, environment: environment) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }
}

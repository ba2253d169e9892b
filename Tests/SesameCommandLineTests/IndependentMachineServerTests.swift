import Foundation
import SesameCurl
import SesameTestSupport
import Testing

@testable import Sesame

/// The authorization server for machines from `scripts/interop` (Authlib's client credentials
/// grant and private_key_jwt client authentication, scripts/interop-checks/machine_server.py).
let independentMachineIssuer = ProcessInfo.processInfo.environment["SESAME_INTEROP_MACHINE_ISSUER"]

/// Issue 51 item 6: machine logins against an authorization server nobody here wrote.
@Suite(
    "sesame's machine logins against an independent authorization server (Authlib), as processes",
    .enabled(
        if: independentMachineIssuer != nil,
        "SESAME_INTEROP_MACHINE_ISSUER is not set: scripts/interop starts Authlib's server and sets it"))
struct IndependentMachineServerTests {
    init() { TestProviders.bootstrap() }

    static func grants(_ issuer: String, clientID: String) async throws -> Int {
        let answer = try await CurlTransport().send(
            HTTPRequest(url: try #require(URL(string: "\(issuer)/__grants?client_id=\(clientID)"))))
        return try #require(answer.json?["grants"]?.lenientInt)
    }

    @Test(
        "client credentials with private_key_jwt: the login, doctor's check of the method, and 20 processes on the expired login making one grant",
        arguments: ["ES256", "RS256"])
    func clientCredentialsWithPrivateKeyJWT(algorithm: String) async throws {
        let issuer = try #require(independentMachineIssuer)
        let key = try SignatureSigningKey(generating: try #require(SignatureAlgorithm(rawValue: algorithm)))
        let clientID = "ci-\(algorithm.lowercased())-\(UUID().uuidString.prefix(8))"
        let jwk = JSONValue.object(Dictionary(uniqueKeysWithValues: key.publicJWKMembers.map { ($0, .string($1)) }))
        let registered = try await CurlTransport().send(
            .postJSON(
                try #require(URL(string: "\(issuer)/__register")),
                .object(["client_id": .string(clientID), "jwk": jwk])))
        try #require(registered.status == 200)

        let cli = try CLIHarness()
        let keyFile = cli.root.appending(path: "client.pem").path
        #expect(FileManager.default.createFile(atPath: keyFile, contents: Data(key.pem.utf8)))
        #expect(chmod(keyFile, 0o600) == 0)
        let environment = [
            "SESAME_OIDC_ISSUER": issuer, "SESAME_OIDC_CLIENT_ID": clientID, "SESAME_OIDC_CLIENT_KEY_FILE": keyFile,
        ]
        let doctor = try await cli.run("sesame", ["doctor"], environment: environment)
        #expect(
            doctor.standardOutput.contains(
                "'oidc' authenticates the client with private_key_jwt, which the issuer supports"),
            "\(doctor.standardOutput)")

        let login = try await cli.run("sesame", ["login", "oidc", "--client-credentials"], environment: environment)
        #expect(login.status == 0, "\(login.standardError)")
        #expect(try await Self.grants(issuer, clientID: clientID) == 1)
        var stored = try #require(try await cli.store.list(provider: nil).first)
        #expect(stored.token.machineGrant == .clientCredentials && stored.token.refreshToken == nil)

        stored.token.expirationDate = Date().addingTimeInterval(-5)
        stored.token.refreshDate = Date().addingTimeInterval(-45)
        try await cli.store.save(stored)
        let results = try await withThrowingTaskGroup(of: ProcessResult.self) { group in
            for _ in 0..<20 {
                group.addTask { try await cli.run("sesame", ["token", "oidc"], environment: environment) }
            }
            return try await group.reduce(into: [ProcessResult]()) { $0.append($1) }
        }
        for result in results { #expect(result.status == 0, "\(result.standardError)") }
        #expect(try await Self.grants(issuer, clientID: clientID) == 2, "20 processes, one renewal grant")
        let renewed = try #require(try await cli.store.list(provider: nil).first)
        #expect(Set(results.map(\.standardOutput)) == [renewed.token.tokenString + "\n"])
    }
}

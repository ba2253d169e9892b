import Foundation
import SesameOIDC
import Testing

@testable import Sesame

/// Issue 51 item 1: `private_key_jwt` client assertions (RFC 7523 §2.2, OpenID Connect Core §9).
@Suite("Client assertions for private_key_jwt")
struct ClientAssertionTests {
    /// A directory of its own, removed when `body` returns.
    static func withKeyFile<T>(
        _ key: SignatureSigningKey, mode: mode_t = 0o600, _ body: (String) throws -> T
    ) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-assertion-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appending(path: "client.pem").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(key.pem.utf8)))
        #expect(chmod(path, mode) == 0)
        return try body(path)
    }

    @Test(
        "an assertion from a PEM key file is signed by that key, for the client at the token endpoint, short-lived",
        arguments: SignatureAlgorithm.allCases)
    func signsFromKeyFile(algorithm: SignatureAlgorithm) throws {
        let key = try SignatureSigningKey(generating: algorithm)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let (first, second) = try Self.withKeyFile(key) { path in
            let signer = try ClientAssertionSigner(keyFile: path, keyID: "ci-2026")
            #expect(signer.algorithm == algorithm.rawValue)
            return (
                try signer.assertion(clientID: "ci-runner", audience: "https://id.example/token", now: now),
                try signer.assertion(clientID: "ci-runner", audience: "https://id.example/token", now: now)
            )
        }
        let jwt = try JSONWebToken(compact: first)
        #expect(jwt.algorithm == algorithm.rawValue && jwt.keyID == "ci-2026")
        if algorithm == .es256 { #expect(jwt.signature.count == 64, "ES256 must be raw r || s, not DER") }
        let verifier = try SignatureKeyTests.verificationKey(for: key)
        #expect(verifier.verify(jwt.signature, of: jwt.signingInput, algorithm: algorithm))
        #expect(jwt.claims["iss"]?.stringValue == "ci-runner" && jwt.claims["sub"]?.stringValue == "ci-runner")
        #expect(jwt.claims["aud"]?.stringValue == "https://id.example/token")
        let issuedAt = try #require(jwt.claims["iat"]?.doubleValue)
        let expiry = try #require(jwt.claims["exp"]?.doubleValue)
        #expect(issuedAt == now.timeIntervalSince1970 && expiry > issuedAt && expiry - issuedAt <= 300)
        let jti = try #require(jwt.claims["jti"]?.stringValue)
        let secondJTI = try JSONWebToken(compact: second).claims["jti"]?.stringValue
        #expect(jti.count >= 16 && jti != secondJTI)
    }

    @Test("the form fields carry client_id, the jwt-bearer assertion type and an assertion, never a secret")
    func formFields() throws {
        let signer = try ClientAssertionSigner(pem: Data(try SignatureSigningKey(generating: .es256).pem.utf8))
        let fields = try signer.formFields(clientID: "ci-runner", audience: "https://id.example/token")
        #expect(fields.map(\.0) == ["client_id", "client_assertion_type", "client_assertion"])
        #expect(fields[1].1 == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        #expect(!signer.description.contains("PRIVATE") && signer.description.contains("ES256"))
    }

    @Test(
        "a key file others may read, or of another kind, is refused saying what to do, never showing the key",
        arguments: [(mode_t(0o644), "chmod 600"), (mode_t(0o640), "chmod 600")])
    func refusesLooseKeyFile(mode: mode_t, fix: String) throws {
        let key = try SignatureSigningKey(generating: .es256)
        try Self.withKeyFile(key, mode: mode) { path in
            let error = #expect(throws: AuthError.self) { try ClientAssertionSigner(keyFile: path) }
            let message = error?.message ?? ""
            #expect(message.contains(path) && message.contains("\(fix) \(path)"), "\(message)")
            #expect(!message.contains("PRIVATE KEY") && error?.category == .invalid)
        }
    }

    @Test("text that is not an unencrypted P-256 or RSA private key is refused, naming what it is not")
    func refusesWhatCannotSign() throws {
        let encrypted = """
            -----BEGIN ENCRYPTED PRIVATE KEY-----
            MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAiCEcHkJmzJJgICCAAw
            -----END ENCRYPTED PRIVATE KEY-----
            """
        for text in ["not a key", encrypted] {
            let error = #expect(throws: AuthError.self) {
                try ClientAssertionSigner(pem: Data(text.utf8), source: "the key file k.pem")
            }
            #expect(error?.message.contains("The key file k.pem cannot sign client assertions") == true)
            #expect(error?.message.contains("unencrypted") == true, "\(error?.message ?? "")")
        }
    }
}

import Foundation
import Testing

@testable import Sesame

@Suite("Signature keys through libcrypto")
struct SignatureKeyTests {
    static func verificationKey(for signer: SignatureSigningKey) throws -> SignatureVerificationKey {
        let members = Dictionary(uniqueKeysWithValues: signer.publicJWKMembers)
        switch signer.algorithm {
        case .rs256:
            return try .rsa(
                modulus: try #require(Base64URL.decode(members["n"] ?? "")),
                exponent: try #require(Base64URL.decode(members["e"] ?? "")))
        case .es256:
            return try .p256(
                x: try #require(Base64URL.decode(members["x"] ?? "")),
                y: try #require(Base64URL.decode(members["y"] ?? "")))
        }
    }

    @Test(
        "a signature made with a generated key verifies with its public JWK, and not once altered",
        arguments: SignatureAlgorithm.allCases)
    func roundTrip(algorithm: SignatureAlgorithm) throws {
        let signer = try SignatureSigningKey(generating: algorithm)
        let key = try Self.verificationKey(for: signer)
        let message = Data("header.payload".utf8)
        var signature = try signer.sign(message)
        if algorithm == .es256 { #expect(signature.count == 64) }
        #expect(key.verify(signature, of: message, algorithm: algorithm))
        #expect(!key.verify(signature, of: Data("header.payloae".utf8), algorithm: algorithm))
        signature[signature.startIndex + 5] ^= 0x40
        #expect(!key.verify(signature, of: message, algorithm: algorithm))
    }

    @Test("a key from another pair does not verify, and algorithms do not mix")
    func otherKey() throws {
        let signer = try SignatureSigningKey(generating: .es256)
        let other = try Self.verificationKey(for: try SignatureSigningKey(generating: .es256))
        let message = Data("m".utf8)
        #expect(!other.verify(try signer.sign(message), of: message, algorithm: .es256))
        #expect(!other.verify(try signer.sign(message), of: message, algorithm: .rs256))
    }

    @Test("a point that is not on P-256 is refused")
    func offCurve() {
        #expect(throws: CryptoError.self) {
            try SignatureVerificationKey.p256(x: Data(repeating: 1, count: 32), y: Data(repeating: 2, count: 32))
        }
    }
}

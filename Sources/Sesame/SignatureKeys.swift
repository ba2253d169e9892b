internal import CCrypto
import Foundation

/// A JWS signature algorithm Sesame can check (RFC 7518 §3): the two that OpenID providers use.
package enum SignatureAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// ECDSA on P-256 with SHA-256; the JWS signature is the raw `r || s`, 32 bytes each.
    case es256 = "ES256"
}

/// A public key for checking signatures, owned here and freed in `deinit`.
///
/// Built from a JWK's parts: RSA from its modulus and exponent, EC P-256 from its point.
// Immutable after init (no lock needed); libcrypto's EVP_PKEY is safe to read from many threads.
package final class SignatureVerificationKey: @unchecked Sendable {
    private let key: OpaquePointer
    /// The algorithm family the key serves.
    package let algorithm: SignatureAlgorithm

    private init(key: OpaquePointer, algorithm: SignatureAlgorithm) {
        self.key = key
        self.algorithm = algorithm
    }

    deinit { sesame_EVP_PKEY_free(key) }

    /// An RSA public key from its modulus `n` and exponent `e` (big-endian bytes).
    package static func rsa(modulus: Data, exponent: Data) throws -> SignatureVerificationKey {
        guard modulus.count >= 256 else {
            throw CryptoError(message: "The RSA key is \(modulus.count * 8) bits; at least 2048 are needed.")
        }
        guard !exponent.isEmpty, exponent.count <= 8 else {
            throw CryptoError(message: "The RSA key's exponent is not usable.")
        }
        let made = Array(modulus).withUnsafeBufferPointer { n in
            Array(exponent).withUnsafeBufferPointer { e in
                sesame_rsa_public_key(n.baseAddress, n.count, e.baseAddress, e.count)
            }
        }
        guard let made else {
            throw CryptoError(message: "The RSA public key is not valid: \(Crypto.lastOpenSSLError())")
        }
        return SignatureVerificationKey(key: made, algorithm: .rs256)
    }

    /// An EC public key on P-256 from its point's coordinates (32 bytes each).
    package static func p256(x: Data, y: Data) throws -> SignatureVerificationKey {
        guard x.count == 32, y.count == 32 else {
            throw CryptoError(
                message: "A P-256 key's x and y must be 32 bytes each; they are \(x.count) and \(y.count).")
        }
        let point = [UInt8]([0x04]) + Array(x) + Array(y)
        guard let made = point.withUnsafeBufferPointer({ sesame_p256_public_key($0.baseAddress, $0.count) }) else {
            throw CryptoError(message: "The P-256 public key is not valid: \(Crypto.lastOpenSSLError())")
        }
        return SignatureVerificationKey(key: made, algorithm: .es256)
    }

    /// Whether `signature` (in JWS form) is this key's signature of `message` under `algorithm`.
    ///
    /// Never throws: a signature that cannot even be read is simply not valid.
    package func verify(_ signature: Data, of message: Data, algorithm: SignatureAlgorithm) -> Bool {
        guard algorithm == self.algorithm else { return false }
        let derSignature: [UInt8]
        switch algorithm {
        case .rs256: derSignature = Array(signature)
        case .es256:
            guard let der = ECDSASignature.der(fromRaw: signature) else { return false }
            derSignature = der
        }
        guard let context = sesame_EVP_MD_CTX_new() else { return false }
        defer { sesame_EVP_MD_CTX_free(context) }
        guard sesame_EVP_DigestVerifyInit(context, nil, sesame_EVP_sha256(), nil, key) == 1 else { return false }
        let bytes = Array(message)
        return sesame_EVP_DigestVerify(context, derSignature, derSignature.count, bytes, bytes.count) == 1
    }
}

/// A private key for signing JWS: a client's assertions (``ClientAssertionSigner``), the
/// emulator's ID tokens, tests' tokens.
// Immutable after init (no lock needed); libcrypto's EVP_PKEY is safe to read concurrently.
package final class SignatureSigningKey: @unchecked Sendable {
    private let key: OpaquePointer
    /// The algorithm it signs with.
    package let algorithm: SignatureAlgorithm

    /// A new key pair: RSA 2048 for RS256, P-256 for ES256.
    package init(generating algorithm: SignatureAlgorithm) throws {
        let made: OpaquePointer? =
            switch algorithm {
            case .rs256: sesame_rsa_generate(2048)
            case .es256: sesame_p256_generate()
            }
        guard let made else {
            throw CryptoError(
                message: "A \(algorithm.rawValue) key could not be generated: \(Crypto.lastOpenSSLError())")
        }
        self.key = made
        self.algorithm = algorithm
    }

    /// The key in `pem`, unencrypted PEM (PKCS#8 `PRIVATE KEY`, or the traditional `RSA PRIVATE
    /// KEY` and `EC PRIVATE KEY`): RSA of 2048 bits or more signs RS256, EC on P-256 signs ES256.
    ///
    /// - Throws: ``CryptoError`` saying what the text is not (never a byte of it).
    package init(pem: Data) throws {
        let bytes = Array(pem)
        let made = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                sesame_private_key_from_pem($0.baseAddress, Int32(clamping: $0.count))
            }
        }
        guard let made else {
            throw CryptoError(
                message: "it is not an unencrypted PEM private key (a passphrase-protected key is not read; "
                    + "`openssl pkey -in KEY -out KEY.pem` writes one without)")
        }
        switch sesame_private_key_kind(made) {
        case 1: self.algorithm = .rs256
        case 2: self.algorithm = .es256
        case -1:
            sesame_EVP_PKEY_free(made)
            throw CryptoError(message: "its RSA key is shorter than 2048 bits")
        default:
            sesame_EVP_PKEY_free(made)
            throw CryptoError(message: "it is neither an RSA key (RS256) nor an EC key on P-256 (ES256)")
        }
        self.key = made
    }

    /// The key as unencrypted PKCS#8 PEM text, what ``init(pem:)`` reads (for writing test keys).
    package var pem: String {
        var length = 0
        guard let text = sesame_private_key_to_pem(key, &length) else { return "" }
        defer { free(text) }
        return text.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// A new key pair, made on a thread of its own (``init(generating:)``).
    ///
    /// An RSA 2048 key costs 0.1 to 1 s of CPU, several seconds on a loaded machine: made on a
    /// thread of Swift's cooperative pool, it would hold up every task of the process for that
    /// long (an emulator's answers included).
    package static func generated(_ algorithm: SignatureAlgorithm) async throws -> SignatureSigningKey {
        try await onOwnThread { try SignatureSigningKey(generating: algorithm) }
    }

    deinit { sesame_EVP_PKEY_free(key) }

    /// The public half as JWK members (`kty` and `n`/`e` or `crv`/`x`/`y`), base64url.
    package var publicJWKMembers: [(String, String)] {
        switch algorithm {
        case .rs256:
            return [
                ("kty", "RSA"), ("n", Base64URL.encode(bigNumberParameter(OSSL_PKEY_PARAM_RSA_N))),
                ("e", Base64URL.encode(bigNumberParameter(OSSL_PKEY_PARAM_RSA_E))),
            ]
        case .es256:
            var point = [UInt8](repeating: 0, count: 65)
            var length = 0
            _ = sesame_EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &length)
            return [
                ("kty", "EC"), ("crv", "P-256"), ("x", Base64URL.encode(point[1..<33])),
                ("y", Base64URL.encode(point[33..<65])),
            ]
        }
    }

    private func bigNumberParameter(_ name: String) -> Data {
        var number: OpaquePointer?
        guard sesame_EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else { return Data() }
        defer { sesame_BN_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int((sesame_BN_num_bits(number) + 7) / 8))
        _ = sesame_BN_bn2bin(number, &bytes)
        return Data(bytes)
    }

    /// The JWS signature of `message` (raw `r || s` for ES256).
    package func sign(_ message: Data) throws -> Data {
        guard let context = sesame_EVP_MD_CTX_new() else { throw CryptoError(message: "Out of memory signing.") }
        defer { sesame_EVP_MD_CTX_free(context) }
        let bytes = Array(message)
        var length = 0
        guard sesame_EVP_DigestSignInit(context, nil, sesame_EVP_sha256(), nil, key) == 1,
            sesame_EVP_DigestSign(context, nil, &length, bytes, bytes.count) == 1
        else { throw CryptoError(message: "Signing failed: \(Crypto.lastOpenSSLError())") }
        var signature = [UInt8](repeating: 0, count: length)
        guard sesame_EVP_DigestSign(context, &signature, &length, bytes, bytes.count) == 1 else {
            throw CryptoError(message: "Signing failed: \(Crypto.lastOpenSSLError())")
        }
        signature.removeLast(signature.count - length)
        switch algorithm {
        case .rs256: return Data(signature)
        case .es256:
            guard let raw = ECDSASignature.raw(fromDER: signature) else {
                throw CryptoError(message: "The ECDSA signature could not be converted to JWS form.")
            }
            return raw
        }
    }
}

/// Converting ECDSA signatures between JWS's raw `r || s` and the DER that libcrypto reads.
enum ECDSASignature {
    static func der(fromRaw raw: Data) -> [UInt8]? {
        guard raw.count == 64, let signature = sesame_ECDSA_SIG_new() else { return nil }
        defer { sesame_ECDSA_SIG_free(signature) }
        let bytes = Array(raw)
        guard let r = sesame_BN_bin2bn(bytes, 32, nil) else { return nil }
        guard let s = sesame_BN_bin2bn(Array(bytes[32...]), 32, nil) else {
            sesame_BN_free(r)
            return nil
        }
        guard sesame_ECDSA_SIG_set0(signature, r, s) == 1 else {
            sesame_BN_free(r)
            sesame_BN_free(s)
            return nil
        }
        let length = sesame_i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return sesame_i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }

    static func raw(fromDER der: [UInt8]) -> Data? {
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return sesame_d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { return nil }
        defer { sesame_ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 64)
        guard sesame_BN_bn2binpad(sesame_ECDSA_SIG_get0_r(signature), &raw, 32) == 32 else { return nil }
        let wroteS = raw.withUnsafeMutableBufferPointer { buffer in
            sesame_BN_bn2binpad(sesame_ECDSA_SIG_get0_s(signature), buffer.baseAddress! + 32, 32)
        }
        guard wroteS == 32 else { return nil }
        return Data(raw)
    }
}

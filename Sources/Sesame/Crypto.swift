internal import CCrypto
import Foundation

/// Small, audited cryptographic helpers backed by OpenSSL's libcrypto.
///
/// Sesame never implements cryptography by hand: every function here is a thin call into
/// libcrypto. They are what OAuth needs: SHA-256 for PKCE, HMAC-SHA256 for Facebook's
/// `appsecret_proof`, and secure random bytes for verifiers, `state` and nonces.
public enum Crypto {
    /// The SHA-256 digest of `data` (32 bytes).
    public static func sha256(_ data: some DataProtocol) -> Data {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        let bytes = Array(data)
        bytes.withUnsafeBufferPointer { input in
            _ = sesame_SHA256(input.baseAddress, input.count, &digest)
        }
        return Data(digest)
    }

    /// The HMAC-SHA256 of `data` under `key` (32 bytes).
    public static func hmacSHA256(key: some DataProtocol, data: some DataProtocol) -> Data {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let keyBytes = Array(key)
        let dataBytes = Array(data)
        keyBytes.withUnsafeBufferPointer { k in
            dataBytes.withUnsafeBufferPointer { d in
                _ = sesame_HMAC(
                    sesame_EVP_sha256(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, &digest, &length)
            }
        }
        return Data(digest.prefix(Int(length)))
    }

    /// `count` bytes from OpenSSL's cryptographically secure generator.
    ///
    /// - Throws: ``CryptoError`` when the generator could not be seeded, which OpenSSL reports
    ///   rather than returning weak bytes.
    public static func randomBytes(count: Int) throws -> Data {
        precondition(count >= 0, "randomBytes(count:) needs a non-negative count")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count == 0 || sesame_RAND_bytes(&bytes, Int32(count)) == 1 else {
            throw CryptoError(message: "OpenSSL's random generator failed: \(lastOpenSSLError())")
        }
        return Data(bytes)
    }

    /// A random, URL-safe string carrying `byteCount` bytes of entropy, for `state` and nonces.
    public static func randomURLSafeString(byteCount: Int = 32) throws -> String {
        Base64URL.encode(try randomBytes(count: byteCount))
    }

    static func lastOpenSSLError() -> String {
        let code = sesame_ERR_get_error()
        guard code != 0 else { return "no detail from OpenSSL" }
        var buffer = [CChar](repeating: 0, count: 256)
        sesame_ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A failure inside libcrypto.
public struct CryptoError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// What failed, in words.
    public var message: String
    /// Creates an error with a message.
    public init(message: String) { self.message = message }
    public var description: String { message }
    /// The ``message``: what `localizedDescription` returns.
    public var errorDescription: String? { message }
}

/// Base64 with the URL- and filename-safe alphabet and no padding (RFC 4648 §5), as OAuth,
/// PKCE and JWT use it.
public enum Base64URL {
    /// Encodes `data` without padding.
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes `string`, with or without padding; `nil` if it is not base64url.
    public static func decode(_ string: some StringProtocol) -> Data? {
        var s = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !s.contains("=") || s.hasSuffix("=") else { return nil }
        s = s.replacingOccurrences(of: "=", with: "")
        switch s.count % 4 {
        case 1: return nil
        case 2: s += "=="
        case 3: s += "="
        default: break
        }
        return Data(base64Encoded: s)
    }
}

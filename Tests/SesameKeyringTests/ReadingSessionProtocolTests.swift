import CLibSecret
import Foundation
import Sesame
import Testing

/// The checks of Sesame's own Secret Service session (`CLibSecret/shim.h`, "A session of
/// Sesame's own for reading secrets"), on answers a service could send: a public key that would
/// make the shared value guessable, an answer of another shape, a secret sent through another
/// session or not sized as AES-CBC output. Each is refused, and the read then goes through
/// libsecret's session. (`ReadingSessionTests` reads real secrets through it.)
@Suite("Sesame's Secret Service session refuses answers that do not add up")
struct ReadingSessionProtocolTests {
    /// RFC 2409's 1024-bit prime, big-endian.
    static let prime: [UInt8] = {
        let hex =
            "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22"
            + "514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7E"
            + "C6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE6"
            + "5381FFFFFFFFFFFFFFFF"
        return stride(from: 0, to: hex.count, by: 2).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
    }()
    static let sessionPath = "/org/freedesktop/secrets/session/s1"

    /// `bytes` as a GVariant of type `ay` (floating).
    static func byteArray(_ bytes: [UInt8]) -> OpaquePointer {
        bytes.withUnsafeBufferPointer { buffer in
            "y".withCString { type in
                g_variant_new_fixed_array(OpaquePointer(type), buffer.baseAddress, gsize(buffer.count), 1)
            }
        }
    }

    /// A tuple of `children` (floating).
    static func tuple(_ children: [OpaquePointer?]) -> OpaquePointer {
        children.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    /// An `OpenSession` answer, `(vo)`, with `peer` as the service's public key.
    static func openSessionReply(peer: [UInt8]) -> OpaquePointer {
        g_variant_ref_sink(tuple([g_variant_new_variant(byteArray(peer)), g_variant_new_object_path(sessionPath)]))
    }

    /// Opens a session on `reply`; whether it is ready, and its path. With `body`, runs it on
    /// the session before it is freed.
    static func finish(
        _ reply: OpaquePointer, _ body: (UnsafeMutablePointer<SesameSecretSession>) -> Void = { _ in }
    ) throws -> (ready: Bool, path: String?) {
        var session = SesameSecretSession()
        let request = try #require(sesame_secret_session_request(&session), "no key pair was made")
        g_variant_unref(g_variant_ref_sink(request))
        let ready = sesame_secret_session_finish(&session, reply) != 0
        g_variant_unref(reply)
        let path = sesame_secret_session_path(&session).map { String(cString: $0) }
        body(&session)
        sesame_secret_session_free(&session, nil)
        return (ready, path)
    }

    /// `value`, `value` plus `amount` (small), as a big-endian number of the same length.
    static func adding(_ amount: Int, to value: [UInt8]) -> [UInt8] {
        var result = value
        var carry = amount
        for index in result.indices.reversed() where carry != 0 {
            let sum = Int(result[index]) + carry
            result[index] = UInt8(truncatingIfNeeded: (sum % 256 + 256) % 256)
            carry = sum >= 256 ? 1 : (sum < 0 ? -1 : 0)
        }
        return result
    }

    @Test("a service key of 0, 1, p − 1, p or longer than the prime is refused; 2 and p − 2 are taken")
    func publicKeyRange() throws {
        let refused: [(String, [UInt8])] = [
            ("0", [0]), ("1", [1]), ("p - 1", Self.adding(-1, to: Self.prime)), ("p", Self.prime),
            ("129 bytes", [1] + [UInt8](repeating: 0, count: 128)), ("empty", []),
        ]
        for (name, peer) in refused {
            let outcome = try Self.finish(Self.openSessionReply(peer: peer))
            #expect(!outcome.ready && outcome.path == nil, "a service key of \(name) was taken")
        }
        for (name, peer) in [("2", [UInt8(2)]), ("p - 2", Self.adding(-2, to: Self.prime))] {
            let outcome = try Self.finish(Self.openSessionReply(peer: peer))
            #expect(outcome.ready && outcome.path == Self.sessionPath, "a service key of \(name) was refused")
        }
    }

    @Test("an OpenSession answer of another shape is refused")
    func otherShape() throws {
        let stringOutput = g_variant_ref_sink(
            Self.tuple([
                g_variant_new_variant(g_variant_new_string("plain")), g_variant_new_object_path(Self.sessionPath),
            ]))!
        #expect(try !Self.finish(stringOutput).ready, "a (vo) answer whose key is a string was taken")
        let noVariant = g_variant_ref_sink(
            Self.tuple([Self.byteArray([2]), g_variant_new_object_path(Self.sessionPath)]))!
        #expect(try !Self.finish(noVariant).ready, "an (ayo) answer was taken")
    }

    /// Plays the service: answers the session's key with `2^3` (a test's exponent), works out
    /// the same AES key as the specification says (the shared value padded to 128 bytes,
    /// HKDF-SHA256 with no salt and no info, here on Sesame's OpenSSL HMAC), and encrypts
    /// `plaintext` (already padded) in AES-128-CBC with libgcrypt.
    static func serviceEncrypting(
        request: OpaquePointer, plaintexts: [[UInt8]], iv: [UInt8]
    ) throws -> (reply: OpaquePointer, ciphertexts: [[UInt8]]) {
        // The session's public key, from OpenSession's `(sv)` parameters.
        let input = try #require(g_variant_get_child_value(request, 1))
        let keyBytes = try #require(g_variant_get_variant(input))
        var length: gsize = 0
        let raw = try #require(g_variant_get_fixed_array(keyBytes, &length, 1))
        var client: gcry_mpi_t?
        #expect(gcry_mpi_scan(&client, GCRYMPI_FMT_USG, raw, Int(length), nil) == 0)
        g_variant_unref(keyBytes)
        g_variant_unref(input)
        var prime: gcry_mpi_t?
        _ = Self.prime.withUnsafeBufferPointer {
            gcry_mpi_scan(&prime, GCRYMPI_FMT_USG, $0.baseAddress, $0.count, nil)
        }
        let exponent = gcry_mpi_set_ui(nil, 3)
        let shared = gcry_mpi_new(1024)
        gcry_mpi_powm(shared, client, exponent, prime)
        var value = [UInt8](repeating: 0, count: 128)
        var written = 0
        #expect(gcry_mpi_print(GCRYMPI_FMT_USG, &value, 128, &written, shared) == 0)
        let ikm = [UInt8](repeating: 0, count: 128 - written) + value.prefix(written)
        [client, prime, exponent, shared].forEach { gcry_mpi_release($0) }
        let pseudorandomKey = Crypto.hmacSHA256(key: [UInt8](repeating: 0, count: 32), data: ikm)
        let key = [UInt8](Crypto.hmacSHA256(key: pseudorandomKey, data: [1]).prefix(16))

        var ciphertexts: [[UInt8]] = []
        for plaintext in plaintexts {
            var cipher: gcry_cipher_hd_t?
            #expect(
                gcry_cipher_open(&cipher, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0
            )
            #expect(gcry_cipher_setkey(cipher, key, key.count) == 0)
            #expect(gcry_cipher_setiv(cipher, iv, iv.count) == 0)
            var out = [UInt8](repeating: 0, count: plaintext.count)
            #expect(gcry_cipher_encrypt(cipher, &out, out.count, plaintext, plaintext.count) == 0)
            gcry_cipher_close(cipher)
            ciphertexts.append(out)
        }
        return (openSessionReply(peer: [8]), ciphertexts)
    }

    @Test("a secret encrypted with the session's key is read; sent through another session, or badly padded, it is not")
    func secretsThroughTheSession() throws {
        let iv = [UInt8](repeating: 0x5a, count: 16)
        let secret = Array("a secret of more than one AES block: ✓".utf8)
        let pad = 16 - secret.count % 16
        let padded = secret + [UInt8](repeating: UInt8(pad), count: pad)
        var badPadding = padded
        badPadding[badPadding.count - 2] ^= 0xff  // the last pad byte says `pad`; the one before does not
        var zeroPad = secret + [UInt8](repeating: 0, count: pad)
        zeroPad[zeroPad.count - 1] = 0

        var session = SesameSecretSession()
        let request = try #require(sesame_secret_session_request(&session))
        g_variant_ref_sink(request)
        defer { sesame_secret_session_free(&session, nil) }
        let (reply, ciphertexts) = try Self.serviceEncrypting(
            request: request, plaintexts: [padded, badPadding, zeroPad], iv: iv)
        g_variant_unref(request)
        #expect(sesame_secret_session_finish(&session, reply) != 0, "the session did not open")
        g_variant_unref(reply)

        func read(_ ciphertext: [UInt8], through path: String) -> [UInt8]? {
            let encoded = g_variant_ref_sink(
                Self.tuple([
                    g_variant_new_object_path(path), Self.byteArray(iv), Self.byteArray(ciphertext),
                    g_variant_new_string("text/plain"),
                ]))!
            defer { g_variant_unref(encoded) }
            guard let value = sesame_secret_session_decode(&session, encoded) else { return nil }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            var length: gsize = 0
            let bytes = secret_value_get(value, &length)
            return bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) }
        }
        #expect(read(ciphertexts[0], through: Self.sessionPath) == secret, "the secret did not decrypt to itself")
        #expect(
            read(ciphertexts[0], through: "/org/freedesktop/secrets/session/other") == nil,
            "a secret sent through another session was read")
        #expect(read(ciphertexts[1], through: Self.sessionPath) == nil, "a secret with mixed pad bytes was read")
        #expect(read(ciphertexts[2], through: Self.sessionPath) == nil, "a secret padded with a zero was read")
    }

    @Test("a secret sent through another session, or not sized as AES-CBC output, is not decrypted")
    func secretsThatDoNotFit() throws {
        func encoded(session: String, iv: Int, value: Int) -> OpaquePointer {
            g_variant_ref_sink(
                Self.tuple([
                    g_variant_new_object_path(session), Self.byteArray([UInt8](repeating: 7, count: iv)),
                    Self.byteArray([UInt8](repeating: 9, count: value)), g_variant_new_string("text/plain"),
                ]))!
        }
        let cases: [(String, OpaquePointer)] = [
            ("another session's", encoded(session: "/org/freedesktop/secrets/session/other", iv: 16, value: 32)),
            ("a 15-byte IV", encoded(session: Self.sessionPath, iv: 15, value: 32)),
            ("a 31-byte value", encoded(session: Self.sessionPath, iv: 16, value: 31)),
            ("an empty value", encoded(session: Self.sessionPath, iv: 16, value: 0)),
        ]
        let outcome = try Self.finish(Self.openSessionReply(peer: [2])) { session in
            for (name, secret) in cases {
                let value = sesame_secret_session_decode(session, secret)
                #expect(value == nil, "\(name) secret was decrypted")
                if let value { secret_value_unref(UnsafeMutableRawPointer(value)) }
                g_variant_unref(secret)
            }
        }
        #expect(outcome.ready, "the session for the secrets did not open")
    }
}

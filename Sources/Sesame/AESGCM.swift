internal import CCrypto
import Foundation

/// AES-256-GCM through libcrypto, for stores that encrypt credentials at rest (SesamePostgres).
///
/// A sealed box is the 12-byte nonce, the ciphertext and the 16-byte tag, in that order. Every
/// seal draws a fresh random nonce from libcrypto's generator. Nothing here is cryptography of
/// Sesame's own: the cipher, the tag check and the random numbers are all libcrypto's.
package enum AESGCM {
    /// The key length: AES-256.
    package static let keyByteCount = 32
    /// The nonce length GCM is made for.
    package static let nonceByteCount = 12
    /// The tag length.
    package static let tagByteCount = 16

    /// `plaintext` sealed under `key` (32 bytes), with `associatedData` bound to it unencrypted.
    ///
    /// - Throws: ``CryptoError`` when libcrypto fails (no random numbers, a broken library).
    package static func seal(_ plaintext: [UInt8], key: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        precondition(key.count == keyByteCount, "AES-256-GCM needs a 32-byte key")
        let nonce = [UInt8](try Crypto.randomBytes(count: nonceByteCount))
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        let sealed = sesame_aes_256_gcm_seal(
            key, nonce, associatedData, Int32(associatedData.count), plaintext, Int32(plaintext.count), &ciphertext,
            &tag)
        guard sealed == 1 else {
            throw CryptoError(message: "OpenSSL could not encrypt with AES-256-GCM: \(Crypto.lastOpenSSLError())")
        }
        return nonce + ciphertext + tag
    }

    /// The plaintext of a box ``seal(_:key:associatedData:)`` made, or `nil` when the box is not
    /// one that `key` sealed with `associatedData` (another key, another row's data, altered or
    /// truncated bytes): GCM's tag tells these apart from a good box, and from each other it
    /// cannot.
    package static func open(_ box: [UInt8], key: [UInt8], associatedData: [UInt8]) -> [UInt8]? {
        precondition(key.count == keyByteCount, "AES-256-GCM needs a 32-byte key")
        guard box.count >= nonceByteCount + tagByteCount else { return nil }
        let nonce = Array(box[..<nonceByteCount])
        let ciphertext = Array(box[nonceByteCount..<(box.count - tagByteCount)])
        let tag = Array(box[(box.count - tagByteCount)...])
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        let opened = sesame_aes_256_gcm_open(
            key, nonce, associatedData, Int32(associatedData.count), ciphertext, Int32(ciphertext.count), tag,
            &plaintext)
        guard opened == 1 else {
            _ = Crypto.lastOpenSSLError()  // takes the failure off the thread's error queue
            return nil
        }
        return plaintext
    }
}

import Foundation
import Sesame

/// A key that ``PostgresCredentialStore`` encrypts credentials with: 32 bytes for AES-256-GCM,
/// and an id that each row records, so that keys can be rotated.
///
/// The operator supplies the bytes (from a key file or an environment variable, never from a
/// command's arguments); Sesame never derives or stores them. Its description shows the id only.
public struct CredentialEncryptionKey: Sendable, Hashable, CustomStringConvertible {
    /// The name rows sealed with this key record (`2026-12`, `primary`): not secret.
    public let id: String
    /// The key itself.
    let bytes: [UInt8]

    /// A key from its 32 bytes.
    ///
    /// - Throws: `CredentialStoreError` when `bytes` is not 32 bytes long or `id` is empty.
    public init(id: String, bytes: some Collection<UInt8>) throws {
        guard !id.isEmpty, !id.utf8.contains(0) else {
            throw CredentialStoreError(
                kind: .invalidKey, message: "An encryption key needs a non-empty id without NUL characters.")
        }
        guard bytes.count == 32 else {
            throw CredentialStoreError(
                kind: .invalidKey,
                message: "The encryption key \"\(id)\" is \(bytes.count) bytes long; AES-256 needs exactly 32 "
                    + "(make one with `openssl rand -base64 32`).")
        }
        self.id = id
        self.bytes = Array(bytes)
    }

    /// A key from the Base64 text of its 32 bytes, as `openssl rand -base64 32` prints it;
    /// spaces and line breaks around it are ignored.
    ///
    /// - Throws: `CredentialStoreError` when the text is not Base64 of 32 bytes.
    public init(id: String, base64: String) throws {
        guard let bytes = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw CredentialStoreError(
                kind: .invalidKey,
                message: "The encryption key \"\(id)\" is not Base64 text; make one with `openssl rand -base64 32`.")
        }
        try self.init(id: id, bytes: bytes)
    }

    /// Shows the id, never the bytes.
    public var description: String { "CredentialEncryptionKey(id: \(id))" }
}

extension CredentialStoreError.Kind {
    /// An encryption key cannot be used: the wrong length, not Base64, no id.
    public static let invalidKey = Self(rawValue: "invalidKey")
    /// A stored credential was sealed with a key the store was not given, or does not open with
    /// the key of that id (the key was replaced under the same id, or the row was altered). The
    /// row is left in place.
    public static let wrongKey = Self(rawValue: "wrongKey")
    /// The database's tables are not the ones this version of Sesame uses: not created yet, or
    /// created by a newer Sesame.
    public static let incompatibleSchema = Self(rawValue: "incompatibleSchema")
    /// The database server refused the login: the user name or password (in `~/.pgpass` or
    /// `PGPASSWORD`) is wrong, or `pg_hba.conf` does not let this user in from here.
    public static let authenticationFailed = Self(rawValue: "authenticationFailed")
}

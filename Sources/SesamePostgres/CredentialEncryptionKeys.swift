import Foundation
import Sesame

/// The keys a ``PostgresCredentialStore`` is given: the one it encrypts with, and the ones being
/// rotated out, which it still decrypts with. Read from a key file or an environment variable,
/// never from a command's arguments.
///
/// The text is one key a line, `ID:BASE64` (`2026-12:3q2+7w…`), the key that encrypts first and
/// the previous ones after it; a line that is only Base64 is a key with the id `default`. Blank
/// lines and lines starting with `#` are skipped. Make a key with `openssl rand -base64 32`.
///
/// ```sh
/// printf '2026-12:%s\n' "$(openssl rand -base64 32)" > /etc/sesame/postgres.key
/// chmod 600 /etc/sesame/postgres.key
/// export SESAME_POSTGRES_KEY_FILE=/etc/sesame/postgres.key
/// ```
public struct CredentialEncryptionKeys: Sendable, CustomStringConvertible {
    /// The key new and re-saved credentials are encrypted with.
    public var current: CredentialEncryptionKey
    /// Keys that only decrypt: rows sealed with them are re-sealed with ``current`` when saved.
    public var previous: [CredentialEncryptionKey]

    /// The environment variable naming a key file.
    public static let fileVariable = "SESAME_POSTGRES_KEY_FILE"
    /// The environment variable holding the keys' text itself.
    public static let textVariable = "SESAME_POSTGRES_KEY"

    /// Keys given directly.
    public init(current: CredentialEncryptionKey, previous: [CredentialEncryptionKey] = []) {
        self.current = current
        self.previous = previous
    }

    /// The keys in `text`, in the format described above; `source` names where it came from in
    /// errors.
    ///
    /// - Throws: `CredentialStoreError` of kind `CredentialStoreError/Kind/invalidKey` naming the
    ///   line that is wrong (never its text), or when there is no key at all or two share an id.
    public init(text: String, source: String) throws {
        var keys: [CredentialEncryptionKey] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let parts = line.split(separator: ":", maxSplits: 1).map(String.init)
            let (id, base64) = parts.count == 2 ? (parts[0], parts[1]) : ("default", parts[0])
            let key: CredentialEncryptionKey
            do {
                key = try CredentialEncryptionKey(id: id, base64: base64)
            } catch let error as CredentialStoreError {
                throw CredentialStoreError(kind: .invalidKey, message: "\(source), line \(index + 1): \(error.message)")
            }
            guard !keys.contains(where: { $0.id == key.id }) else {
                throw CredentialStoreError(
                    kind: .invalidKey,
                    message: "\(source), line \(index + 1): a second key with the id \"\(key.id)\"; give each key "
                        + "an id of its own.")
            }
            keys.append(key)
        }
        guard let current = keys.first else {
            throw CredentialStoreError(
                kind: .invalidKey,
                message: "\(source) holds no key; put one in it as ID:BASE64 (make the Base64 with "
                    + "`openssl rand -base64 32`).")
        }
        self.init(current: current, previous: Array(keys.dropFirst()))
    }

    /// The keys from the key file named by `SESAME_POSTGRES_KEY_FILE`, or else from the text of
    /// `SESAME_POSTGRES_KEY`.
    ///
    /// - Throws: `CredentialStoreError` of kind `CredentialStoreError/Kind/invalidKey` when neither
    ///   is set, the file cannot be read or others may write it, or the text is not keys.
    public static func fromEnvironment(_ environment: [String: String]) throws -> CredentialEncryptionKeys {
        if let path = environment[fileVariable], !path.isEmpty {
            return try fromFile(URL(fileURLWithPath: path))
        }
        if let text = environment[textVariable], !text.isEmpty {
            return try CredentialEncryptionKeys(text: text, source: textVariable)
        }
        throw CredentialStoreError(
            kind: .invalidKey,
            message: "The PostgreSQL store needs the key its credentials are encrypted with: set \(fileVariable) to "
                + "a file holding ID:BASE64 (made with `openssl rand -base64 32`), or \(textVariable) to that text.")
    }

    /// The keys in the file at `url`, when the file may hold a key by libpq's rule for a client's
    /// private key (`sslkey`): a regular file owned by this user with no access for group or
    /// others (0600 or less), or owned by root and readable by root's group at most (0640 or
    /// less) for a user who is not root. A file of another user (reached through a symbolic link
    /// too), or one every user may read, is refused, saying how to fix it. The checks are made on
    /// the opened file, so it cannot be swapped between the check and the read.
    ///
    /// - Throws: `CredentialStoreError` of kind `CredentialStoreError/Kind/invalidKey` when the
    ///   file cannot be read, is not a regular file, belongs to another user, or group or others
    ///   may use it.
    public static func fromFile(_ url: URL) throws -> CredentialEncryptionKeys {
        let data: Data
        do {
            data = try PrivateFiles.privateKeyFileContents(atPath: url.path, setting: fileVariable)
        } catch let error as CredentialStoreError {
            throw CredentialStoreError(kind: .invalidKey, message: error.message)
        }
        return try CredentialEncryptionKeys(
            text: String(decoding: data, as: UTF8.self), source: "The key file \(url.path)")
    }

    /// Shows the ids, never the keys.
    public var description: String {
        "CredentialEncryptionKeys(current: \(current.id), previous: \(previous.map(\.id)))"
    }
}

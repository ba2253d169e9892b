import Foundation
import Sesame

/// A keyring item as libsecret returned it, copied into Swift values.
struct KeyringItem: Sendable {
    /// The item's D-Bus object path, which identifies it within the service.
    var path: String
    /// The label shown in seahorse and `secret-tool`.
    var label: String
    /// Every attribute the item carries.
    var attributes: [String: String]
    /// Whether the item's collection was locked when it was read.
    var isLocked: Bool
    /// When the item was last changed.
    var modified: Date
    /// The secret, when it was loaded (never for a locked item). Secret.
    var secret: [UInt8]?
}

/// How Sesame lays a credential out in the keyring: attributes that find it, a label that
/// reads well, and the secret, which is the credential's JSON in base64.
///
/// Attributes are stored unencrypted, so they hold only what identifies the credential:
/// `provider`, `app_id`, `account` and `schema_version`, plus `xdg:schema` =
/// `org.sesame.Credential`, which libsecret adds from the schema and every search includes.
///
/// Layouts: schema_version 1 (and items without the attribute, written by hand) hold the JSON
/// itself, or a bare token. Version 2, written since, holds the JSON in base64 (RFC 4648, with
/// padding): KeePassXC treats `{…}` in a secret as placeholders (`{REF:…}`, `{USERNAME}`) and
/// resolves or refuses them, which could alter a token or a name; base64 has no braces. Both
/// layouts are read.
enum KeyringItemFormat {
    /// The schema name, stored as the `xdg:schema` attribute.
    static let schemaName = "org.sesame.Credential"
    /// The layout this version of Sesame writes and the newest it reads.
    static let schemaVersion = 2

    /// Attribute names.
    enum Attribute {
        static let schema = "xdg:schema"
        static let provider = "provider"
        static let appID = "app_id"
        static let account = "account"
        /// Where the login is valid (an OpenID issuer), on the items of keys that have one.
        static let issuer = "issuer"
        static let schemaVersion = "schema_version"
        /// Every attribute Sesame reads back from an item.
        static let all = [schema, provider, appID, account, issuer, schemaVersion]
    }

    /// The attributes written with the credential for `key`.
    static func attributes(for key: CredentialKey) -> [String: String] {
        var attributes = searchAttributes(for: key)
        attributes[Attribute.schemaVersion] = String(schemaVersion)
        return attributes
    }

    /// The attributes that find the credential for `key`, whichever version wrote it.
    ///
    /// A search matches every item that has these attributes, also items with more: an item
    /// of a key without an issuer is told from one with an issuer by ``belongs(_:to:)``.
    static func searchAttributes(for key: CredentialKey) -> [String: String] {
        var attributes = [
            Attribute.provider: key.provider.rawValue, Attribute.appID: key.appID, Attribute.account: key.account,
        ]
        attributes[Attribute.issuer] = key.issuer
        return attributes
    }

    /// The issuer an item's attributes name, `nil` for none (or an empty one).
    static func issuer(of attributes: [String: String]) -> String? {
        attributes[Attribute.issuer].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether `item`, found by ``searchAttributes(for:)``, is the credential of `key` rather
    /// than one of the same names valid at an issuer the key does not name.
    static func belongs(_ item: KeyringItem, to key: CredentialKey) -> Bool {
        issuer(of: item.attributes) == key.issuer
    }

    /// The label, for example `Sesame: facebook (app 1234) — alice`.
    static func label(for key: CredentialKey) -> String { "Sesame: \(key)" }

    /// The secret stored for `credential`: its JSON, in base64 (schema_version 2).
    static func secret(for credential: StoredCredential) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Dates keep Foundation's default encoding so that they round-trip exactly.
        return Array(try encoder.encode(credential).base64EncodedData())
    }

    /// How many times a credential's secret is overwritten before the item is deleted: one
    /// more than KeePassXC keeps in an entry's history by default (10), so that no earlier
    /// secret stays in the history of an entry moved to its Recycle Bin.
    static let scrubWrites = 11

    /// What a deleted item's secret is overwritten with, the `round`th time, before it is
    /// deleted. Holds no token; each round differs, since an unchanged value adds no history.
    static func scrubbedSecret(round: Int) -> [UInt8] { Array("\(scrubbedPrefix)\(round))".utf8) }

    private static let scrubbedPrefix = "deleted by Sesame ("

    /// Whether `item` is one that Sesame is deleting: its secret has been overwritten by
    /// `scrubbedSecret(round:)` and the item itself goes in a moment. Readers treat it as gone
    /// already, so that a `status` or `list` running beside a `logout` never reports it as a
    /// corrupt credential, and a `load` beside a `save` never picks it as the newest copy.
    static func isBeingDeleted(_ item: KeyringItem) -> Bool {
        guard let secret = item.secret else { return false }
        return secret.starts(with: scrubbedPrefix.utf8) && secret.last == UInt8(ascii: ")")
    }

    /// The key an item's attributes name, or why they do not name one.
    static func key(of item: KeyringItem) -> Result<CredentialKey, CredentialStoreError> {
        let names = [Attribute.provider, Attribute.appID, Attribute.account]
        let missing = names.filter { (item.attributes[$0] ?? "").isEmpty }
        guard missing.isEmpty,
            let provider = item.attributes[Attribute.provider],
            let appID = item.attributes[Attribute.appID],
            let account = item.attributes[Attribute.account]
        else {
            let list = missing.map { "'\($0)'" }.joined(separator: ", ")
            return .failure(
                corrupt(
                    item, key: nil,
                    reason: "it has the \(schemaName) schema but no \(list) attribute\(missing.count == 1 ? "" : "s")"))
        }
        return .success(
            CredentialKey(
                provider: ProviderID(provider), issuer: issuer(of: item.attributes), appID: appID, account: account))
    }

    /// The credential an item holds, or a `CredentialStoreError.Kind.corrupt`
    /// error that names the item and how to remove it. Never deletes anything.
    ///
    /// Besides the JSON Sesame writes (a `StoredCredential`), the secret may be an
    /// `AccessToken`'s JSON or a bare token string, so that an item made by hand with
    /// `secret-tool store` is read too; dates in hand-written JSON may be ISO 8601 strings.
    static func credential(from item: KeyringItem) -> Result<StoredCredential, CredentialStoreError> {
        let key: CredentialKey
        switch self.key(of: item) {
        case .success(let found): key = found
        case .failure(let error): return .failure(error)
        }
        if let version = item.attributes[Attribute.schemaVersion] {
            guard let number = Int(version), number >= 1 else {
                return .failure(
                    corrupt(item, key: key, reason: "its schema_version '\(version)' is not a version number"))
            }
            guard number <= schemaVersion else {
                let message = KeyringMessages.text(
                    "The keyring item “\(item.label)” was written by a newer Sesame (schema_version \(number); this ",
                    "one reads up to \(schemaVersion)). It was left as it is; upgrade Sesame to use it.")
                return .failure(CredentialStoreError(kind: .corrupt, message: message))
            }
        }
        guard var secret = item.secret else {
            return .failure(corrupt(item, key: key, reason: "its secret could not be read"))
        }
        if let version = item.attributes[Attribute.schemaVersion], Int(version) ?? 0 >= 2 {
            guard let decoded = Data(base64Encoded: Data(secret.trimmingASCIIWhitespace())) else {
                return .failure(
                    corrupt(item, key: key, reason: "its secret is not base64, as schema_version \(version) says"))
            }
            secret = Array(decoded)
        }
        let bytes = secret.trimmingASCIIWhitespace()
        guard let first = bytes.first else {
            return .failure(corrupt(item, key: key, reason: "its secret is empty"))
        }
        if first == UInt8(ascii: "{") {
            return decodeJSON(bytes, item: item, key: key)
        }
        guard let text = String(validating: bytes, as: UTF8.self),
            text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
        else {
            return .failure(corrupt(item, key: key, reason: "its secret is neither JSON nor a single token"))
        }
        let token = AccessToken(tokenString: text, provider: key.provider, appID: key.appID, refreshDate: item.modified)
        return .success(StoredCredential(key: key, token: token, savedAt: item.modified))
    }

    private static func decodeJSON(
        _ bytes: ArraySlice<UInt8>, item: KeyringItem, key: CredentialKey
    )
        -> Result<StoredCredential, CredentialStoreError>
    {
        let data = Data(bytes)
        var credential: StoredCredential
        // Made only for what `decodeWritten` does not read: see there.
        var decoder: JSONDecoder {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom(decodeDate)
            return decoder
        }
        do {
            credential = try decodeWritten(data) ?? decoder.decode(StoredCredential.self, from: data)
        } catch let storedError {
            do {
                let token = try decoder.decode(AccessToken.self, from: data)
                credential = StoredCredential(key: key, token: token, savedAt: item.modified)
            } catch {
                // Report the reason for the shape Sesame writes; the token's shape is the fallback.
                let reason = isMissingKey(storedError, "key") ? shortReason(error) : shortReason(storedError)
                return .failure(corrupt(item, key: key, reason: "its secret is not a Sesame credential (\(reason))"))
            }
        }
        guard credential.token.provider == key.provider, credential.token.appID == key.appID else {
            let owner = "\(credential.token.provider) (app \(credential.token.appID))"
            let reason = "the token inside is for \(owner), not for the provider and app its attributes name"
            return .failure(corrupt(item, key: key, reason: reason))
        }
        // The attributes are what finds the item, so they name it.
        credential.key = key
        return .success(credential)
    }

    /// A credential in exactly the shape Sesame writes (`StoredCredential`'s `Codable` form, dates
    /// as seconds since 2001), read with the core's JSON parser; `nil` for anything else (a
    /// hand-written shape, an ISO 8601 date, a value of the wrong type), which `JSONDecoder` then
    /// reads or explains. `JSONDecoder`'s first use in a process instantiates its generic
    /// containers and scans the binary's protocol conformances for them, a millisecond of every
    /// `sesame token`; the result is the same either way (a test compares them).
    static func decodeWritten(_ data: Data) -> StoredCredential? {
        /// A member that may be absent or null (`decodeIfPresent`): `.some(nil)` then, `nil` when
        /// it has another type.
        func optional<T>(_ value: JSONValue?, _ read: (JSONValue) -> T?) -> T?? {
            guard let value, value != .null else { return .some(nil) }
            return read(value).map { .some($0) } ?? nil
        }
        func strings(_ value: JSONValue?) -> Set<String>? {
            guard case .array(let elements)? = value else { return nil }
            var names: Set<String> = []
            for element in elements {
                guard case .string(let name) = element else { return nil }
                names.insert(name)
            }
            return names
        }
        guard case .object(let root)? = JSONValue(parsing: data),
            case .object(let key)? = root["key"], case .object(let token)? = root["token"],
            case .number(let savedAt)? = root["savedAt"], case .bool(let needsLogin)? = root["needsLogin"],
            case .string(let keyProvider)? = key["provider"], case .string(let keyApp)? = key["appID"],
            case .string(let account)? = key["account"],
            case .string(let tokenString)? = token["tokenString"], case .string(let provider)? = token["provider"],
            case .string(let appID)? = token["appID"], case .number(let refreshDate)? = token["refreshDate"],
            case .object(let permissions)? = token["permissions"],
            let granted = strings(permissions["granted"]), let declined = strings(permissions["declined"]),
            let userID = optional(token["userID"], \.stringValue),
            let expirationDate = optional(token["expirationDate"], \.doubleValue),
            let refreshToken = optional(token["refreshToken"], \.stringValue),
            let idToken = optional(token["idToken"], \.stringValue),
            let extras = optional(token["providerExtras"], \.objectValue),
            let legacyDataAccess = optional(token["dataAccessExpirationDate"], \.doubleValue)
        else { return nil }
        var permissionSet = PermissionSet()
        // As the synthesized decoder sets them: as stored, with no name moved between the lists.
        permissionSet.granted = granted
        permissionSet.declined = declined
        var providerExtras = extras ?? [:]
        if providerExtras[AccessToken.dataAccessExpiryExtra] == nil, let legacyDataAccess {
            providerExtras[AccessToken.dataAccessExpiryExtra] = .number(
                Date(timeIntervalSinceReferenceDate: legacyDataAccess).timeIntervalSince1970)
        }
        let accessToken = AccessToken(
            tokenString: tokenString, provider: ProviderID(provider), appID: appID, userID: userID,
            permissions: permissionSet, expirationDate: expirationDate.map { Date(timeIntervalSinceReferenceDate: $0) },
            refreshDate: Date(timeIntervalSinceReferenceDate: refreshDate), refreshToken: refreshToken,
            idToken: idToken, providerExtras: providerExtras)
        return StoredCredential(
            key: CredentialKey(provider: ProviderID(keyProvider), appID: keyApp, account: account), token: accessToken,
            savedAt: Date(timeIntervalSinceReferenceDate: savedAt), needsLogin: needsLogin)
    }

    private static func decodeDate(_ decoder: any Decoder) throws -> Date {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Double.self) {
            return Date(timeIntervalSinceReferenceDate: seconds)
        }
        let text = try container.decode(String.self)
        if let date = try? Date(text, strategy: .iso8601) { return date }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return date
        }
        throw DecodingError.dataCorruptedError(
            in: container, debugDescription: "a date is neither a number nor an ISO 8601 string")
    }

    private static func isMissingKey(_ error: any Error, _ name: String) -> Bool {
        if case DecodingError.keyNotFound(let key, let context) = error {
            return key.stringValue == name && context.codingPath.isEmpty
        }
        return false
    }

    /// Why decoding failed, naming fields but never quoting the data (which is secret).
    private static func shortReason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty: "not valid JSON"
        case DecodingError.dataCorrupted(let context): "bad value at \(path(context.codingPath))"
        case DecodingError.keyNotFound(let key, let context): "missing '\(path(context.codingPath + [key]))'"
        case DecodingError.typeMismatch(_, let context): "wrong type at \(path(context.codingPath))"
        case DecodingError.valueNotFound(_, let context): "missing value at \(path(context.codingPath))"
        default: "unreadable"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        let parts: [String] = codingPath.map { key in
            if let index = key.intValue { return "[\(index)]" }
            return ".\(key.stringValue)"
        }
        let text = parts.joined()
        return text.hasPrefix(".") ? String(text.dropFirst()) : text
    }

    private static func corrupt(_ item: KeyringItem, key: CredentialKey?, reason: String) -> CredentialStoreError {
        var clear = ["secret-tool", "clear", Attribute.schema, schemaName]
        for name in [Attribute.provider, Attribute.appID, Attribute.account] {
            if let value = item.attributes[name] { clear += [name, value] }
        }
        let command = clear.map(shellQuoted).joined(separator: " ")
        let again = key.map { " and log in again to \($0.provider)" } ?? ""
        let message = KeyringMessages.text(
            "The keyring item “\(item.label)” cannot be read as a Sesame credential: \(reason). Sesame left it as it ",
            "is. If you no longer need it, remove it with `\(command)`\(again).")
        return CredentialStoreError(kind: .corrupt, message: message)
    }

    /// `word`, quoted for a POSIX shell when it needs to be.
    static func shellQuoted(_ word: String) -> String {
        let plain = word.unicodeScalars.allSatisfy {
            CharacterSet.alphanumerics.contains($0) || "-_.:/@%+=,".unicodeScalars.contains($0)
        }
        if plain && !word.isEmpty { return word }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension Array where Element == UInt8 {
    fileprivate func trimmingASCIIWhitespace() -> ArraySlice<UInt8> {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else {
            return []
        }
        return self[start...end]
    }
}

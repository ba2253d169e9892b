import Foundation
import Sesame

/// How a credential is written in a password-store entry: what `pass show` prints.
///
/// The first line is the access token, as `pass show -c` and every `pass` tool expect; the rest
/// are `key: value` lines:
///
/// ```
/// <access token>
/// refresh_token: <token>
/// expires: 2026-12-04T15:30:00Z
/// scopes: openid profile
/// ```
///
/// Reading is tolerant of an entry edited by hand with `pass edit`: keys in any order, in any
/// case, blank lines, lines that are not `key: value` (notes), unknown keys and a missing final
/// newline are all accepted; only an empty first line is refused. Dates are written in ISO 8601
/// (whole seconds) or as seconds since 1970 (when they have a fraction), and both are read.
enum PassEntry {
    /// The lines' keys.
    enum Field {
        static let userID = "user_id"
        static let expires = "expires"
        static let refreshToken = "refresh_token"
        static let refreshTokenExpires = "refresh_token_expires"
        static let idToken = "id_token"
        static let scopes = "scopes"
        static let declined = "declined_scopes"
        static let refreshed = "refreshed"
        static let saved = "saved"
        static let needsLogin = "needs_login"
        static let extras = "extras"
        static let format = "sesame_format"
    }

    /// The entry format this Sesame writes.
    static let formatVersion = 1

    /// The text of the entry for `credential`.
    static func text(of credential: StoredCredential) -> String {
        let token = credential.token
        var lines = [token.tokenString]
        func add(_ key: String, _ value: String?) {
            if let value { lines.append("\(key): \(value)") }
        }
        add(Field.refreshToken, token.refreshToken)
        add(Field.expires, token.expirationDate.map(date))
        add(Field.refreshTokenExpires, token.refreshTokenExpirationDate.map(date))
        add(
            Field.scopes,
            token.permissions.granted.isEmpty ? nil : token.permissions.granted.sorted().joined(separator: " "))
        add(
            Field.declined,
            token.permissions.declined.isEmpty ? nil : token.permissions.declined.sorted().joined(separator: " "))
        add(Field.userID, token.userID)
        add(Field.idToken, token.idToken)
        add(Field.refreshed, date(token.refreshDate))
        add(Field.saved, date(credential.savedAt))
        add(Field.needsLogin, credential.needsLogin ? "true" : nil)
        if !token.providerExtras.isEmpty {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            add(Field.extras, (try? encoder.encode(token.providerExtras)).map { String(decoding: $0, as: UTF8.self) })
        }
        add(Field.format, String(formatVersion))
        return lines.joined(separator: "\n") + "\n"
    }

    /// Reads an entry's text as the credential for `key`.
    ///
    /// - Throws: ``Problem`` saying what is wrong with the text (never quoting it).
    static func credential(from text: String, key: CredentialKey) throws(Problem) -> StoredCredential {
        // "\r\n" is one Character: split on it as on "\n" (an entry edited on Windows, in WSL).
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })[...]
        let tokenString = (lines.popFirst() ?? "").trimmingCharacters(in: .whitespaces)
        guard !tokenString.isEmpty else { throw Problem("its first line, the access token, is empty") }
        var fields: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, !name.contains(" "), fields[name] == nil else { continue }
            fields[name] = value
        }
        if let format = fields[Field.format], let version = Int(format), version > formatVersion {
            throw Problem("it was written by a newer Sesame (format \(version)); upgrade Sesame to read it")
        }
        func readDate(_ name: String) throws(Problem) -> Date? {
            guard let text = fields[name], !text.isEmpty else { return nil }
            guard let value = parseDate(text) else {
                throw Problem("its '\(name)' line is not a date (use ISO 8601, such as 2026-12-04T15:30:00Z)")
            }
            return value
        }
        func words(_ name: String) -> [String] {
            (fields[name] ?? "").split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        }
        func nonEmpty(_ name: String) -> String? { fields[name].flatMap { $0.isEmpty ? nil : $0 } }
        var extras: [String: JSONValue] = [:]
        if let text = nonEmpty(Field.extras) {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8)) else {
                throw Problem("its 'extras' line is not a JSON object")
            }
            extras = object
        }
        let refreshed = try readDate(Field.refreshed)
        let saved = try readDate(Field.saved)
        let token = AccessToken(
            tokenString: tokenString, provider: key.provider, appID: key.appID, userID: nonEmpty(Field.userID),
            permissions: PermissionSet(granted: words(Field.scopes), declined: words(Field.declined)),
            expirationDate: try readDate(Field.expires), refreshDate: refreshed ?? saved ?? Date(),
            refreshToken: nonEmpty(Field.refreshToken),
            refreshTokenExpirationDate: try readDate(Field.refreshTokenExpires),
            idToken: nonEmpty(Field.idToken), providerExtras: extras)
        let needsLogin = ["true", "yes", "1"].contains(fields[Field.needsLogin]?.lowercased() ?? "")
        return StoredCredential(key: key, token: token, savedAt: saved ?? refreshed ?? Date(), needsLogin: needsLogin)
    }

    /// What is wrong with an entry's text, in words that quote none of it.
    struct Problem: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    private static func date(_ value: Date) -> String {
        let seconds = value.timeIntervalSince1970
        guard seconds == seconds.rounded() else { return String(seconds) }
        return value.formatted(.iso8601)
    }

    private static func parseDate(_ text: String) -> Date? {
        if let seconds = Double(text) { return Date(timeIntervalSince1970: seconds) }
        if let value = try? Date(text, strategy: .iso8601) { return value }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

import Foundation
import Sesame

/// What `git` asks a credential helper to do (`git help credential`, "CUSTOM HELPERS").
package enum GitCredentialOperation: String, Sendable, Hashable, CaseIterable {
    /// Answer a user name and password for the described URL, or nothing.
    case get
    /// Git used a credential successfully and offers it for storing.
    case store
    /// Git found a credential refused and asks for it to be forgotten.
    case erase
}

/// One request of git's credential-helper protocol: `key=value` lines on standard input, ended
/// by a blank line or the end of input.
///
/// Keys git sends: `protocol`, `host` (with `:port` when not the default), `path` (only with
/// `credential.useHttpPath`), `username`, `password` (for `store` and `erase`), `url` (read
/// into the others), and multi-valued keys ending in `[]` (`capability[]`, `wwwauth[]`). Any
/// other key is kept in ``otherAttributes`` and otherwise ignored, as the protocol asks.
package struct GitCredentialRequest: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// What git asks.
    package var operation: GitCredentialOperation
    /// `https`, `http`...
    package var `protocol`: String?
    /// The host, as git wrote it (`github.com`, `ghe.example.com:8443`).
    package var host: String?
    /// The path in the repository URL, when git sends it.
    package var path: String?
    /// The user name in the URL or from an earlier helper.
    package var username: String?
    /// The password (for `store` and `erase`). Secret: never in ``description``.
    package var password: String?
    /// Every other attribute, in order (multi-valued keys appear once per value).
    package var otherAttributes: [GitCredentialAttribute]

    /// The most input a request may have; git sends a few hundred bytes.
    package static let maximumInputSize = 64 * 1024

    /// Creates a request.
    package init(
        operation: GitCredentialOperation, protocol: String? = nil, host: String? = nil, path: String? = nil,
        username: String? = nil, password: String? = nil, otherAttributes: [GitCredentialAttribute] = []
    ) {
        self.operation = operation
        self.protocol = `protocol`
        self.host = host
        self.path = path
        self.username = username
        self.password = password
        self.otherAttributes = otherAttributes
    }

    /// Reads a request: `operation` is the helper's argument (`get`, `store`, `erase`) and
    /// `input` is standard input, up to the first blank line.
    ///
    /// - Returns: `nil` for an operation the protocol does not define, which a helper must
    ///   silently ignore.
    /// - Throws: ``GitCredentialError`` for input git would not send: a line without `=`, an
    ///   empty key, a NUL, or more than ``maximumInputSize`` bytes.
    package static func parse(operation: String, input: String) throws(GitCredentialError) -> GitCredentialRequest? {
        guard let operation = GitCredentialOperation(rawValue: operation) else { return nil }
        guard input.utf8.count <= maximumInputSize else {
            throw GitCredentialError(
                "the input is larger than \(maximumInputSize / 1024) KiB; git sends a few key=value lines")
        }
        var request = GitCredentialRequest(operation: operation)
        var url: String?
        var number = 0
        // Read as bytes, as git writes them: a line ends at "\n" (a "\r" before it is dropped) and
        // its key at the first "=". Swift's Characters would join "\n" or "=" with a combining
        // mark that follows (U+0610 after "=" hid the "=" of `username=\u{610}octocat`).
        let bytes = Array(input.utf8)
        for whole in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let line = whole.last == UInt8(ascii: "\r") ? whole.dropLast() : whole
            number += 1
            if line.isEmpty { break }
            guard !line.contains(0) else { throw GitCredentialError("line \(number) contains a NUL byte") }
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
                throw GitCredentialError(
                    "line \(number) ('\(Self.shown(line))') is not key=value; git's credential protocol sends one "
                        + "key=value per line")
            }
            let key = String(decoding: line[..<equals], as: UTF8.self)
            let value = String(decoding: line[(equals + 1)...], as: UTF8.self)
            guard !key.isEmpty else { throw GitCredentialError("line \(number) has an empty key before '='") }
            switch key {
            case "protocol": request.protocol = value
            case "host": request.host = value
            case "path": request.path = value
            case "username": request.username = value
            case "password": request.password = value
            case "url": url = value
            default: request.otherAttributes.append(GitCredentialAttribute(key: key, value: value))
            }
        }
        // A url= is read into the parts that were not given on their own.
        if let url, let components = URLComponents(string: url) {
            if request.protocol == nil { request.protocol = components.scheme }
            if request.host == nil, let host = components.host, !host.isEmpty {
                request.host = components.port.map { "\(host):\($0)" } ?? host
            }
            if request.username == nil { request.username = components.user }
            if request.path == nil, !components.path.isEmpty, components.path != "/" {
                request.path = String(components.path.dropFirst())
            }
        }
        return request
    }

    /// The host without a port that is the protocol's default (`github.com:443` over https is
    /// `github.com`), in lower case; what logins are looked up by.
    package var normalizedHost: String? {
        guard var host = host?.lowercased(), !host.isEmpty else { return nil }
        let defaultPort = self.protocol?.lowercased() == "http" ? ":80" : ":443"
        if host.hasSuffix(defaultPort) { host.removeLast(defaultPort.count) }
        return host
    }

    /// Every field but the password's value.
    package var description: String {
        var parts = ["\(operation.rawValue)"]
        if let value = self.protocol { parts.append("protocol=\(value)") }
        if let host { parts.append("host=\(host)") }
        if let path { parts.append("path=\(path)") }
        if let username { parts.append("username=\(username)") }
        if password != nil { parts.append("password=\(Redaction.placeholder)") }
        return "GitCredentialRequest(\(parts.joined(separator: ", ")))"
    }

    /// Every field, the password's value replaced.
    package var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "operation": operation, "protocol": self.protocol as Any, "host": host as Any, "path": path as Any,
                "username": username as Any, "password": (password == nil ? nil : Redaction.placeholder) as Any,
                "otherAttributes": otherAttributes,
            ])
    }

    private static func shown(_ line: ArraySlice<UInt8>) -> String {
        let text = String(decoding: line, as: UTF8.self)
        return String(
            text.prefix(40).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
            + (text.count > 40 ? "…" : "")
    }
}

/// An attribute the request carried that Sesame does not use.
package struct GitCredentialAttribute: Sendable, Hashable {
    /// The key (`capability[]`, `wwwauth[]`...).
    package var key: String
    /// The value.
    package var value: String
}

/// Input that is not git's credential protocol.
package struct GitCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    package var reason: String
    init(_ reason: String) { self.reason = reason }
    /// The CLI puts `sesame git-credential: ` in front, as it does for every error of the command.
    package var description: String { "the request from git cannot be read: \(reason)." }
}

/// A stored login that can answer git: the user name and the token.
package struct GitCredentialLogin: Sendable, CustomStringConvertible, CustomReflectable {
    /// The GitHub login (the token's `userID`).
    package var username: String
    /// The token. Secret.
    package var token: String
    /// When the token expires, for git's `password_expiry_utc`.
    package var expiry: Date?

    /// Creates a login.
    package init(username: String, token: String, expiry: Date? = nil) {
        self.username = username
        self.token = token
        self.expiry = expiry
    }

    package var description: String { "GitCredentialLogin(username: \(username), token: \(Redaction.placeholder))" }

    package var customMirror: Mirror {
        Mirror(self, children: ["username": username, "token": Redaction.placeholder, "expiry": expiry as Any])
    }
}

/// The answer to a `get`: `username=…`, `password=…` and, for an expiring token,
/// `password_expiry_utc=…`, each on its own line.
package struct GitCredentialAnswer: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The user name.
    package var username: String
    /// The token. Secret: never in ``description``.
    package var password: String
    /// The token's expiry (git 2.41+ stops using it after then).
    package var passwordExpiry: Date?

    /// The text for standard output.
    package var formatted: String {
        var text = "username=\(username)\npassword=\(password)\n"
        if let passwordExpiry { text += "password_expiry_utc=\(Int(passwordExpiry.timeIntervalSince1970))\n" }
        return text
    }

    package var description: String {
        "GitCredentialAnswer(username: \(username), password: \(Redaction.placeholder))"
    }

    package var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "username": username, "password": Redaction.placeholder, "passwordExpiry": passwordExpiry as Any,
            ])
    }
}

/// The decisions of `sesame git-credential`, without any I/O: which requests get an answer.
package enum GitCredential {
    /// The answer to `request`, or `nil` when Sesame has nothing to say (git then asks the
    /// next helper, or the person).
    ///
    /// Only `get` is answered, only for `https` (or `http` to a loopback host, for the local
    /// emulator: a token never travels in clear text elsewhere), only for a host that
    /// `lookup` has a login for, and only when the URL's user name, if any, is that login's.
    /// A user name or token with a newline or NUL is refused (it would inject attributes).
    ///
    /// - Parameter lookup: the login Sesame keeps for a host (lower case, no default port) and
    ///   a wanted user name, or `nil`.
    package static func answer(
        to request: GitCredentialRequest,
        lookup: (_ host: String, _ username: String?) async throws -> GitCredentialLogin?
    ) async rethrows -> GitCredentialAnswer? {
        guard request.operation == .get, let host = request.normalizedHost else { return nil }
        switch request.protocol?.lowercased() {
        case "https": break
        case "http" where isLoopback(host): break
        default: return nil
        }
        let wanted = request.username.flatMap { $0.isEmpty ? nil : $0 }
        guard let login = try await lookup(host, wanted) else { return nil }
        if let wanted, wanted.lowercased() != login.username.lowercased() { return nil }
        // Bytes, not Characters: "\n" followed by a combining mark is one Character, and would
        // pass a Character test while still ending git's line.
        let unsafe: (UInt8) -> Bool = { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == 0 }
        guard !login.username.isEmpty, !login.token.isEmpty, !login.username.utf8.contains(where: unsafe),
            !login.token.utf8.contains(where: unsafe)
        else { return nil }
        return GitCredentialAnswer(username: login.username, password: login.token, passwordExpiry: login.expiry)
    }

    /// Whether `host` (with or without a port) is 127.0.0.1, ::1 or localhost.
    package static func isLoopback(_ host: String) -> Bool {
        var name = host
        if name.hasPrefix("["), let close = name.firstIndex(of: "]") {
            name = String(name[name.index(after: name.startIndex)..<close])
        } else if let colon = name.lastIndex(of: ":"), name.firstIndex(of: ":") == colon {
            name = String(name[..<colon])
        }
        return name == "127.0.0.1" || name == "::1" || name == "localhost"
    }
}

extension GitCredential {
    /// The stored login that answers git for `host`: a credential of `provider` whose app id is
    /// the host name (how SesameGitHub keys logins), not marked as needing a login. With a wanted
    /// `username`, only the login of that name; otherwise `preferredAccount` when it is stored
    /// for the host, else the most recently saved one.
    ///
    /// - Throws: the store's error (a locked or missing keyring), for the command to report on
    ///   standard error.
    package static func storedLogin(
        in store: any CredentialStore, provider: ProviderID, host: String, username: String?,
        preferredAccount: String? = nil
    ) async throws -> StoredCredential? {
        let candidates = try await store.list(provider: provider).filter {
            $0.key.appID.lowercased() == host.lowercased() && !$0.needsLogin
        }
        if let username {
            return candidates.first { ($0.token.userID ?? $0.key.account).lowercased() == username.lowercased() }
        }
        if let preferredAccount, let active = candidates.first(where: { $0.key.account == preferredAccount }) {
            return active
        }
        return candidates.max { $0.savedAt < $1.savedAt }
    }
}

extension GitCredentialLogin {
    /// The login of a stored credential: its GitHub login (the token's user id, else the
    /// account name) and its token.
    package init(_ stored: StoredCredential) {
        self.init(
            username: stored.token.userID ?? stored.key.account, token: stored.token.tokenString,
            expiry: stored.token.expirationDate)
    }
}

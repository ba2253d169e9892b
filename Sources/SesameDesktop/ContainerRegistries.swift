import Foundation
import Sesame

/// A container registry's address as credential helpers are asked about it: the lower-case
/// host and the port when one is given (`ghcr.io`, `127.0.0.1:5000`, `[::1]:5000`).
///
/// Read strictly, because a token is handed out by this value: a server URL with a user name
/// in it (`user@host`), a query or fragment, a backslash, spaces or control characters, a host
/// that is not a DNS name, IPv4 or bracketed IPv6 address, or a port outside 1-65535 is refused;
/// what follows the first `/` after the host is a path and never part of the host, so
/// `evil.example/ghcr.io` is `evil.example`. A scheme, when given, is `https`, or `http` to a
/// loopback registry only (`http://127.0.0.1:5000`, as docker allows plain http to local
/// registries): a token asked for `http://ghcr.io` would cross the network unencrypted.
public struct RegistryHost: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `host` or `host:port`, lower case.
    public let text: String

    /// The most a server URL may hold, in bytes.
    public static let maximumLength = 2048

    /// Why a server URL was refused.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        /// What was wrong, for the person.
        public var description: String
    }

    /// Reads a registry server URL (`ghcr.io`, `https://ghcr.io/v2/`, `127.0.0.1:5000`).
    ///
    /// - Throws: ``Refusal`` saying what was wrong.
    public init(serverURL: String) throws(Refusal) {
        guard serverURL.utf8.count <= Self.maximumLength else {
            throw Refusal(description: "the server URL is longer than \(Self.maximumLength) bytes")
        }
        var rest = Substring(serverURL)
        guard !rest.isEmpty else { throw Refusal(description: "the server URL is empty") }
        guard
            !rest.unicodeScalars.contains(where: {
                $0.value < 0x21 || $0.value == 0x7F || !$0.isASCII || $0 == "\\"
            })
        else {
            throw Refusal(
                description: "the server URL has spaces, control characters, backslashes or non-ASCII characters")
        }
        var plainHTTP = false
        if let scheme = rest.range(of: "://") {
            let name = rest[..<scheme.lowerBound].lowercased()
            guard name == "https" || name == "http" else {
                throw Refusal(description: "the server URL's scheme must be https or http")
            }
            plainHTTP = name == "http"
            rest = rest[scheme.upperBound...]
        }
        let authority = rest.prefix { $0 != "/" }
        guard !authority.contains("@") else {
            throw Refusal(description: "the server URL names a user (user@host); registries are named by host only")
        }
        guard !rest.contains("?"), !rest.contains("#") else {
            throw Refusal(description: "the server URL has a query or fragment")
        }
        var host = Substring(authority)
        var port: Int?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw Refusal(description: "the server URL's IPv6 address has no closing ']'")
            }
            let address = host[host.index(after: host.startIndex)..<close]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw Refusal(description: "the server URL's bracketed host is not an IPv6 address")
            }
            let after = host[host.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Refusal(description: "the server URL's host is malformed") }
                port = try Self.port(after.dropFirst())
            }
            host = host[...close]
        } else {
            if let colon = host.firstIndex(of: ":") {
                port = try Self.port(host[host.index(after: colon)...])
                host = host[..<colon]
            }
            try Self.checkName(host)
        }
        if plainHTTP, !EndpointSecurity.isLoopback(String(host)) {
            throw Refusal(
                description: "the server URL is plain http to \(host.lowercased()), which would send the token "
                    + "unencrypted; a token goes over https, or over http only to a loopback registry")
        }
        text = host.lowercased() + (port.map { ":\($0)" } ?? "")
    }

    private static func port(_ text: Substring) throws(Refusal) -> Int {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber),
            let port = Int(text), (1...65535).contains(port)
        else { throw Refusal(description: "the server URL's port is not a number from 1 to 65535") }
        return port
    }

    private static func checkName(_ host: Substring) throws(Refusal) {
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard !host.isEmpty, host.count <= 253,
            labels.allSatisfy({ label in
                (1...63).contains(label.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            })
        else {
            throw Refusal(
                description: "the server URL's host is not a host name or address (letters, digits, '-' and '.')")
        }
    }

    public var description: String { text }

    public static func < (lhs: RegistryHost, rhs: RegistryHost) -> Bool { lhs.text < rhs.text }
}

/// Which stored login answers for a container registry: the config file's `registries` object,
/// host to provider name, or to an object naming the provider, the account and the user name.
///
/// ```json
/// "registries": {
///   "ghcr.io": "github",
///   "registry.example.com:5000": {"provider": "work", "account": "alice", "username": "oauth2accesstoken"}
/// }
/// ```
public struct RegistryMapping: Sendable, Hashable {
    /// The registry.
    public var host: RegistryHost
    /// The provider's name (a plug-in's or one the config file gives).
    public var provider: String
    /// The account; the provider's active one when `nil`.
    public var account: String?
    /// The user name handed with the token: what the registry expects beside a token
    /// (``defaultUsername`` unless the file says otherwise).
    public var username: String

    /// The user name registries that take an OAuth token as a password accept: Google's ask for
    /// exactly this one, and GitHub's and most others take any.
    public static let defaultUsername = "oauth2accesstoken"

    /// The mappings in `configuration`, sorted by host, each checked.
    ///
    /// - Throws: ``DesktopError`` (78) naming the file, the entry and what is allowed.
    public static func all(in configuration: DesktopConfiguration) throws -> [RegistryMapping] {
        let path = configuration.configFileDescription
        func fail(_ key: String, _ problem: String) -> DesktopError {
            DesktopError(
                "\(path) has \"registries\": {\"\(key.sanitizedForTerminal)\": ...}, which \(problem); each entry is "
                    + "\"HOST[:PORT]\": \"PROVIDER\" or {\"provider\": ..., \"account\": ..., \"username\": ...}.",
                status: .config)
        }
        var mappings: [RegistryMapping] = []
        for (key, value) in try configuration.section("registries") {
            let host: RegistryHost
            do {
                host = try RegistryHost(serverURL: key)
            } catch {
                throw fail(key, "is not a registry host: \(error)")
            }
            guard host.text == key else {
                throw fail(key, "is not written as a registry host is (lower case, no scheme or path: \(host))")
            }
            var mapping = RegistryMapping(host: host, provider: "", account: nil, username: defaultUsername)
            if let provider = value.stringValue {
                mapping.provider = provider
            } else if let object = value.objectValue {
                if let unknown = object.keys.sorted().first(where: {
                    !["provider", "account", "username"].contains($0)
                }) {
                    throw fail(key, "has the unknown key \"\(unknown.sanitizedForTerminal)\"")
                }
                for name in ["provider", "account", "username"] {
                    guard let field = object[name] else { continue }
                    guard let text = field.stringValue, Self.isPlainName(text) else {
                        throw fail(
                            key, "has a \"\(name)\" that is not a short name without spaces or control characters")
                    }
                    switch name {
                    case "provider": mapping.provider = text
                    case "account": mapping.account = text
                    default: mapping.username = text
                    }
                }
            } else {
                throw fail(key, "is \(value.typeDescription)")
            }
            guard Self.isPlainName(mapping.provider) else {
                throw fail(key, "names no provider (a provider's name, as '\(Desktop.programName) providers' lists)")
            }
            mappings.append(mapping)
        }
        return mappings.sorted { $0.host < $1.host }
    }

    /// The mapping of `host` in `configuration`, if any: the host must match exactly.
    public static func mapping(
        for host: RegistryHost, in configuration: DesktopConfiguration
    ) throws -> RegistryMapping? {
        try all(in: configuration).first { $0.host == host }
    }

    private static func isPlainName(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 128
            && !text.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == " " }
    }
}

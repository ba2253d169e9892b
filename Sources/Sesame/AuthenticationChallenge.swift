import Foundation

/// One challenge of a `WWW-Authenticate` header (RFC 9110 §11.6.1): a scheme and its
/// parameters, or its token68.
///
/// A header may carry several challenges, and a response several headers;
/// ``parse(_:)-(HTTPHeaders)`` reads them all, in order:
///
/// ```swift
/// let challenges = AuthenticationChallenge.parse(response.headers)
/// // WWW-Authenticate: Basic realm="api", Bearer error="insufficient_scope", scope="read write"
/// let bearer = challenges.first { $0.isScheme("Bearer") }
/// bearer?["scope"]    // "read write"
/// ```
///
/// Parameter names and schemes are compared without regard to case; a quoted-string value is
/// unquoted (`\"` is `"`). Malformed parts are skipped up to the next comma, never trapped on.
public struct AuthenticationChallenge: Sendable, Hashable, CustomStringConvertible {
    /// The scheme, as sent (`Bearer`, `Basic`, `DPoP`).
    public var scheme: String
    /// The parameters, names in lower case; the first of a repeated name wins.
    public var parameters: [String: String]
    /// The token68 that some schemes carry instead of parameters (`Negotiate abc==`).
    public var token68: String?

    /// Creates a challenge; parameter names are lower-cased.
    public init(scheme: String, parameters: [String: String] = [:], token68: String? = nil) {
        self.scheme = scheme
        self.parameters = [:]
        for (name, value) in parameters where self.parameters[name.lowercased()] == nil {
            self.parameters[name.lowercased()] = value
        }
        self.token68 = token68
    }

    /// The parameter `name`, any case.
    public subscript(name: String) -> String? { parameters[name.lowercased()] }

    /// Whether the scheme is `name`, any case.
    public func isScheme(_ name: String) -> Bool { HTTPHeaders.sameName(scheme, name) }

    public var description: String {
        let names = parameters.keys.sorted().joined(separator: ", ")
        return names.isEmpty ? scheme : "\(scheme) (\(names))"
    }

    /// Every challenge of every `WWW-Authenticate` field in `headers`, in order.
    public static func parse(_ headers: HTTPHeaders) -> [AuthenticationChallenge] {
        headers.values(for: "WWW-Authenticate").flatMap { parse($0) }
    }

    /// Every challenge in one `WWW-Authenticate` field value, in order.
    public static func parse(_ value: String) -> [AuthenticationChallenge] {
        var reader = ChallengeReader(bytes: Array(value.utf8))
        return reader.challenges()
    }
}

/// RFC 9110 §11.6.1's grammar, over the bytes of one field value:
/// `#challenge`, `challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]`,
/// `auth-param = token BWS "=" BWS ( token / quoted-string )`.
private struct ChallengeReader {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let comma = UInt8(ascii: ",")
    static let equals = UInt8(ascii: "=")
    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")

    var atEnd: Bool { index >= bytes.count }
    var current: UInt8? { atEnd ? nil : bytes[index] }

    mutating func challenges() -> [AuthenticationChallenge] {
        var found: [AuthenticationChallenge] = []
        while true {
            skip { $0 == Self.space || $0 == Self.tab || $0 == Self.comma }
            guard !atEnd else { return found }
            let scheme = token()
            guard !scheme.isEmpty else {
                skipToComma()
                continue
            }
            var challenge = AuthenticationChallenge(scheme: scheme)
            skip { $0 == Self.space || $0 == Self.tab }
            if let token68 = token68() {
                challenge.token68 = token68
            } else {
                readParameters(into: &challenge)
            }
            found.append(challenge)
        }
    }

    /// Reads `#auth-param` while the next list element is a parameter (`name=`), stopping before
    /// the next challenge's scheme.
    mutating func readParameters(into challenge: inout AuthenticationChallenge) {
        guard var next = parameter() else { return }
        while true {
            if challenge.parameters[next.0] == nil { challenge.parameters[next.0] = next.1 }
            skip { $0 == Self.space || $0 == Self.tab }
            // Garbage after a value is skipped up to the next comma.
            if !atEnd, current != Self.comma { skipToComma() }
            guard current == Self.comma else { return }
            // After a comma comes another parameter, or the next challenge's scheme.
            let mark = index
            skip { $0 == Self.space || $0 == Self.tab || $0 == Self.comma }
            guard let following = parameter() else {
                index = mark
                return
            }
            next = following
        }
    }

    /// `token BWS "=" BWS ( token / quoted-string )`, lower-cased name; `nil` (and nothing
    /// consumed) when the input there is not one.
    mutating func parameter() -> (String, String)? {
        let start = index
        let name = token()
        skip { $0 == Self.space || $0 == Self.tab }
        guard !name.isEmpty, current == Self.equals else {
            index = start
            return nil
        }
        index += 1
        skip { $0 == Self.space || $0 == Self.tab }
        if current == Self.quote { return (name.lowercased(), quotedString()) }
        let value = token()
        guard !value.isEmpty else {
            index = start
            return nil
        }
        return (name.lowercased(), value)
    }

    /// `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`, followed by the end of
    /// the challenge (a comma or the end); `nil` (and nothing consumed) otherwise.
    mutating func token68() -> String? {
        let start = index
        while let byte = current, Self.isToken68Byte(byte) { index += 1 }
        guard index > start else { return nil }
        while current == Self.equals { index += 1 }
        let end = index
        skip { $0 == Self.space || $0 == Self.tab }
        guard atEnd || current == Self.comma else {
            index = start
            return nil
        }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    mutating func token() -> String {
        let start = index
        while let byte = current, HTTPToken.isTokenByte(byte) { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// A quoted-string from its opening quote, unquoted; an unterminated one runs to the end.
    mutating func quotedString() -> String {
        index += 1
        var value: [UInt8] = []
        while let byte = current {
            index += 1
            if byte == Self.quote { break }
            if byte == Self.backslash, let escaped = current {
                index += 1
                value.append(escaped)
            } else {
                value.append(byte)
            }
        }
        return String(decoding: value, as: UTF8.self)
    }

    mutating func skip(while matches: (UInt8) -> Bool) {
        while let byte = current, matches(byte) { index += 1 }
    }

    /// Skips to the next comma outside a quoted-string.
    mutating func skipToComma() {
        while let byte = current, byte != Self.comma {
            if byte == Self.quote { _ = quotedString() } else { index += 1 }
        }
    }

    static func isToken68Byte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}

import Foundation
import Sesame

/// A request received by an ``HTTPServer``, complete with its body.
public struct HTTPServerRequest: Sendable {
    /// The method, upper case.
    public var method: HTTPMethod
    /// The path, percent-decoded, without the query (for example `/oauth/callback`).
    public var path: String
    /// The query's name-value pairs, decoded (`+` is a space), in the order they came.
    public var query: [(String, String)]
    /// The header fields, in order; names are looked up without regard to case.
    public var headers: HTTPHeaders
    /// The body; empty when there was none.
    public var body: Data
    /// The request target exactly as it came on the request line, query included and not decoded.
    public var rawTarget: String
    /// The protocol version from the request line, for example `HTTP/1.1`.
    public var httpVersion: String

    /// Creates a request; the server makes these, tests may too.
    public init(
        method: HTTPMethod, path: String, query: [(String, String)] = [], headers: HTTPHeaders = [:],
        body: Data = Data(), rawTarget: String? = nil, httpVersion: String = "HTTP/1.1"
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
        self.rawTarget = rawTarget ?? (query.isEmpty ? path : path + "?" + FormEncoding.encode(query))
    }

    /// Creates a request from the request line's target: splits off and decodes the query and
    /// percent-decodes the path.
    public init(
        method: HTTPMethod, target: String, headers: HTTPHeaders = [:], body: Data = Data(),
        httpVersion: String = "HTTP/1.1"
    ) {
        var rest = Substring(target)
        // An absolute-form target (`http://host/path`) keeps only its path.
        // Found by bytes: Foundation's `range(of:)` cost a twentieth of a loopback request.
        if let scheme = Self.schemeSeparator(in: rest), rest[..<scheme.lowerBound].allSatisfy({ $0.isLetter }) {
            let afterAuthority = rest[scheme.upperBound...]
            rest = afterAuthority.firstIndex(where: { $0 == "/" || $0 == "?" }).map { afterAuthority[$0...] } ?? "/"
        }
        // An ASCII target (every valid one) is searched by bytes, which find what a search by
        // characters finds at a fraction of the cost; any other by characters, in which a `#` or
        // `?` followed by a combining mark is one character and not a delimiter.
        let isASCII = target.utf8.withContiguousStorageIfAvailable { !$0.contains { $0 >= 0x80 } } ?? false
        func firstIndex(of delimiter: Character, in text: Substring) -> String.Index? {
            guard isASCII, let byte = delimiter.asciiValue else { return text.firstIndex(of: delimiter) }
            return text.utf8.firstIndex(of: byte)
        }
        if let hash = firstIndex(of: "#", in: rest) { rest = rest[..<hash] }
        let rawPath: Substring
        let rawQuery: Substring
        if let mark = firstIndex(of: "?", in: rest) {
            rawPath = rest[..<mark]
            rawQuery = rest[rest.index(after: mark)...]
        } else {
            rawPath = rest
            rawQuery = ""
        }
        // An absolute-form target with no path (`http://host?x=1`) asks for `/` (RFC 9112 §3.2.2).
        let pathText = rawPath.isEmpty ? "/" : String(rawPath)
        self.init(
            method: method,
            path: FormEncoding.percentDecoded(pathText) ?? pathText,
            query: FormEncoding.decode(String(rawQuery)),
            headers: headers,
            body: body,
            rawTarget: target,
            httpVersion: httpVersion)
    }

    /// Where the first `://` in `text` is, or `nil`.
    private static func schemeSeparator(in text: Substring) -> Range<String.Index>? {
        let bytes = text.utf8
        var index = bytes.startIndex
        while let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")) {
            let afterColon = bytes.index(after: colon)
            let rest = bytes[afterColon...]
            if rest.starts(with: "//".utf8) { return colon..<bytes.index(afterColon, offsetBy: 2) }
            index = afterColon
        }
        return nil
    }

    /// The first value of the query parameter `name`, or `nil`.
    public func queryValue(_ name: String) -> String? { query.first { $0.0 == name }?.1 }

    /// Every value of the query parameter `name`, in order.
    public func queryValues(_ name: String) -> [String] { query.filter { $0.0 == name }.map(\.1) }

    /// The body's name-value pairs when it is `application/x-www-form-urlencoded`; otherwise empty.
    public var form: [(String, String)] {
        guard isFormEncoded else { return [] }
        return FormEncoding.decode(body)
    }

    /// The first value of `name` in a form-encoded body, or else in the query.
    ///
    /// OAuth endpoints accept their parameters either way, so handlers for them read with this.
    public func formValue(_ name: String) -> String? {
        form.first { $0.0 == name }?.1 ?? queryValue(name)
    }

    /// Whether the body is declared `application/x-www-form-urlencoded`.
    public var isFormEncoded: Bool {
        guard let type = headers["Content-Type"] else { return false }
        let mediaType = type.split(separator: ";", maxSplits: 1).first.map(String.init) ?? type
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/x-www-form-urlencoded"
    }

    /// The body parsed as JSON, or `nil`.
    public var json: JSONValue? { JSONValue(parsing: body) }
}

import Foundation

/// An HTTP method.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method as sent on the wire, in upper case.
    public var rawValue: String
    /// Creates a method; the name is upper-cased.
    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }

    public static let get = HTTPMethod(rawValue: "GET")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let patch = HTTPMethod(rawValue: "PATCH")
    public static let delete = HTTPMethod(rawValue: "DELETE")
    public static let head = HTTPMethod(rawValue: "HEAD")

    public var description: String { rawValue }
}

/// HTTP header fields: ordered, repeatable, looked up without regard to case.
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header field.
    public struct Field: Sendable, Hashable {
        /// The name as received or set.
        public var name: String
        /// The value.
        public var value: String
        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Every field, in order, repeats kept.
    public private(set) var fields: [Field]

    /// Creates headers from fields.
    public init(_ fields: [Field] = []) { self.fields = fields }

    /// Creates headers from name-value pairs, in order.
    public init(_ pairs: [(String, String)]) { self.fields = pairs.map { Field(name: $0.0, value: $0.1) } }

    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    /// The first value of the field `name`, any case; setting replaces every field of that name
    /// (the first keeps its place; `nil` removes them all).
    public subscript(name: String) -> String? {
        get { fields.first { Self.sameName($0.name, name) }?.value }
        set {
            // In place when the field is there (no copy of the other fields), any repeats removed.
            guard let newValue, let first = fields.firstIndex(where: { Self.sameName($0.name, name) }) else {
                remove(name)
                if let newValue { add(name: name, value: newValue) }
                return
            }
            fields[first] = Field(name: name, value: newValue)
            let after = fields.index(after: first)
            if fields[after...].contains(where: { Self.sameName($0.name, name) }) {
                fields = fields[...first] + fields[after...].filter { !Self.sameName($0.name, name) }
            }
        }
    }

    /// Every value of the field `name`, any case, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// Appends a field, keeping any others of the same name.
    public mutating func add(name: String, value: String) { fields.append(Field(name: name, value: value)) }

    /// Removes every field named `name`, any case.
    public mutating func remove(_ name: String) {
        fields.removeAll { Self.sameName($0.name, name) }
    }

    /// Whether two field names are equal without regard to case. Names are ASCII tokens (RFC 9110
    /// §5.1), so this compares bytes, ASCII letters folded; Foundation's `caseInsensitiveCompare`
    /// cost more than the rest of a request in a loopback server.
    package static func sameName(_ a: String, _ b: String) -> Bool {
        // Different lengths never match (a native string knows its length): most look-ups pass
        // over most fields here without reading a byte.
        guard a.utf8.count == b.utf8.count else { return false }
        // Compared as two buffers, not byte by byte through iterators: a response's headers are
        // looked through on every answer. `withUTF8` makes a string contiguous first if it is not
        // (native strings are, and are not copied).
        var a = a
        var b = b
        return a.withUTF8 { left in
            b.withUTF8 { right in
                for index in 0..<left.count where left[index] != right[index] {
                    let x = left[index]
                    let y = right[index]
                    let lowerX = (0x41...0x5A).contains(x) ? x | 0x20 : x
                    let lowerY = (0x41...0x5A).contains(y) ? y | 0x20 : y
                    if lowerX != lowerY { return false }
                }
                return true
            }
        }
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// The number of fields.
    public var count: Int { fields.count }

    /// Names and values, with the values of `Authorization` and cookies redacted.
    public var description: String {
        fields.map { field in
            let sensitive = ["authorization", "cookie", "set-cookie", "proxy-authorization"]
            let value = sensitive.contains(field.name.lowercased()) ? Redaction.placeholder : field.value
            return "\(field.name): \(value)"
        }.joined(separator: "\n")
    }
}

/// A request for an ``HTTPTransport``.
public struct HTTPRequest: Sendable, Hashable {
    /// The method.
    public var method: HTTPMethod
    /// The absolute URL, query included.
    public var url: URL
    /// The header fields.
    public var headers: HTTPHeaders
    /// The body, if any.
    public var body: Data?
    /// The longest the whole exchange may take; `nil` leaves it to the transport's default.
    public var timeout: Duration?

    /// Creates a request.
    public init(
        method: HTTPMethod = .get, url: URL, headers: HTTPHeaders = [:], body: Data? = nil,
        timeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response from an ``HTTPTransport``.
public struct HTTPResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The header fields, repeats kept.
    public var headers: HTTPHeaders
    /// The body, possibly empty.
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The body parsed as JSON, or `nil`.
    public var json: JSONValue? { JSONValue(parsing: body) }
}

/// Sends HTTP requests. Sesame's providers talk to the network only through this protocol.
///
/// Implementations must be safe to call from many tasks at once, must not block the
/// cooperative thread pool, and should throw `CancellationError` promptly when the calling task
/// is cancelled. Failures below HTTP (DNS, connect, TLS, timeouts) are thrown as
/// ``TransportError``; any HTTP status, including 4xx and 5xx, is a response, not an error.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response.
    ///
    /// - Throws: ``TransportError`` when no response arrived (DNS, connect, TLS, timeout, an
    ///   oversized body); `CancellationError` when the task is cancelled. Any status is a response,
    ///   not an error.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// A failure below HTTP: the request got no response.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What kind of failure it was.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The host name did not resolve.
        public static let dnsFailure = Kind(rawValue: "dnsFailure")
        /// The connection was refused or could not be made.
        public static let connectionFailed = Kind(rawValue: "connectionFailed")
        /// The connection was reset or closed before a full response.
        public static let connectionLost = Kind(rawValue: "connectionLost")
        /// The connect or total timeout ran out.
        public static let timedOut = Kind(rawValue: "timedOut")
        /// TLS could not be established (the handshake failed, no protocol or cipher in common,
        /// the local CA bundle is missing). Not transient: waiting does not fix it.
        public static let tlsFailure = Kind(rawValue: "tlsFailure")
        /// The server's certificate was refused: not signed by a trusted CA, expired, for another
        /// host name, revoked, or not the pinned key. Not transient: waiting does not fix a
        /// certificate, so it is never retried.
        public static let certificateRejected = Kind(rawValue: "certificateRejected")
        /// The response body was larger than the configured limit.
        public static let bodyTooLarge = Kind(rawValue: "bodyTooLarge")
        /// The request itself could not be sent (bad URL, unsupported scheme, ...).
        public static let invalidRequest = Kind(rawValue: "invalidRequest")
        /// Any other failure.
        public static let other = Kind(rawValue: "other")

        public var description: String { rawValue }
    }

    /// The kind of failure.
    public var kind: Kind
    /// What went wrong, in words (for libcurl, its error buffer). Contains no secret.
    public var message: String
    /// The host the request was for, when known.
    public var host: String?

    /// Creates an error.
    public init(kind: Kind, message: String, host: String? = nil) {
        self.kind = kind
        self.message = message
        self.host = host
    }

    /// Whether trying again may succeed (a timeout, a lost or refused connection).
    public var isTransient: Bool {
        [.timedOut, .connectionLost, .connectionFailed, .dnsFailure].contains(kind)
    }

    public var description: String {
        let what: String
        switch kind {
        case .dnsFailure: what = "its name could not be looked up"
        case .connectionFailed: what = "the connection could not be made"
        case .connectionLost: what = "the connection was lost"
        case .timedOut: what = "it did not answer in time"
        case .tlsFailure: what = "a secure (TLS) connection could not be set up"
        case .certificateRejected: what = "its certificate was refused"
        case .bodyTooLarge: what = "its answer was too large"
        case .invalidRequest: what = "the request could not be sent"
        default: what = "the network failed"
        }
        let target = host.map { "Could not talk to \($0): " } ?? "A network request failed: "
        return "\(target)\(what) (\(message))"
    }

    /// The same sentence as ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }
}

extension HTTPHeaders {
    /// The wait a `Retry-After` header asks for, as delay-seconds or an HTTP date counted from
    /// `now`, when it is at least `shortest` seconds and under 10,000,000 (about 115 days);
    /// `nil` when there is no such header or it asks for something else. A provider's
    /// ``ErrorTaxonomy`` sets ``AuthError/retryAfter`` from it on throttling and retry errors.
    public func retryAfter(now: Date, shortest: Int = 1) -> Duration? {
        guard let text = self["Retry-After"]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else {
            return nil
        }
        let seconds: Int
        if let delay = Int(text) {
            seconds = delay
        } else {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            guard let date = formatter.date(from: text) else { return nil }
            seconds = Int(date.timeIntervalSince(now).rounded(.up))
        }
        return (shortest..<10_000_000).contains(seconds) ? .seconds(seconds) : nil
    }
}

/// RFC 9110 §5.6.2 tokens: methods and header field names.
package enum HTTPToken {
    /// Whether `byte` may be in a token: a letter, a digit or one of ``!#$%&'*+-.^_`|~``. A switch,
    /// not a set: it runs for every byte of every method and header name.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

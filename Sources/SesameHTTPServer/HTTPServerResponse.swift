import Foundation
import Sesame

/// What an ``HTTPServer`` handler answers: a status, header fields and a body.
///
/// `Content-Length` is set by the server; a `Content-Length` or `Transfer-Encoding` field set
/// here is ignored. `Connection: close` is honoured.
public struct HTTPServerResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The header fields.
    public var headers: HTTPHeaders
    /// The body.
    public var body: Data
    /// Whether the server closes the connection instead of answering.
    public internal(set) var dropsConnection: Bool = false

    /// Creates a response.
    public init(status: Int = 200, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Int = 200) -> Self {
        Self(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// A `text/html; charset=utf-8` response.
    public static func html(_ html: String, status: Int = 200) -> Self {
        Self(status: status, headers: ["Content-Type": "text/html; charset=utf-8"], body: Data(html.utf8))
    }

    /// An `application/json` response with `data` as its body, as is.
    public static func json(_ data: Data, status: Int = 200) -> Self {
        Self(status: status, headers: ["Content-Type": "application/json; charset=utf-8"], body: data)
    }

    /// An `application/json` response of `value`.
    public static func json(_ value: JSONValue, status: Int = 200) -> Self {
        json(Data(value.jsonText.utf8), status: status)
    }

    /// An `application/json` response of any `Encodable` value, encoded with sorted keys.
    ///
    /// A value that cannot be encoded gives a 500 that says so.
    public static func json<Value: Encodable>(_ value: Value, status: Int = 200) -> Self {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return json(try encoder.encode(value), status: status)
        } catch {
            return text("The response could not be encoded as JSON: \(error)", status: 500)
        }
    }

    /// A redirect to `url` (`302 Found` unless told otherwise), with a short body for clients
    /// that do not follow it.
    public static func redirect(to url: URL, status: Int = 302) -> Self {
        var response = text("Redirecting to \(url.absoluteString)", status: status)
        response.headers["Location"] = url.absoluteString
        return response
    }

    /// Closes the connection without sending any answer, as a failing server would.
    public static let dropConnection: Self = {
        var response = Self(status: 500)
        response.dropsConnection = true
        return response
    }()
}

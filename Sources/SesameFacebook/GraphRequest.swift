import Foundation
import Sesame

/// One Graph API call: a method, a path, parameters, and optionally a version and the
/// permissions the call needs (re-requested after a permissions error).
public struct GraphRequest: Sendable, Hashable {
    /// `GET`, `POST` or `DELETE`.
    public var method: HTTPMethod
    /// The path, such as `me` or `me/feed` (a leading `/` is ignored).
    public var path: String
    /// The parameters, in order: the query of a `GET` or `DELETE`, the form body of a `POST`.
    public var parameters: [Parameter]
    /// The Graph API version for this call; the client's when `nil`.
    public var version: String?
    /// The permissions the call needs, for recovery after a permissions error.
    public var requiredPermissions: [Permission]

    /// A name and a value.
    public struct Parameter: Sendable, Hashable {
        /// The name.
        public var name: String
        /// The value.
        public var value: String
        /// Creates a parameter.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Creates a request. Dictionary parameters are sent sorted by name, so requests are
    /// reproducible.
    public init(
        _ method: HTTPMethod = .get, _ path: String, parameters: [String: String] = [:], version: String? = nil,
        requiredPermissions: [Permission] = []
    ) {
        self.init(
            method, path, orderedParameters: parameters.sorted { $0.key < $1.key }.map { Parameter($0.key, $0.value) },
            version: version, requiredPermissions: requiredPermissions)
    }

    /// Creates a request with parameters in a given order.
    public init(
        _ method: HTTPMethod, _ path: String, orderedParameters: [Parameter], version: String? = nil,
        requiredPermissions: [Permission] = []
    ) {
        self.method = method
        self.path = path
        self.parameters = orderedParameters
        self.version = version
        self.requiredPermissions = requiredPermissions
    }

    var pairs: [(String, String)] { parameters.map { ($0.name, $0.value) } }
}

/// A successful Graph API answer.
public struct GraphResponse: Sendable, Hashable {
    /// The HTTP status (2xx).
    public var status: Int
    /// The headers (for a batch item, the item's own, when Facebook sent them).
    public var headers: HTTPHeaders
    /// The body as received.
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as JSON; a bare `true` (old `DELETE` answers) is `{"success": true}`, as
    /// Graph 2.1 and later send it; an empty body is `null`.
    public var json: JSONValue {
        guard let value = JSONValue(parsing: body) else { return .null }
        if case .bool(let flag) = value { return .object(["success": .bool(flag)]) }
        return value
    }

    /// The body decoded as `T`.
    ///
    /// - Throws: `AuthError` (`ErrorCategory.providerOther`) saying what did not fit.
    public func decode<T: Decodable>(_ type: T.Type = T.self, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        do {
            return try decoder.decode(T.self, from: body)
        } catch {
            throw AuthError(
                category: .providerOther,
                message: "The Graph API answer could not be read as \(T.self): \(error). Check the fields you asked "
                    + "for against the type.",
                httpStatus: status, provider: .facebook, underlyingError: SendableErrorBox(error))
        }
    }

    /// The rate-limit usage Facebook reported with the answer.
    public var usage: GraphUsage? { GraphUsage(headers: headers) }
}

/// One page of a Graph list: `{"data": [...], "paging": {"cursors": {...}, "next": "..."}}`.
public struct GraphPage: Sendable, Hashable {
    /// The items.
    public var data: [JSONValue]
    /// The cursor before the first item, when given.
    public var before: String?
    /// The cursor after the last item, when given.
    public var after: String?
    /// The next page's URL; the list ends when it is absent (not when a page is short or empty).
    public var next: URL?
    /// The whole answer.
    public var json: JSONValue

    /// Reads a page.
    public init(json: JSONValue) {
        self.json = json
        data = json["data"]?.arrayValue ?? []
        before = json["paging"]?["cursors"]?["before"]?.stringValue
        after = json["paging"]?["cursors"]?["after"]?.stringValue
        next = json["paging"]?["next"]?.stringValue.flatMap(URL.init(string:))
    }
}

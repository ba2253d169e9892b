import Foundation
import Sesame
import SesameEmulator

/// A request as the emulator's engine sees it, whichever way it arrived (the HTTP server, the
/// in-process transport, or a batch item).
package struct EmulatorRequest: Sendable {
    package var method: HTTPMethod
    /// The path, percent-decoded, without the query.
    package var path: String
    package var query: [(String, String)]
    package var headers: HTTPHeaders
    package var body: Data
    /// The body parsed as JSON when it looks like JSON, done by ``parsed(maxPathBytes:)`` before the engine's
    /// lock is taken; `nil` otherwise.
    private(set) var parsedBody: JSONValue?
    private var bodyWasParsed = false
    /// The parameters, or why they cannot be read, worked out by ``parsed(maxPathBytes:)``.
    private var parsedParameters: Result<Parameters, GraphError>?
    /// The body as a form, decoded by ``parsed(maxPathBytes:)`` (`nil` when it is not UTF-8).
    private var parsedForm: [(String, String)]??
    /// The `batch` parameter's JSON, parsed by ``parsed(maxPathBytes:)``.
    private var parsedBatch: (text: String, value: JSONValue?)?
    /// The path's segments, split by ``parsed(maxPathBytes:)``.
    private var parsedSegments: [String]?
    /// The path's segments without a leading Graph version, and that version, split by
    /// ``parsed(maxPathBytes:)``.
    private var parsedGraphPath: (segments: [String], versionPrefix: String)?
    /// The access token sent, found by ``parsed(maxPathBytes:)``; `.some(nil)` when none was.
    private var parsedAccessToken: String??

    package init(
        method: HTTPMethod, path: String, query: [(String, String)] = [], headers: HTTPHeaders = [:],
        body: Data = Data()
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// Reads a request from a URL, as the in-process transport and batch items have it.
    package init(method: HTTPMethod, url: URL, headers: HTTPHeaders = [:], body: Data = Data()) {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = components?.path ?? "/"
        self.init(
            method: method, path: path.isEmpty ? "/" : path,
            query: FormEncoding.decode(components?.percentEncodedQuery ?? ""), headers: headers, body: body)
    }

    /// The request with its body parsed when it starts like a JSON array or object (the first
    /// step of ``parsed(maxPathBytes:)``).
    private func parsingBody() -> EmulatorRequest {
        var copy = self
        guard !bodyWasParsed else { return copy }
        copy.bodyWasParsed = true
        guard !body.isEmpty else { return copy }
        let start = body.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
        if start == UInt8(ascii: "{") || start == UInt8(ascii: "[") { copy.parsedBody = JSONValue(parsing: body) }
        return copy
    }

    /// The request with all that the engine reads from it worked out: the path's segments (when
    /// the path is at most `maxPathBytes` long), the body as JSON (when it starts like a JSON
    /// array or object), as a form, the parameters, a `batch` parameter's operations and the access
    /// token. The engine calls this before it takes its lock, so that no parsing holds up other
    /// clients.
    func parsed(maxPathBytes: Int) -> EmulatorRequest {
        var copy = parsingBody()
        if path.utf8.count <= maxPathBytes {
            let segments = copy.pathSegments()
            copy.parsedSegments = segments
            copy.parsedGraphPath = FacebookState.splitVersion(segments)
        }
        if copy.contentType != "application/json" { copy.parsedForm = .some(copy.formPairs()) }
        do throws(GraphError) {
            let parameters = try Parameters.of(copy)
            copy.parsedParameters = .success(parameters)
            if let batch = parameters["batch"] { copy.parsedBatch = (batch, JSONValue(parsing: Data(batch.utf8))) }
            copy.parsedAccessToken = .some(FacebookState.accessToken(in: copy, parameters: parameters))
        } catch {
            copy.parsedParameters = .failure(error)
        }
        return copy
    }

    /// The path's non-empty segments: as ``parsed(maxPathBytes:)`` split them, or split now.
    func pathSegments() -> [String] {
        if let parsedSegments { return parsedSegments }
        return Self.segments(of: path)
    }

    /// The path's segments without a leading Graph version, and that version as `/vN.N` (or ""):
    /// as ``parsed(maxPathBytes:)`` split them, or split now.
    func graphPath() -> (segments: [String], versionPrefix: String) {
        if let parsedGraphPath { return parsedGraphPath }
        return FacebookState.splitVersion(pathSegments())
    }

    /// The non-empty segments of `path`, split at each `/`. An ASCII path (all but a few) is split
    /// by its bytes, which gives the same segments as splitting its characters at a fraction of
    /// the cost; any other is split by characters, as a `/` followed by a combining mark is one
    /// character and does not split.
    static func segments(of path: String) -> [String] {
        let split = path.utf8.withContiguousStorageIfAvailable { bytes -> [String]? in
            guard !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
            var segments: [String] = []
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                if index > start {
                    segments.append(
                        String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                }
                start = index + 1
            }
            return segments
        }
        if let split = split ?? nil { return split }
        return path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// The access token sent (the `access_token` parameter, else an `Authorization` header), given
    /// the request's `parameters`: as ``parsed(maxPathBytes:)`` found it, or found now.
    func accessToken(parameters: Parameters) -> String? {
        if let parsedAccessToken { return parsedAccessToken }
        return FacebookState.accessToken(in: self, parameters: parameters)
    }

    /// The parameters: those worked out by ``parsed(maxPathBytes:)``, or read now (a batch item's).
    func parameters() throws(GraphError) -> Parameters {
        if let parsedParameters { return try parsedParameters.get() }
        return try Parameters.of(self)
    }

    /// The body decoded as a form (`nil` when it is not UTF-8): as ``parsed(maxPathBytes:)`` decoded it, or now.
    func formPairs() -> [(String, String)]? {
        if let parsedForm { return parsedForm }
        if body.isEmpty { return [] }
        return String(data: body, encoding: .utf8).map(FormEncoding.decode)
    }

    /// `text`, the value of the `batch` parameter, parsed as JSON: as ``parsed(maxPathBytes:)`` parsed it, or now.
    func batchJSON(_ text: String) -> JSONValue? {
        if let parsedBatch, parsedBatch.text == text { return parsedBatch.value }
        return JSONValue(parsing: Data(text.utf8))
    }

    /// The body as JSON: the value parsed before the lock, or parsed now (a request that did not
    /// come through ``EmulatorEngine/handle(_:)``, such as a batch item).
    var jsonBody: JSONValue? { bodyWasParsed ? parsedBody : JSONValue(parsing: body) }

    /// The media type of the body, lower case, without parameters.
    var contentType: String {
        // Most requests (every GET) have none.
        guard let raw = headers["Content-Type"] else { return "" }
        let type = raw.split(separator: ";", maxSplits: 1).first.map(String.init) ?? raw
        return type.trimmedASCII.lowercased()
    }
}

/// What the engine answers: a response, or closing the connection without one, after an optional
/// delay (the `slow` scenario).
package struct EmulatorOutcome: Sendable {
    /// The response; `nil` closes the connection without answering.
    package var response: HTTPResponse?
    /// How long to wait before answering.
    package var delay: Duration = .zero

    package init(response: HTTPResponse?, delay: Duration = .zero) {
        self.response = response
        self.delay = delay
    }

    package static func respond(_ response: HTTPResponse) -> EmulatorOutcome { EmulatorOutcome(response: response) }
}

/// Request parameters: the query, then a form or JSON body, in order, repeats kept.
package struct Parameters: Sendable {
    package var pairs: [(String, String)]

    package init(_ pairs: [(String, String)] = []) { self.pairs = pairs }

    /// The first value of `name`.
    package subscript(name: String) -> String? { pairs.first { $0.0 == name }?.1 }

    /// Every value of `name`, in order.
    package func all(_ name: String) -> [String] { pairs.filter { $0.0 == name }.map(\.1) }

    /// The first value of `name`, trimmed, or `nil` when missing or empty.
    func nonEmpty(_ name: String) -> String? {
        guard let value = self[name]?.trimmedASCII, !value.isEmpty else {
            return nil
        }
        return value
    }

    /// A Facebook-style boolean (`true`, `1`), or `defaultValue` when absent.
    func bool(_ name: String, default defaultValue: Bool) -> Bool {
        self[name].map(Self.isTrue) ?? defaultValue
    }

    /// Whether `value` is a Facebook-style true: `true`, `1`, `yes` or `on`, in any case.
    static func isTrue(_ value: String) -> Bool { ["true", "1", "yes", "on"].contains(value.lowercased()) }

    /// The parameters of `request`: its query, then its body when the body is a form or a JSON object.
    static func of(_ request: EmulatorRequest) throws(GraphError) -> Parameters {
        var pairs = request.query
        if !request.body.isEmpty {
            switch request.contentType {
            case "application/json":
                guard case .object(let members)? = request.jsonBody else {
                    throw GraphError.invalidParameter("The request body is not a JSON object.")
                }
                for (name, value) in members.sorted(by: { $0.key < $1.key }) {
                    pairs.append((name, value.stringValue ?? value.jsonText))
                }
            case "multipart/form-data":
                throw GraphError.invalidParameter("multipart/form-data bodies are not supported by the emulator.")
            default:
                // Facebook reads a body without a content type as a form, as curl sends it.
                guard let form = request.formPairs() else {
                    throw GraphError.invalidParameter("The request body is not UTF-8 text.")
                }
                pairs.append(contentsOf: form)
            }
        }
        return Parameters(pairs)
    }
}

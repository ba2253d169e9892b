import Foundation
import Sesame

/// An `HTTPTransport` that answers from a script and records every request it was sent.
///
/// ```swift
/// let transport = RecordingTransport(responses: [
///     .success(HTTPResponse(status: 500)),
///     .success(HTTPResponse(status: 200, body: Data(#"{"id":"1"}"#.utf8))),
/// ])
/// ```
public final class RecordingTransport: HTTPTransport {
    private let handler: @Sendable (HTTPRequest, Int) async throws -> HTTPResponse
    private let recorded = Locked<[HTTPRequest]>([])

    /// Answers each request with `handler(request, index)`, where `index` counts from 0.
    public init(_ handler: @escaping @Sendable (HTTPRequest, Int) async throws -> HTTPResponse) {
        self.handler = handler
    }

    /// Answers the requests in order from `responses`; past the end, a test failure is signalled
    /// by a `TransportError` that says the script ran out.
    public convenience init(responses: [Result<HTTPResponse, TransportError>]) {
        self.init { request, index in
            guard index < responses.count else {
                throw TransportError(
                    kind: .other,
                    message: "RecordingTransport's script has \(responses.count) responses; request \(index + 1) "
                        + "(\(request.method) \(request.url)) has none")
            }
            return try responses[index].get()
        }
    }

    /// Answers every request with `response`.
    public convenience init(always response: HTTPResponse) {
        self.init { _, _ in response }
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let index = recorded.withLock { list in
            list.append(request)
            return list.count - 1
        }
        try Task.checkCancellation()
        return try await handler(request, index)
    }

    /// Every request sent so far, in order.
    public var requests: [HTTPRequest] { recorded.withLock { $0 } }
}

import Foundation
import Sesame

/// An `HTTPTransport` over plain loopback sockets, one connection per request: real HTTP for
/// the login flows' tests, without depending on another backend.
package struct LoopbackTransport: HTTPTransport {
    /// Creates the transport.
    package init() {}

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let host = request.url.host, let port = request.url.port else {
            throw TransportError(kind: .invalidRequest, message: "only http://<ip>:<port> URLs are supported here")
        }
        let connection: RawHTTPConnection
        do {
            connection = try await RawHTTPConnection.connect(host: host, port: port)
        } catch {
            throw TransportError(kind: .connectionFailed, message: "\(error)", host: host)
        }
        var target = request.url.path.isEmpty ? "/" : request.url.path
        if let query = request.url.query { target += "?" + query }
        var headers = request.headers.map { ($0.name, $0.value) }
        headers.append(("Connection", "close"))
        let response = try await connection.request(
            request.method.rawValue, target, headers: headers, body: request.body ?? Data())
        return HTTPResponse(status: response.status, headers: HTTPHeaders(response.headers), body: response.body)
    }
}

/// A `BrowserOpener` double that behaves like a browser: it loads the URL over HTTP and
/// follows redirects, in the background (a real browser does not make `open` wait), and
/// keeps every page it ends on.
package final class FollowingBrowser: BrowserOpener {
    /// A page it loaded: the library's own `HTTPResponse`, with the URL it came from.
    package struct Visit: Sendable {
        package var url: URL
        package var response: HTTPResponse
        package var status: Int { response.status }
        /// The page's body as text.
        package var body: String { String(decoding: response.body, as: UTF8.self) }

        /// A visit to `url` that got `response`.
        package init(url: URL, response: HTTPResponse) { (self.url, self.response) = (url, response) }
    }

    private let state = Observed<(visits: [Task<[Visit], any Error>], opened: [URL])>(([], []))
    package let transport = LoopbackTransport()

    /// Creates a browser that has opened nothing yet.
    package init() {}

    package func open(_ url: URL) async throws {
        let transport = transport
        let task = Task {
            var visits: [Visit] = []
            var next = url
            for _ in 0..<10 {
                let response = try await transport.send(HTTPRequest(url: next))
                visits.append(Visit(url: next, response: response))
                guard (300..<400).contains(response.status), let location = response.headers["Location"],
                    let target = URL(string: location, relativeTo: next)?.absoluteURL
                else { break }
                next = target
            }
            return visits
        }
        state.change {
            $0.visits.append(task)
            $0.opened.append(url)
        }
    }

    /// The URLs it was asked to open.
    package var opened: [URL] { state.value.opened }

    /// Waits until the browser has been asked to open something; false when `limit` passed first.
    package func waitUntilOpened(limit: Duration = .seconds(120)) async -> Bool {
        await state.wait(limit: limit) { !$0.opened.isEmpty }
    }

    /// Every page of the last open, in order, once the browser has finished loading.
    package func lastVisits() async throws -> [Visit] {
        guard let task = state.value.visits.last else { return [] }
        return try await task.value
    }
}

/// An error taxonomy with only the defaults: enough for flows that must classify.
package struct PlainTaxonomy: ErrorTaxonomy {
    package var provider: ProviderID

    /// Creates the taxonomy for `provider`.
    package init(provider: ProviderID = "example") { self.provider = provider }

    package func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        if let error = OAuthErrorResponse(json: JSONValue(parsing: body)) {
            return AuthError(
                category: status >= 500 ? .server : .badRequest, message: "HTTP \(status): \(error.summary)",
                httpStatus: status, provider: provider)
        }
        return AuthError(
            category: status >= 500 ? .server : .providerOther, message: "HTTP \(status) with an unreadable body",
            httpStatus: status, provider: provider)
    }
}

extension Result {
    /// The error, when the result is a failure.
    package var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

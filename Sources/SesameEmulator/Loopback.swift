import Foundation
import Sesame
import SesameHTTPServer

/// An emulator's engine, as the shared listener and an in-process transport call it.
package protocol LoopbackEngine: Sendable {
    /// Answers `request` under the engine's lock; its JSON is encoded after the lock is released.
    /// Slow work the answer needs (making a signing key) is done before the lock is taken, on a
    /// thread of its own.
    func reply(to request: LoopbackRequest) async -> Reply
}

extension LoopbackEngine {
    /// Answers one request: read before the lock is taken and encoded after it is released, so
    /// that a large body or answer holds up only its own client.
    package func handle(
        method: HTTPMethod, path: String, query: [(String, String)], headers: HTTPHeaders, body: Data
    ) async
        -> HTTPResponse
    {
        await reply(to: LoopbackRequest(method: method, path: path, query: query, headers: headers, body: body))
            .response
    }
}

/// A request to an emulator's engine, read before the engine's lock is taken (the form
/// body decoded, a JSON body parsed), so that parsing a large body holds up only its own client.
package struct LoopbackRequest: Sendable {
    /// The method, with HEAD read as GET (the server sends the headers without the body).
    package var method: HTTPMethod
    package var path: String
    package var query: [(String, String)]
    /// The `application/x-www-form-urlencoded` body's parameters.
    package var form: [(String, String)]
    /// The query's parameters, then the form's.
    package var parameters: [(String, String)]
    package var headers: HTTPHeaders
    package var body: Data
    /// The body parsed as JSON when it starts like a JSON object or array.
    package var json: JSONValue?

    package init(method: HTTPMethod, path: String, query: [(String, String)], headers: HTTPHeaders, body: Data) {
        let isForm = (headers["Content-Type"] ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded")
        self.method = method == .head ? .get : method
        self.path = path
        self.query = query
        form = isForm ? FormEncoding.decode(body) : []
        parameters = query + form
        self.headers = headers
        self.body = body
        let start = body.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
        json = start == UInt8(ascii: "{") || start == UInt8(ascii: "[") ? JSONValue(parsing: body) : nil
    }

    /// The first value of `name`, or `nil` when missing or empty.
    package subscript(name: String) -> String? {
        parameters.first { $0.0 == name }.map(\.1).flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// A scenario of an emulator and how many answers it has left (`nil`: until cleared).
package struct CountedScenario<Setting: Sendable>: Sendable {
    package var setting: Setting
    package var remaining: Int?

    package init(setting: Setting, remaining: Int?) {
        self.setting = setting
        self.remaining = remaining
    }
}

extension Array {
    /// Takes one use of the first scenario whose setting `matches`, removing it when it has no
    /// uses left; its setting, or `nil` when none matches.
    package mutating func consumeFirst<Setting>(where matches: (Setting) -> Bool) -> Setting?
    where Element == CountedScenario<Setting> {
        guard let index = firstIndex(where: { matches($0.setting) }) else { return nil }
        let setting = self[index].setting
        if let remaining = self[index].remaining {
            if remaining <= 1 {
                remove(at: index)
            } else {
                self[index].remaining = remaining - 1
            }
        }
        return setting
    }
}

extension Reply {
    /// JSON, not to be cached, as the OAuth endpoints answer.
    package static func json(_ value: JSONValue, status: Int = 200) -> Reply {
        Reply(
            status: status, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: .json(value))
    }

    /// An OAuth error (RFC 6749 §5.2).
    package static func oauthError(_ error: String, _ description: String, status: Int = 400) -> Reply {
        json(.object(["error": .string(error), "error_description": .string(description)]), status: status)
    }

    /// An HTML page, written when the answer is encoded, after the engine's lock is released.
    /// The page may not capture the engine's state: what it shows is copied out first.
    package static func html(_ text: @escaping @autoclosure @Sendable () -> String, status: Int = 200) -> Reply {
        Reply(status: status, headers: ["Content-Type": "text/html; charset=utf-8"], body: .page(text))
    }

    /// A 302 to `location`, not to be cached.
    package static func redirect(_ location: String) -> Reply {
        Reply(status: 302, headers: ["Location": location, "Cache-Control": "no-store"], body: .bytes(Data()))
    }

    /// Headers and a status, without a body.
    package static func empty(status: Int, headers: HTTPHeaders = [:]) -> Reply {
        Reply(status: status, headers: headers, body: .bytes(Data()))
    }
}

/// The HTTP listener of an emulator: one server at a time, on 127.0.0.1.
package final class LoopbackListener: Sendable {
    private let name: String
    private let running = Locked<HTTPServer?>(nil)

    /// A listener for the emulator called `name` in its errors.
    package init(name: String) { self.name = name }

    /// Starts listening on `port` (0 picks a free one) and hands each request to `engine`;
    /// returns where it listens, `http://127.0.0.1:<port>`, without a trailing slash.
    package func start(port: Int, engine: some LoopbackEngine) throws -> String {
        let server = HTTPServer(
            configuration: HTTPServer.Configuration(host: "127.0.0.1", port: port, stopGracePeriod: .seconds(2))
        ) { request in
            let response = await engine.handle(
                method: request.method, path: request.path, query: request.query, headers: request.headers,
                body: request.body)
            return HTTPServerResponse(status: response.status, headers: response.headers, body: response.body)
        }
        try running.withLock { state in
            guard state == nil else { throw EmulatorError(message: "The \(name) emulator is already running.") }
            try server.start()
            state = server
        }
        return server.baseURL.absoluteString.trimmingSuffix("/")
    }

    /// Stops listening, answering the requests in flight first.
    package func stop() async {
        let server = running.withLock { state -> HTTPServer? in
            defer { state = nil }
            return state
        }
        await server?.stop()
    }
}

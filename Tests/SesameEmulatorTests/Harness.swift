import Foundation
import Sesame
import SesameCurl
import SesameEmulator
import SesameFacebookEmulator
import SesameTestSupport
import Testing

/// An answer from the emulator, with helpers to read Facebook's shapes.
struct Reply: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: Data

    var json: JSONValue? { JSONValue(parsing: body) }
    var text: String { String(decoding: body, as: UTF8.self) }
    /// The `error` object of a Graph error envelope.
    var error: JSONValue? { json?["error"] }
    var code: Int? { error?["code"]?.lenientInt }
    var subcode: Int? { error?["error_subcode"]?.lenientInt }
    /// The `Location` of a redirect.
    var location: URL? { headers["Location"].flatMap(URL.init(string:)) }
}

/// A started emulator and a client for it, over real HTTP on 127.0.0.1.
struct Harness: Sendable {
    let emulator: Emulator
    let base: URL
    let transport: any HTTPTransport
    var app: EmulatedApp { emulator.configuration.defaultApp }
    var userID: String { emulator.configuration.users.first!.id }

    static func start(_ configure: (inout EmulatorConfiguration) -> Void = { _ in }) async throws -> Harness {
        var configuration = EmulatorConfiguration()
        configure(&configuration)
        let emulator = try Emulator(configuration: configuration)
        let endpoints = try await emulator.start()
        return Harness(emulator: emulator, base: endpoints.baseURL, transport: loopbackTransport())
    }

    func stop() async { await emulator.stop() }

    func url(_ path: String, _ query: [(String, String)] = []) -> URL {
        let text = base.absoluteString + path
        return query.isEmpty ? URL(string: text)! : OAuth.appendingQuery(query, to: URL(string: text)!)
    }

    func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], form: [(String, String)]? = nil,
        json: JSONValue? = nil, headers: HTTPHeaders = [:]
    ) async throws -> Reply {
        var request = HTTPRequest(method: method, url: url(path, query), headers: headers)
        if let form {
            request.headers["Content-Type"] = "application/x-www-form-urlencoded"
            request.body = Data(FormEncoding.encode(form).utf8)
        } else if let json {
            request.headers["Content-Type"] = "application/json"
            request.body = Data(json.jsonText.utf8)
        }
        let response = try await transport.send(request)
        return Reply(status: response.status, headers: response.headers, body: response.body)
    }

    func get(_ path: String, token: String? = nil, _ query: [(String, String)] = []) async throws -> Reply {
        try await send(.get, path, query: query + (token.map { [("access_token", $0)] } ?? []))
    }

    func post(_ path: String, token: String? = nil, _ form: [(String, String)] = []) async throws -> Reply {
        try await send(.post, path, form: form + (token.map { [("access_token", $0)] } ?? []))
    }

    func post(_ path: String, _ token: String?, _ form: [(String, String)]) async throws -> Reply {
        try await post(path, token: token, form)
    }

    func delete(_ path: String, token: String? = nil, _ query: [(String, String)] = []) async throws -> Reply {
        try await send(.delete, path, query: query + (token.map { [("access_token", $0)] } ?? []))
    }

    func admin(_ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil) async throws -> Reply {
        if body == nil, method != .get {
            return try await send(method, "/__sesame/" + path, headers: ["Content-Type": "application/json"])
        }
        return try await send(method, "/__sesame/" + path, json: body)
    }

    /// A user token for the default person with `permissions`.
    func token(_ permissions: [String] = [], user: String? = nil) async throws -> String {
        try await emulator.issueToken(user: user, permissions: permissions)
    }

    /// The app token `{app-id}|{secret}`.
    var appToken: String { "\(app.id)|\(app.secret)" }
    /// The client token `{app-id}|{client-token}` for device login.
    var clientToken: String { "\(app.id)|\(app.clientToken)" }

    /// Runs `body` with a started emulator and stops it afterwards, whatever happens.
    static func with<T: Sendable>(
        _ configure: (inout EmulatorConfiguration) -> Void = { _ in }, _ body: (Harness) async throws -> T
    ) async throws -> T {
        try await withStarted({ try await start(configure) }, stop: { await $0.stop() }, body)
    }
}

/// The library's own transport, not following redirects so that tests see the dialog's 302s,
/// and ignoring any proxy in the environment (the emulator is on loopback).
func loopbackTransport() -> CurlTransport {
    CurlTransport(configuration: .init(timeout: .seconds(60), redirects: .never, proxy: .direct))
}

/// Parses a URL's query (or fragment) into a dictionary of first values.
func parameters(of url: URL, fragment: Bool = false) -> [String: String] {
    let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
    let text = (fragment ? components?.percentEncodedFragment : components?.percentEncodedQuery) ?? ""
    var result: [String: String] = [:]
    for (name, value) in FormEncoding.decode(text) where result[name] == nil { result[name] = value }
    return result
}

import Foundation
import Sesame

/// An answer as the engine's handlers build it under the lock. JSON stays a value here and a
/// page a function, and both are written by ``response`` after the lock is released, so that a
/// large answer delays only its own client.
struct Reply: Sendable {
    /// What the body is made of.
    enum Body: Sendable {
        /// Bytes to send as they are (pictures, pages made elsewhere).
        case bytes(Data)
        /// A page, written when sent.
        case page(@Sendable () -> String)
        /// A JSON value, encoded when sent.
        case json(JSONValue)
        /// A batch's answers, in order: each is written as `{"code", "headers", "body"}` with its
        /// body as a JSON string; `nil` (an answer omitted on success) is written as `null`.
        case batch([BatchItem?])
    }

    /// One answer inside a batch.
    struct BatchItem: Sendable {
        var status: Int
        /// `nil` when the batch asked for no headers (`include_headers=false`).
        var headers: HTTPHeaders?
        var body: Body
    }

    var status: Int
    var headers: HTTPHeaders
    var body: Body
    /// An ID token to sign and add to the JSON object body as `id_token` when the answer is
    /// encoded, after the lock: signing (RSA above all) is the costliest step of a token answer.
    var pendingIDToken: PendingIDToken?

    init(status: Int = 200, headers: HTTPHeaders = [:], body: Body) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response already encoded.
    init(_ response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, body: .bytes(response.body))
    }

    var isSuccess: Bool { (200..<300).contains(status) }

    /// The response to send: the body encoded now, with its ID token signed.
    var response: HTTPResponse {
        guard let pendingIDToken, case .json(.object(var fields)) = body else {
            return HTTPResponse(status: status, headers: headers, body: body.data)
        }
        do {
            fields["id_token"] = .string(try pendingIDToken.signed())
        } catch {
            return Reply.oauthError("server_error", "The ID token could not be signed.", status: 500).response
        }
        return HTTPResponse(status: status, headers: headers, body: JSONValue.object(fields).jsonData)
    }
}

extension Reply.Body {
    /// The bytes to send.
    var data: Data {
        switch self {
        case .bytes(let data): return data
        case .page(let render): return Data(render().utf8)
        case .json(let value): return value.jsonData
        case .batch(let items):
            let answers = items.map { item -> JSONValue in
                guard let item else { return .null }
                var fields: [String: JSONValue] = [
                    "code": .int(item.status), "body": .string(String(decoding: item.body.data, as: UTF8.self)),
                ]
                if let headers = item.headers {
                    fields["headers"] = .array(
                        headers.map { .object(["name": .string($0.name), "value": .string($0.value)]) })
                }
                return .object(fields)
            }
            return JSONValue.array(answers).jsonData
        }
    }

    /// The body as JSON, for a batch's named results (`{result=name:$.id}`); `nil` when it is not JSON.
    var json: JSONValue? {
        switch self {
        case .bytes(let data): return JSONValue(parsing: data)
        case .json(let value): return value
        case .batch, .page: return nil
        }
    }
}

/// What the engine's handlers answer under the lock: a reply, or closing the connection without
/// one, after an optional delay (the `slow` scenario). ``EmulatorEngine`` turns it into an
/// ``EmulatorOutcome`` once the lock is released.
struct PendingOutcome: Sendable {
    /// The reply; `nil` closes the connection without answering.
    var reply: Reply?
    /// How long to wait before answering.
    var delay: Duration = .zero
    /// For a Graph answer not yet finished, the version prefix of its path (`/v19.0`, or ""):
    /// the engine finishes it after the lock is released.
    var graphVersionPrefix: String?
    /// The app a Graph call was counted for, whose usage the handler's time is added to.
    var usageAppID: String?

    static func respond(_ reply: Reply) -> PendingOutcome { PendingOutcome(reply: reply) }
    static func respond(_ response: HTTPResponse) -> PendingOutcome { PendingOutcome(reply: Reply(response)) }
}

import Foundation
import Sesame

/// An answer as the engine's handlers build it under the lock. JSON stays a value here and a
/// page a function, and both are written by ``response`` after the lock is released, so that a
/// large answer delays only its own client.
package struct Reply: Sendable {
    /// What the body is made of.
    package enum Body: Sendable {
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
    package struct BatchItem: Sendable {
        package var status: Int
        /// `nil` when the batch asked for no headers (`include_headers=false`).
        package var headers: HTTPHeaders?
        package var body: Body

        package init(status: Int, headers: HTTPHeaders?, body: Body) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    package var status: Int
    package var headers: HTTPHeaders
    package var body: Body
    /// A field to compute and add to the JSON object body when the answer is encoded, after the
    /// lock: for a costly value, such as a signed token (RSA above all).
    package var deferredField: DeferredField?

    package init(status: Int = 200, headers: HTTPHeaders = [:], body: Body) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response already encoded.
    package init(_ response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, body: .bytes(response.body))
    }

    package var isSuccess: Bool { (200..<300).contains(status) }

    /// The response to send: the body encoded now, with its deferred field computed.
    package var response: HTTPResponse {
        guard let deferredField, case .json(.object(var fields)) = body else {
            return HTTPResponse(status: status, headers: headers, body: body.data)
        }
        do {
            fields[deferredField.name] = .string(try deferredField.value())
        } catch {
            return deferredField.failure().response
        }
        return HTTPResponse(status: status, headers: headers, body: JSONValue.object(fields).jsonData)
    }
}

/// A string field of a JSON answer computed when the answer is encoded, after the engine's lock.
package struct DeferredField: Sendable {
    /// The field's name in the answer's object.
    package var name: String
    /// Computes the field's value.
    package var value: @Sendable () throws -> String
    /// The answer sent instead when ``value`` throws.
    package var failure: @Sendable () -> Reply

    package init(name: String, value: @escaping @Sendable () throws -> String, failure: @escaping @Sendable () -> Reply)
    {
        self.name = name
        self.value = value
        self.failure = failure
    }
}

extension Reply.Body {
    /// The bytes to send.
    package var data: Data {
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
    package var json: JSONValue? {
        switch self {
        case .bytes(let data): return JSONValue(parsing: data)
        case .json(let value): return value
        case .batch, .page: return nil
        }
    }
}

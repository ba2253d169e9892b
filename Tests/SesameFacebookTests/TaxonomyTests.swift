import Foundation
import Sesame
import Testing

@testable import SesameFacebook

/// `{"error": {...}}` with `members`.
func graphError(_ members: [String: JSONValue]) -> Data {
    Data(JSONValue.object(["error": .object(members)]).jsonText.utf8)
}

/// A Graph error body with a code, an optional subcode and more fields.
func graphError(code: Int?, subcode: Int? = nil, _ more: [String: JSONValue] = [:]) -> Data {
    var members = more
    if let code { members["code"] = .number(Double(code)) }
    if let subcode { members["error_subcode"] = .number(Double(subcode)) }
    members["message"] = members["message"] ?? .string("An error.")
    return graphError(members)
}

let taxonomy = FacebookErrorTaxonomy()

// Literals for building bodies in tests.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

@Suite("Facebook error taxonomy: the table")
struct TaxonomyTableTests {
    /// What the issue says the table must say, written out by hand.
    struct Expectation: Sendable, CustomTestStringConvertible {
        var name: String
        var code: Int?
        var subcode: Int? = nil
        var status = 400
        var transient: Bool? = nil
        var category: ErrorCategory
        var tactic: RecoveryTactic
        var notify = false
        var closes = false
        var silent = true
        var testDescription: String { name }

        /// A row whose error closes the session and asks the person to log in again.
        static func reopen(
            _ name: String, code: Int, subcode: Int? = nil, notify: Bool = false, silent: Bool = true
        ) -> Self {
            .init(
                name: name, code: code, subcode: subcode, category: .authenticationReopenSession,
                tactic: .reauthenticate, notify: notify, closes: true, silent: silent)
        }
    }

    static let expectations: [Expectation] = [
        .reopen("190", code: 190),
        .reopen("102", code: 102),
        .init(name: "1", code: 1, category: .server, tactic: .retryAfterBackoff),
        .init(name: "2", code: 2, status: 500, category: .server, tactic: .retryAfterBackoff),
        .init(name: "4", code: 4, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "17", code: 17, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "10", code: 10, status: 403, category: .permissions, tactic: .requestPermissions),
        .init(name: "200", code: 200, status: 403, category: .permissions, tactic: .requestPermissions),
        .init(name: "250", code: 250, category: .permissions, tactic: .requestPermissions),
        .init(name: "299", code: 299, category: .permissions, tactic: .requestPermissions),
        .init(name: "300 is not a permission code", code: 300, category: .badRequest, tactic: .showMessage),
        .reopen("190/458 removed app", code: 190, subcode: 458, silent: false),
        .reopen("102/458 removed app", code: 102, subcode: 458, silent: false),
        .init(
            name: "190/459 checkpointed", code: 190, subcode: 459, category: .retry, tactic: .showMessage, notify: true),
        .reopen("190/460 password changed", code: 190, subcode: 460),
        .reopen("190/463 expired", code: 190, subcode: 463),
        .reopen("190/464 unconfirmed", code: 190, subcode: 464, notify: true, silent: false),
        .reopen("190/467 invalid token", code: 190, subcode: 467),
        .reopen("190/492 invalid session", code: 190, subcode: 492),
        .init(name: "32 page throttling", code: 32, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "613 custom throttling", code: 613, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "341 application limit", code: 341, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "80001 business use case", code: 80001, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "80014 business use case", code: 80014, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "368 temporarily blocked", code: 368, category: .providerOther, tactic: .showMessage, notify: true),
        .init(name: "506 duplicate post", code: 506, category: .badRequest, tactic: .showMessage, notify: true),
        .init(name: "unknown transient", code: 12345, transient: true, category: .retry, tactic: .retry),
        .init(
            name: "known code wins over is_transient", code: 190, transient: true,
            category: .authenticationReopenSession, tactic: .reauthenticate, closes: true),
        .init(name: "unknown code with 5xx", code: 12345, status: 500, category: .server, tactic: .showMessage),
        .init(name: "unknown code with 4xx", code: 12345, status: 404, category: .badRequest, tactic: .showMessage),
        .init(name: "5xx with no code", code: nil, status: 503, category: .server, tactic: .retryAfterBackoff),
        .init(name: "429 with no code", code: nil, status: 429, category: .throttling, tactic: .retryAfterBackoff),
        .init(name: "unknown code with 3xx", code: 12345, status: 302, category: .providerOther, tactic: .showMessage),
    ]

    @Test("each rule the issue lists classifies as it says", arguments: expectations)
    func issueRules(_ expected: Expectation) {
        var extra: [String: JSONValue] = [:]
        if let transient = expected.transient { extra["is_transient"] = .bool(transient) }
        let error = taxonomy.classify(
            status: expected.status, headers: [:],
            body: graphError(code: expected.code, subcode: expected.subcode, extra))
        #expect(error.category == expected.category)
        #expect(error.recoveryTactic == expected.tactic)
        #expect(error.shouldNotifyUser == expected.notify)
        #expect(error.closesSession == expected.closes)
        #expect(error.allowsSilentReauthentication == expected.silent)
        #expect(error.code == expected.code)
        #expect(error.subcode == expected.subcode)
        #expect(error.httpStatus == expected.status)
        #expect(error.provider == .facebook)
        if expected.notify { #expect(error.userMessage?.isEmpty == false) }
    }

    /// A response that should reach `rule` if the table is ordered right.
    static func response(reaching rule: ErrorRule) -> (status: Int, body: Data) {
        func pick(_ condition: IntCondition) -> Int? {
            if case .oneOf(let ranges) = condition { return ranges[0].lowerBound }
            return nil
        }
        let status = pick(rule.match.status) ?? (rule.match == ErrorRuleMatch() ? 302 : 400)
        if rule.match.code == .absent { return (status, Data("<html><body>Bad Gateway</body></html>".utf8)) }
        var extra: [String: JSONValue] = [:]
        if let transient = rule.match.isTransient { extra["is_transient"] = .bool(transient) }
        return (status, graphError(code: pick(rule.match.code) ?? 12345, subcode: pick(rule.match.subcode), extra))
    }

    @Test(
        "every row of GraphErrors.json is reachable and classifies as its columns say",
        arguments: FacebookErrorTaxonomy.table.rules)
    func everyRow(_ rule: ErrorRule) {
        let (status, body) = Self.response(reaching: rule)
        let error = taxonomy.classify(status: status, headers: [:], body: body)
        #expect(error.ruleID == rule.id)
        #expect(error.category == rule.category)
        #expect(error.recoveryTactic == rule.recoveryTactic)
        #expect(error.closesSession == rule.closesSession)
        #expect(error.shouldNotifyUser == rule.shouldNotifyUser)
        #expect(error.userMessage == rule.userMessage)
        #expect(error.contextualMessage == (rule.userMessage ?? rule.category.contextualMessage))
        #expect(error.messageForPerson == (rule.shouldNotifyUser ? rule.userMessage : error.contextualMessage))
        #expect(error.userTitle == rule.userTitle)
        #expect(error.messageKey == rule.messageKey)
        #expect(error.allowsSilentReauthentication == rule.allowsSilentReauthentication)
        #expect(error.message.contains(rule.meaning))
        #expect(!rule.source.isEmpty)
    }

    @Test("the generated table has the rows of GraphErrors.json, in order")
    func generatedTableMatchesTheData() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appending(path: "Sources/SesameFacebook/GraphErrors.json")
        let json = try #require(JSONValue(parsing: try Data(contentsOf: url)))
        let ids = try #require(json["rows"]?.arrayValue).compactMap { $0["id"]?.stringValue }
        #expect(FacebookErrorTaxonomy.table.rules.map(\.id) == ids)
        #expect(FacebookErrorTaxonomy.table.name == "GraphErrors")
    }

    @Test("each subcode under 190 has its own message for the person")
    func subcodeMessages() {
        let subcodes = [458, 459, 460, 463, 464, 467, 492]
        let messages = subcodes.map {
            taxonomy.classify(status: 400, headers: [:], body: graphError(code: 190, subcode: $0)).userMessage
        }
        #expect(messages.allSatisfy { $0?.isEmpty == false })
        #expect(Set(messages).count == subcodes.count)
    }
}

@Suite("Facebook error taxonomy: what the response adds")
struct TaxonomyOverlayTests {
    @Test("190/458 keeps the SDK's shouldNotifyUser (false) and carries the guide's contextual message")
    func removedAppContextualMessage() {
        let removed = taxonomy.classify(status: 400, headers: [:], body: graphError(code: 190, subcode: 458))
        #expect(!removed.shouldNotifyUser)
        #expect(removed.contextualMessage == "The app was removed. Please log in again.")
        #expect(removed.messageForPerson == "The app was removed. Please log in again.")
        #expect(RecoveryPolicy().message(for: removed).description.contains("The app was removed."))
        let told = taxonomy.classify(
            status: 400, headers: [:], body: graphError(code: 190, subcode: 458, ["error_user_msg": "Removed."]))
        #expect(told.shouldNotifyUser)
        #expect(told.messageForPerson == "Removed.")
        #expect(told.contextualMessage == "The app was removed. Please log in again.")
    }

    @Test("an error no row gives a message to carries its category's contextual message")
    func categoryContextualMessage() {
        let failure = taxonomy.classify(TransportError(kind: .timedOut, message: "timed out"))
        #expect(failure.contextualMessage == ErrorCategory.retry.contextualMessage)
        #expect(!failure.contextualMessage.isEmpty)
    }

    @Test("a non-empty error_user_msg becomes the user message and sets shouldNotifyUser")
    func serverUserMessage() {
        let error = taxonomy.classify(
            status: 400, headers: [:],
            body: graphError(
                code: 190, subcode: 460, ["error_user_msg": "Change noticed.", "error_user_title": "Password"]))
        #expect(error.shouldNotifyUser)
        #expect(error.userMessage == "Change noticed.")
        #expect(error.userTitle == "Password")
        #expect(error.category == .authenticationReopenSession)
    }

    @Test("a blank error_user_msg is ignored", arguments: ["", "   ", "\n"])
    func blankUserMessage(text: String) {
        let error = taxonomy.classify(
            status: 400, headers: [:], body: graphError(code: 190, ["error_user_msg": .string(text)]))
        #expect(!error.shouldNotifyUser)
        #expect(error.userMessage == FacebookErrorTaxonomy.table.rule(id: "oauth")?.userMessage)
    }

    @Test("error_user_title alone sets the title but not shouldNotifyUser (as the SDK did)")
    func titleAlone() {
        let error = taxonomy.classify(
            status: 400, headers: [:], body: graphError(code: 4, ["error_user_title": "Slow down"]))
        #expect(error.userTitle == "Slow down")
        #expect(!error.shouldNotifyUser)
    }

    @Test("the error keeps the parsed body, status, code, subcode, type, fbtrace_id and is_transient")
    func keepsTheFacts() throws {
        let body = graphError(
            code: 190, subcode: 458,
            [
                "type": "OAuthException", "fbtrace_id": "EJplcsCHuLu", "is_transient": false,
                "message": "Error validating access token.",
            ])
        let error = taxonomy.classify(status: 400, headers: [:], body: body)
        #expect(error.body == JSONValue(parsing: body))
        #expect(error.httpStatus == 400)
        #expect(error.code == 190)
        #expect(error.subcode == 458)
        let graph = try #require(error.details(as: GraphErrorDetails.self))
        #expect(graph.type == "OAuthException")
        #expect(graph.traceID == "EJplcsCHuLu")
        #expect(graph.isTransient == false)
        #expect(error.message.contains("Error validating access token."))
        #expect(error.description.contains("code 190/458"))
        #expect(error.graphBodyKind == .errorObject)
    }

    @Test("the trace id falls back to the x-fb-trace-id header")
    func traceHeader() {
        let error = taxonomy.classify(status: 500, headers: ["x-fb-trace-id": "HdrTrace"], body: Data())
        #expect(error.details(as: GraphErrorDetails.self)?.traceID == "HdrTrace")
    }

    @Test(
        "is_transient is read from a Boolean, 0/1 or a string",
        arguments: [
            (JSONValue.bool(true), true as Bool?), (.bool(false), false), (.number(1), true), (.number(0), false),
            (.string("true"), true), (.string("FALSE"), false), (.string("maybe"), nil), (.number(2), nil),
            (.null, nil),
        ])
    func transientFlag(value: JSONValue, expected: Bool?) {
        let error = taxonomy.classify(status: 400, headers: [:], body: graphError(code: 12345, ["is_transient": value]))
        #expect(error.details(as: GraphErrorDetails.self)?.isTransient == expected)
        #expect(error.category == (expected == true ? .retry : .badRequest))
    }

    @Test("anything that looks like an access token is redacted from messages")
    func redactsTokens() {
        let token = "EAAB" + String(repeating: "x7Q", count: 30)
        let error = taxonomy.classify(
            status: 400, headers: [:],
            body: graphError(
                code: 190, ["message": .string("Malformed access token \(token) in ?access_token=\(token)&x=1")]))
        #expect(!error.message.contains(token))
        #expect(!error.description.contains(token))
        #expect(error.message.contains(Redaction.placeholder))
    }
}

@Suite("Facebook error taxonomy: odd bodies")
struct OddBodyTests {
    struct Odd: Sendable, CustomTestStringConvertible {
        var name: String
        var body: Data
        var kind: GraphErrorBody.Kind
        /// The category with HTTP 400 and with HTTP 503.
        var at400: ErrorCategory
        var at503: ErrorCategory
        var code: Int? = nil
        var testDescription: String { name }
    }

    static let odd: [Odd] = [
        Odd(
            name: "HTML page", body: Data("<!DOCTYPE html><html><title>502</title></html>".utf8), kind: .html,
            at400: .badRequest, at503: .server),
        Odd(name: "empty body", body: Data(), kind: .empty, at400: .badRequest, at503: .server),
        Odd(name: "white space", body: Data(" \n\t\r ".utf8), kind: .empty, at400: .badRequest, at503: .server),
        Odd(name: "null", body: Data("null".utf8), kind: .null, at400: .badRequest, at503: .server),
        Odd(
            name: "truncated JSON", body: Data(#"{"error":{"code":190,"error_sub"#.utf8), kind: .malformedJSON,
            at400: .badRequest, at503: .server),
        Odd(
            name: "plain text", body: Data("Service Unavailable".utf8), kind: .text, at400: .badRequest, at503: .server),
        Odd(
            name: "bytes that are not UTF-8", body: Data([0xFF, 0xFE, 0x7B, 0x00, 0xC3]), kind: .text,
            at400: .badRequest, at503: .server),
        Odd(
            name: "JSON without an error", body: Data(#"{"data":[]}"#.utf8), kind: .noError, at400: .badRequest,
            at503: .server),
        Odd(name: "a JSON number", body: Data("42".utf8), kind: .noError, at400: .badRequest, at503: .server),
        Odd(name: "a JSON array", body: Data("[1,2]".utf8), kind: .noError, at400: .badRequest, at503: .server),
        Odd(
            name: "error as a string", body: Data(#"{"error":"invalid_token","error_description":"Bad token"}"#.utf8),
            kind: .errorString, at400: .badRequest, at503: .server),
        Odd(
            name: "error as a string with an error_code",
            body: Data(#"{"error":"invalid_token","error_code":190}"#.utf8),
            kind: .errorString, at400: .authenticationReopenSession, at503: .authenticationReopenSession, code: 190),
        Odd(
            name: "error as an array", body: Data(#"{"error":[{"code":4,"message":"slow"}]}"#.utf8), kind: .errorArray,
            at400: .throttling, at503: .throttling, code: 4),
        Odd(
            name: "error as an array of non-objects", body: Data(#"{"error":[1,"x",null]}"#.utf8), kind: .errorArray,
            at400: .badRequest, at503: .server),
        Odd(
            name: "error as null", body: Data(#"{"error":null}"#.utf8), kind: .noError, at400: .badRequest,
            at503: .server),
        Odd(
            name: "REST-style top-level error_code",
            body: Data(#"{"error_code":17,"error_msg":"User request limit reached"}"#.utf8),
            kind: .restStyle, at400: .throttling, at503: .throttling, code: 17),
        Odd(
            name: "code as a string", body: Data(#"{"error":{"code":"190","error_subcode":"463"}}"#.utf8),
            kind: .errorObject,
            at400: .authenticationReopenSession, at503: .authenticationReopenSession, code: 190),
        Odd(
            name: "code as a float", body: Data(#"{"error":{"code":4.0}}"#.utf8), kind: .errorObject,
            at400: .throttling,
            at503: .throttling, code: 4),
        Odd(
            name: "code as a fraction", body: Data(#"{"error":{"code":190.5}}"#.utf8), kind: .errorObject,
            at400: .badRequest,
            at503: .server),
        Odd(
            name: "code as a Boolean", body: Data(#"{"error":{"code":true}}"#.utf8), kind: .errorObject,
            at400: .badRequest,
            at503: .server),
        Odd(
            name: "code as an object", body: Data(#"{"error":{"code":{"value":190}}}"#.utf8), kind: .errorObject,
            at400: .badRequest, at503: .server),
        Odd(
            name: "code too large for an Int", body: Data(#"{"error":{"code":1e300}}"#.utf8), kind: .errorObject,
            at400: .badRequest, at503: .server),
        Odd(
            name: "nested 100 000 levels deep",
            body: Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8),
            kind: .malformedJSON, at400: .badRequest, at503: .server),
        Odd(
            name: "several megabytes of HTML",
            body: Data(("<html>" + String(repeating: "<p>Bad gateway</p>", count: 300_000)).utf8),
            kind: .html, at400: .badRequest, at503: .server),
        Odd(
            name: "a several-megabyte error message",
            body: graphError(code: 17, ["message": .string(String(repeating: "limit ", count: 1_000_000))]),
            kind: .errorObject,
            at400: .throttling, at503: .throttling, code: 17),
        Odd(
            name: "several megabytes of JSON around the error",
            body: Data(
                JSONValue.object([
                    "error": .object(["code": .number(2)]),
                    "padding": .array(Array(repeating: .object(["k": .string("v"), "n": .number(1)]), count: 60_000)),
                ]).jsonText.utf8), kind: .errorObject, at400: .server, at503: .server, code: 2),
    ]

    @Test("an odd body is classified, never a crash or a throw", arguments: odd)
    func oddBody(_ example: Odd) {
        for (status, category) in [(400, example.at400), (503, example.at503)] {
            let error = taxonomy.classify(status: status, headers: [:], body: example.body)
            #expect(error.graphBodyKind == example.kind)
            #expect(error.category == category, "HTTP \(status)")
            #expect(error.code == example.code)
            #expect(error.httpStatus == status)
            #expect(error.message.count < 3000)
        }
    }

    @Test("a body over the size limit is classified by its status without being parsed")
    func tooLarge() {
        let small = FacebookErrorTaxonomy(maximumBodySize: 1024)
        let error = small.classify(
            status: 400, headers: [:],
            body: graphError(code: 190, ["message": .string(String(repeating: "x", count: 2000))]))
        #expect(error.graphBodyKind == .tooLarge)
        #expect(error.code == nil)
        #expect(error.category == .badRequest)
        #expect(error.body == nil)
        #expect(error.message.contains("too large"))
    }

    @Test("strings from a huge body are cut to a readable length")
    func longStringsAreCut() {
        let error = taxonomy.classify(
            status: 400, headers: [:],
            body: graphError(code: 4, ["error_user_msg": .string(String(repeating: "a", count: 50_000))]))
        #expect(error.userMessage?.count == GraphErrorBody.maximumTextLength + 1)
        #expect(error.userMessage?.hasSuffix("…") == true)
    }
}

@Suite("Facebook login errors")
struct LoginErrorTests {
    @Test("the person denying the login is userCancelled with no message")
    func userDenied() {
        let error = taxonomy.classifyLoginError(
            .facebook(
                error: "access_denied", errorDescription: "Permissions error", errorReason: "user_denied",
                errorCode: 200))
        #expect(error.category == .userCancelled)
        #expect(error.loginFailedReason == .userDenied)
        #expect(error.userMessage == nil)
        #expect(!error.shouldNotifyUser)
        #expect(error.recoveryTactic == RecoveryTactic.none)
        #expect(!error.closesSession)
        #expect(error.provider == .facebook)
    }

    @Test(
        "access_denied without a reason, or the restricted-treatment code 14, is a cancel",
        arguments: [
            OAuthErrorResponse(error: "access_denied"), .facebook(error: "unknown_error", errorCode: 14),
        ])
    func cancelled(_ response: OAuthErrorResponse) {
        let error = taxonomy.classifyLoginError(response)
        #expect(error.category == .userCancelled)
        #expect(error.loginFailedReason == .userCancelled)
        #expect(error.userMessage == nil)
    }

    @Test(
        "any other login failure is a failed login in the retry category",
        arguments: [
            OAuthErrorResponse(error: "server_error", errorDescription: "Try later"),
            .facebook(error: "invalid_scope", errorDescription: "Invalid Scopes: publish_stream", errorCode: 100),
        ])
    func otherFailures(_ response: OAuthErrorResponse) {
        let error = taxonomy.classifyLoginError(response)
        #expect(error.category == .retry)
        #expect(error.loginFailedReason == .providerError)
        #expect(error.code == response.errorCode)
        #expect(error.message.contains(response.error))
        #expect(!error.closesSession)
        #expect(error.userMessage?.isEmpty == false)
    }

    @Test("transport failures are retry when transient, invalid for a refused certificate, server otherwise")
    func transport() {
        #expect(taxonomy.classify(TransportError(kind: .timedOut, message: "t")).category == .retry)
        #expect(taxonomy.classify(TransportError(kind: .certificateRejected, message: "t")).category == .invalid)
        #expect(taxonomy.classify(TransportError(kind: .other, message: "t")).category == .server)
    }
}

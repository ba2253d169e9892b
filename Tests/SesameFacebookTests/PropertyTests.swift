import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameFacebook

/// Bodies, statuses and headers made at random from a seed.
struct Fuzzer {
    var random: SeededGenerator

    static let seeds: [Data] = [
        graphError(code: 190, subcode: 458, ["type": "OAuthException", "fbtrace_id": "A1"]),
        graphError(code: 190, subcode: 459, ["error_user_msg": "Log in on the web.", "error_user_title": "Locked"]),
        graphError(code: 4, ["is_transient": true]),
        graphError(code: 200, ["message": "(#200) Permissions error"]),
        graphError(code: 80004, subcode: 2_446_079),
        graphError(code: 506, ["message": "Duplicate status message"]),
        Data(#"{"error":"invalid_token","error_description":"Bad","error_code":190}"#.utf8),
        Data(#"{"error":[{"code":17}]}"#.utf8),
        Data(#"{"error_code":"613","error_msg":"Calls to this api have exceeded the rate limit."}"#.utf8),
        Data("<html><body><h1>502 Bad Gateway</h1></body></html>".utf8),
        Data("null".utf8), Data(), Data("[]".utf8),
    ]

    static let statuses = [
        0, -1, 100, 200, 204, 302, 400, 401, 403, 404, 429, 500, 502, 503, 599, 600, 999, Int.max, Int.min,
    ]
    static let soup = Array(#"{}[]":,0123456789.-+eE truefalsnul\u"abcé☕️"#.utf8) + [0x00, 0x0A, 0x7F, 0xC3, 0xFF]

    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ percent: Int) -> Bool { int(0..<100) < percent }

    mutating func replacementValue() -> String {
        let values = [
            "\"190\"", "190.0", "190.5", "true", "null", "[]", "{}", "\"\"", "-1", "1e999", "\"\\u0000\"",
            "\"EAAB1234567890abcdefghijKLMN\"",
            "9999999999999999999999", "[190]", "{\"code\":190}", "\"  \"",
        ]
        return values[int(0..<values.count)]
    }

    mutating func mutate(_ data: Data) -> Data {
        var bytes = Array(data)
        for _ in 0..<int(1..<4) {
            switch int(0..<8) {
            case 0 where !bytes.isEmpty: bytes.removeLast(int(0..<bytes.count))
            case 1 where !bytes.isEmpty: bytes[int(0..<bytes.count)] = Self.soup[int(0..<Self.soup.count)]
            case 2:
                bytes.insert(
                    contentsOf: (0..<int(1..<8)).map { _ in Self.soup[int(0..<Self.soup.count)] },
                    at: int(0..<bytes.count + 1))
            case 3 where bytes.count > 2:
                let start = int(0..<bytes.count - 1)
                bytes.removeSubrange(start..<min(bytes.count, start + int(1..<6)))
            case 4:
                // Give a field a value of another type.
                var text = String(decoding: bytes, as: UTF8.self)
                for field in [
                    "\"code\":", "\"error_subcode\":", "\"is_transient\":", "\"error_user_msg\":", "\"error\":",
                ] {
                    if let range = text.range(of: field), chance(50) {
                        let valueEnd = text[range.upperBound...].firstIndex { $0 == "," || $0 == "}" } ?? text.endIndex
                        text.replaceSubrange(range.upperBound..<valueEnd, with: replacementValue())
                    }
                }
                bytes = Array(text.utf8)
            case 5: bytes = Array("[".utf8) + bytes + Array("]".utf8)
            case 6: bytes = [0xEF, 0xBB, 0xBF] + bytes
            default: bytes = Array("{\"error\":".utf8) + bytes + Array("}".utf8)
            }
        }
        return Data(bytes)
    }

    mutating func body() -> Data {
        switch int(0..<10) {
        case 0..<6: return mutate(Self.seeds[int(0..<Self.seeds.count)])
        case 6..<8: return Data((0..<int(0..<200)).map { _ in Self.soup[int(0..<Self.soup.count)] })
        case 8: return Data((0..<int(0..<200)).map { _ in UInt8.random(in: 0...255, using: &random) })
        default: return Self.seeds[int(0..<Self.seeds.count)]
        }
    }

    mutating func headers() -> HTTPHeaders {
        var headers = HTTPHeaders()
        if chance(40) {
            headers.add(
                name: "X-App-Usage",
                value: String(
                    decoding: mutate(Data(#"{"call_count":95,"total_time":20,"total_cputime":"7"}"#.utf8)),
                    as: UTF8.self))
        }
        if chance(40) {
            let usage =
                #"{"42":[{"type":"pages","call_count":100,"total_cputime":1,"total_time":1,"estimated_time_to_regain_access":3}]}"#
            headers.add(
                name: "X-Business-Use-Case-Usage", value: String(decoding: mutate(Data(usage.utf8)), as: UTF8.self))
        }
        if chance(20) {
            headers.add(
                name: "Retry-After", value: ["5", "0", "-3", "abc", "99999999999999999999", "1.5", ""][int(0..<7)])
        }
        return headers
    }
}

@Suite("Facebook error taxonomy: properties")
struct PropertyTests {
    /// Set SESAME_PROPERTY_SEED to replay a reported failure.
    static let seed =
        ProcessInfo.processInfo.environment["SESAME_PROPERTY_SEED"].flatMap { UInt64($0) } ?? 0x5E5A_3E00_0003

    @Test("thousands of random and mutated responses are all classified, consistently with the table")
    func randomResponses() {
        var fuzzer = Fuzzer(random: SeededGenerator(seed: Self.seed))
        let rules = Dictionary(uniqueKeysWithValues: FacebookErrorTaxonomy.table.rules.map { ($0.id, $0) })
        var kinds: Set<GraphErrorBody.Kind> = []
        var categories: Set<ErrorCategory> = []
        var failures = 0
        for iteration in 0..<4000 where failures < 5 {
            let body = fuzzer.body()
            let status = Fuzzer.statuses[fuzzer.int(0..<Fuzzer.statuses.count)]
            let headers = fuzzer.headers()
            let error = taxonomy.classify(status: status, headers: headers, body: body)
            let context = Comment(
                rawValue:
                    "seed \(Self.seed), iteration \(iteration): status \(status), body (base64) \(body.base64EncodedString())"
            )
            let rule = error.ruleID.flatMap { rules[$0] }
            let checks: [(String, Bool)] = [
                ("a table row classified it", rule != nil),
                (
                    "category, tactic and closing come from the row",
                    rule.map {
                        error.category == $0.category && error.recoveryTactic == $0.recoveryTactic
                            && error.closesSession == $0.closesSession
                    } ?? false
                ),
                (
                    "provider, status and body kind are kept",
                    error.provider == .facebook && error.httpStatus == status && error.graphBodyKind != nil
                ),
                ("notify implies a message", !error.shouldNotifyUser || error.userMessage?.isEmpty == false),
                ("a retry hint is positive", error.retryAfter.map { $0 > .zero } ?? true),
                (
                    "the message is short and has no token",
                    !error.message.isEmpty && error.message.count < 5000 && !error.message.contains("EAAB1234567890")
                ),
            ]
            for (name, passed) in checks where !passed {
                Issue.record("\(name): \(context.rawValue); got \(error)")
                failures += 1
            }
            if let kind = error.graphBodyKind { kinds.insert(kind) }
            categories.insert(error.category)
        }
        // The generator must actually reach the interesting cases.
        #expect(
            kinds.isSuperset(of: [
                .errorObject, .errorString, .errorArray, .restStyle, .noError, .empty, .html, .text, .malformedJSON,
            ]))
        #expect(
            categories.isSuperset(of: [
                .authenticationReopenSession, .retry, .permissions, .throttling, .server, .badRequest, .providerOther,
            ]))
    }

    @Test("random usage headers never trap, and what is read is a percentage or unknown")
    func randomUsage() {
        var fuzzer = Fuzzer(random: SeededGenerator(seed: Self.seed &+ 1))
        for _ in 0..<2000 {
            let headers = fuzzer.headers()
            guard let usage = GraphUsage(headers: headers) else { continue }
            #expect(usage.highestPercentage != nil || usage.estimatedTimeToRegainAccess != nil)
            #expect(GraphUsage(json: usage.json) == usage)
        }
    }
}

import Foundation
import Sesame
import SesameFacebook

/// `sesame-bench taxonomy [--json]`: how fast FacebookErrorTaxonomy classifies typical error
/// bodies, odd ones, and bodies of several megabytes.
let taxonomyBenchmark = Benchmark(
    name: "taxonomy",
    summary: "FacebookErrorTaxonomy.classify: typical, odd and multi-megabyte bodies"
) { arguments in
    let taxonomy = FacebookErrorTaxonomy()
    let usage: HTTPHeaders = [
        "X-App-Usage": #"{"call_count":28,"total_time":25,"total_cputime":25}"#,
        "X-Business-Use-Case-Usage":
            #"{"1234":[{"type":"pages","call_count":100,"total_cputime":20,"total_time":30,"estimated_time_to_regain_access":5}]}"#,
    ]
    func json(_ value: JSONValue) -> Data { Data(value.jsonText.utf8) }
    let cases: [(name: String, headers: HTTPHeaders, body: Data, iterations: Int)] = [
        (
            "190/458 (typical)", [:],
            Data(
                #"{"error":{"message":"Error validating access token: User 1 has not authorized application 2.","type":"OAuthException","code":190,"error_subcode":458,"fbtrace_id":"EJplcsCHuLu"}}"#
                    .utf8),
            20_000
        ),
        ("80001 + usage headers", usage, Data(#"{"error":{"code":80001,"message":"Too many calls"}}"#.utf8), 20_000),
        (
            "HTML 502 page", [:],
            Data("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>".utf8), 20_000
        ),
        ("truncated JSON", [:], Data(#"{"error":{"code":190,"error_sub"#.utf8), 20_000),
        (
            "5 MB error message", [:],
            json(["error": ["code": 17, "message": .string(String(repeating: "x", count: 5_000_000))]]), 5
        ),
        ("5 MB HTML page", [:], Data(("<html>" + String(repeating: "<p>Bad gateway</p>", count: 280_000)).utf8), 5),
        (
            "4.8 MB JSON, 150k objects", [:],
            json([
                "error": ["code": 2],
                "data": .array(Array(repeating: ["a": 1, "b": "x", "c": [true, nil]], count: 150_000)),
            ]),
            3
        ),
        (
            "deeply nested (100k)", [:],
            Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8), 20
        ),
    ]
    var results: [[String: JSONValue]] = []
    for item in cases {
        let clock = ContinuousClock()
        var last: AuthError?
        let elapsed = clock.measure {
            for _ in 0..<item.iterations {
                last = taxonomy.classify(status: 400, headers: item.headers, body: item.body)
            }
        }
        let perCall = elapsed.inSeconds / Double(item.iterations)
        results.append([
            "case": .string(item.name), "bytes": .number(Double(item.body.count)),
            "iterations": .number(Double(item.iterations)),
            "secondsPerCall": .number(perCall), "category": .string(last?.category.rawValue ?? "-"),
        ])
        if !arguments.contains("--json") {
            let rate = perCall > 0 ? String(format: "%10.0f/s", 1 / perCall) : "         -"
            print(
                "\(item.name.padding(toLength: 28, withPad: " ", startingAt: 0)) \(String(format: "%9d", item.body.count)) B  "
                    + "\(String(format: "%10.1f µs", perCall * 1e6))  \(rate)  → \(last?.category.rawValue ?? "-")")
        }
    }
    if arguments.contains("--json") { print(JSONValue.array(results.map { .object($0) }).jsonText) }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { $1 }))
    }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
}

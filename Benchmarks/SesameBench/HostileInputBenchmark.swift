import Foundation
import Sesame

/// `sesame-bench json`: the time `JSONValue(parsing:)` takes per nesting depth and on
/// megabyte bodies, beside Foundation's `JSONSerialization` and the `Decodable` path, and the
/// old `try?` cascade for comparison (issue 17, item 1).
let jsonBenchmark = Benchmark(
    name: "json",
    summary: "JSONValue parsing per nesting depth and on 1 MB hostile bodies"
) { _ in
    func nested(_ depth: Int) -> Data {
        Data((String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)).utf8)
    }
    /// The median of `runs` timings of `body`, in milliseconds.
    func milliseconds(runs: Int, _ body: () -> Void) -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let started = ContinuousClock.now
            body()
            let elapsed = ContinuousClock.now - started
            times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
        }
        return times.sorted()[times.count / 2]
    }
    func format(_ value: Double) -> String { String(format: "%10.3f", value) }

    print("JSON parsing, median ms (refused: the parser returned nil)")
    print("depth   bytes  JSONValue(parsing:)  JSONSerialization  JSONDecoder  old try? cascade")
    for depth in [16, 32, 64, 128, 129, 256, 511] {
        let data = nested(depth)
        var accepted = false
        let parsed = milliseconds(runs: 21) { accepted = JSONValue(parsing: data) != nil }
        let foundation = milliseconds(runs: 21) { _ = try? JSONSerialization.jsonObject(with: data) }
        let decoded = milliseconds(runs: 5) { _ = try? JSONDecoder().decode(JSONValue.self, from: data) }
        let old =
            depth <= 128
            ? format(milliseconds(runs: 3) { _ = try? JSONDecoder().decode(CascadeJSON.self, from: data) })
            : "  (skipped)"
        print(
            "\(String(depth).padding(toLength: 5, withPad: " ", startingAt: 0))\(String(format: "%8d", data.count))"
                + "  \(format(parsed))\(accepted ? "" : " refused")  \(format(foundation))  \(format(decoded))  \(old)")
    }

    print("\n1 MB bodies, median ms")
    let megabyte = 1 << 20
    let flat = Data(("[" + (0..<90_000).map { #"{"n":\#($0)}"# }.joined(separator: ",") + "]").utf8)
    let cases: [(String, Data)] = [
        ("1 MB of [", Data(repeating: UInt8(ascii: "["), count: megabyte)),
        (#"1 MB of {"a":"#, Data(String(repeating: #"{"a":"#, count: megabyte / 5).utf8)),
        (
            "1 MB of arrays 128 deep",
            Data(
                ("[" + String(repeating: String(decoding: nested(127), as: UTF8.self) + ",", count: 4_000) + "1]").utf8)
        ),
        ("\(flat.count / 1024) KB flat array of objects", flat),
        ("1 MB string", Data(("\"" + String(repeating: "x", count: megabyte - 2) + "\"").utf8)),
    ]
    for (name, data) in cases {
        var accepted = false
        let time = milliseconds(runs: 5) { accepted = JSONValue(parsing: data) != nil }
        print("\(name.padding(toLength: 34, withPad: " ", startingAt: 0))\(format(time))\(accepted ? "" : " refused")")
    }
}

/// The `Decodable` initialiser `JSONValue` had before issue 17: every type tried in turn with
/// `try?`, re-decoding whole subtrees. Kept here only to show the difference.
private enum CascadeJSON: Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([CascadeJSON])
    case object([String: CascadeJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([CascadeJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: CascadeJSON].self))
        }
    }
}

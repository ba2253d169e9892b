import Foundation
import Sesame
import SesameTestSupport
import Testing

private func nested(_ depth: Int, object: Bool) -> Data {
    let open = object ? #"{"a":"# : "["
    let close = object ? "}" : "]"
    return Data((String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)).utf8)
}

/// A random JSON value, at most `depth` deep.
private func randomValue(depth: Int, using generator: inout SeededGenerator) -> JSONValue {
    let pick = Int.random(in: 0..<(depth > 0 ? 7 : 5), using: &generator)
    switch pick {
    case 0: return .null
    case 1: return .bool(Bool.random(using: &generator))
    case 2:
        return Bool.random(using: &generator)
            ? .number(Double(Int.random(in: -1_000_000...1_000_000, using: &generator)))
            : .number(Double.random(in: -1e6...1e6, using: &generator))
    case 3, 4:
        let alphabet = Array("aZ09 _-\"\\/\n\t\u{1}é€😀\u{2028}")
        let length = Int.random(in: 0..<12, using: &generator)
        return .string(String((0..<length).map { _ in alphabet.randomElement(using: &generator)! }))
    case 5:
        return .array(
            (0..<Int.random(in: 0..<5, using: &generator)).map { _ in
                randomValue(depth: depth - 1, using: &generator)
            })
    default:
        var members: [String: JSONValue] = [:]
        for _ in 0..<Int.random(in: 0..<5, using: &generator) {
            members["k\(Int.random(in: 0..<20, using: &generator))"] = randomValue(depth: depth - 1, using: &generator)
        }
        return .object(members)
    }
}

@Suite("JSON parsing of hostile input")
struct JSONParsingTests {
    @Test(
        "nesting up to the documented limit is parsed, one level more is refused",
        arguments: [false, true])
    func depthLimit(object: Bool) throws {
        let limit = JSONValue.maximumNestingDepth
        #expect(limit == 128)
        var value = try #require(JSONValue(parsing: nested(limit, object: object)))
        for _ in 0..<limit { value = try #require(object ? value["a"] : value[0]) }
        #expect(value == .number(1))
        #expect(JSONValue(parsing: nested(limit + 1, object: object)) == nil)
        #expect(JSONValue(parsing: nested(511, object: object)) == nil)
    }

    @Test("a megabyte of opening brackets is refused without exhausting the stack")
    func megabyteOfBrackets() {
        #expect(JSONValue(parsing: Data(repeating: UInt8(ascii: "["), count: 1 << 20)) == nil)
        #expect(JSONValue(parsing: Data(String(repeating: #"{"a":"#, count: 200_000).utf8)) == nil)
    }

    @Test("a megabyte-long flat document of as many containers as the limit allows is parsed whole")
    func longFlatDocument() throws {
        let limit = JSONValue.maximumContainerCount
        #expect(limit == 100_000)
        // The outer array and limit − 1 objects: exactly the limit.
        let elements = (0..<(limit - 1)).map { #"{"n":\#($0),"s":"x\u00e9"}"# }
        let data = Data(("[" + elements.joined(separator: ",") + "]").utf8)
        #expect(data.count > 1_000_000)
        let array = try #require(JSONValue(parsing: data)?.arrayValue)
        #expect(array.count == limit - 1)
        #expect(array[limit - 2]["n"] == .number(Double(limit - 2)))
        #expect(array[5]["s"] == .string("xé"))
        // One container more, even an empty one, is refused.
        let over = Data(("[" + elements.joined(separator: ",") + ",[]]").utf8)
        #expect(JSONValue(parsing: over) == nil)
    }

    @Test("a megabyte of tiny nested containers is refused once it passes the container limit")
    func manyTinyContainers() {
        // 4,000 arrays 128 deep: 512,000 containers in about a megabyte, each an allocation.
        let chain = String(repeating: "[", count: 127) + "1" + String(repeating: "]", count: 127)
        let data = Data(("[" + String(repeating: chain + ",", count: 4_000) + "1]").utf8)
        #expect(data.count > 1_000_000)
        #expect(JSONValue(parsing: data) == nil)
        // The same shape within the limit is parsed.
        let small = Data(("[" + String(repeating: chain + ",", count: 700) + "1]").utf8)
        #expect(JSONValue(parsing: small)?.arrayValue?.count == 701)
    }

    @Test("Decodable JSONValue reads containers and scalars, nested, the same as the parser")
    func decodableAgreesWithParser() throws {
        let text = #"{"a":[1,2.5,"x",true,false,null,{"b":{}}],"c":{"d":[[]]},"e":-3e2}"#
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == JSONValue(parsing: Data(text.utf8)))
        #expect(decoded["a"]?[3] == .bool(true))
        #expect(decoded["e"] == .number(-300))
        // A deep document decodes too (the old initialiser tried every type at every level).
        let deep = try JSONDecoder().decode(JSONValue.self, from: nested(100, object: false))
        #expect(deep == JSONValue(parsing: nested(100, object: false)))
    }

    @Test("property: a random value survives writing and parsing, and equals Foundation's reading")
    func roundTrip() throws {
        var generator = SeededGenerator(seed: 17)
        for iteration in 0..<300 {
            let value = randomValue(depth: 5, using: &generator)
            let data = Data(value.jsonText.utf8)
            #expect(JSONValue(parsing: data) == value, "iteration \(iteration): \(value.jsonText)")
            let foundation = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            let reencoded = try JSONSerialization.data(withJSONObject: foundation, options: [.fragmentsAllowed])
            #expect(JSONValue(parsing: reencoded) == value, "iteration \(iteration)")
        }
    }

    @Test("fuzz: mutated documents never trap, and whatever is accepted writes back to itself")
    func mutations() {
        var generator = SeededGenerator(seed: 9)
        let noise: [UInt8] = Array("{}[],:\"\\u0-1eE.tfn ".utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF]
        var accepted = 0
        for _ in 0..<1_000 {
            var bytes = Array(randomValue(depth: 4, using: &generator).jsonText.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: 0...bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes.insert(noise.randomElement(using: &generator)!, at: position)
                case 1: if position < bytes.count { bytes.remove(at: position) }
                default: if position < bytes.count { bytes[position] = noise.randomElement(using: &generator)! }
                }
            }
            guard let value = JSONValue(parsing: Data(bytes)) else { continue }
            accepted += 1
            #expect(JSONValue(parsing: Data(value.jsonText.utf8)) == value)
        }
        // Some mutations leave valid JSON (a changed digit, an inserted space): the check above ran.
        #expect(accepted > 20)
    }
}

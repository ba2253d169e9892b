import Foundation
import Testing

@testable import Sesame

@Suite("JSON writing")
struct JSONWriterTests {
    @Test(
        "JSON output escapes what it must and round-trips",
        arguments: [
            JSONValue.string("quote \" backslash \\ newline \n tab \t bell \u{07} line-sep \u{2028} é 😀"),
            .object(["b": .int(2), "a": .array([.null, .bool(true), .number(1.5), .int(-7)])]),
            .number(1e20),
            .object([:]),
        ])
    func jsonRoundTrip(value: JSONValue) throws {
        let text = value.jsonText
        #expect(!text.contains("\n"))
        #expect(JSONValue(parsing: Data(text.utf8)) == value)
        #expect(value.jsonData == Data(text.utf8))
    }

    @Test("JSON objects come out with sorted keys and whole numbers without a decimal point")
    func jsonShape() {
        #expect(JSONValue.object(["b": .int(2), "a": .number(1)]).jsonText == #"{"a":1,"b":2}"#)
    }

    @Test("control characters, quotes and line separators are escaped; slashes are not")
    func jsonEscapes() {
        #expect(
            JSONValue.string("a/b\"\u{01}\u{2028}").jsonText == #""a/b\"\u0001\u2028""#)
        #expect(JSONValue.number(.infinity).jsonText == "null")
    }
}

import Foundation
import Sesame

/// Writes ``JSONValue`` as compact JSON with sorted keys, quickly: the emulator answers every
/// Graph call with JSON, and Foundation's encoder dominated the cost of `GET /me` under load.
enum JSONWriter {
    static func data(_ value: JSONValue) -> Data { Data(string(value).utf8) }

    static func string(_ value: JSONValue) -> String {
        var output = ""
        output.reserveCapacity(256)
        write(value, to: &output)
        return output
    }

    private static func write(_ value: JSONValue, to output: inout String) {
        switch value {
        case .null: output += "null"
        case .bool(let flag): output += flag ? "true" : "false"
        case .number(let number): output += format(number)
        case .string(let text): writeString(text, to: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                write(element, to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output += "," }
                writeString(key, to: &output)
                output += ":"
                write(members[key]!, to: &output)
            }
            output += "}"
        }
    }

    private static func format(_ number: Double) -> String {
        guard number.isFinite else { return "null" }
        if number.rounded() == number, abs(number) < 1e15 { return String(Int64(number)) }
        return String(number)
    }

    private static func writeString(_ text: String, to output: inout String) {
        output += "\""
        // Most strings need no escape at all: append them whole.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0xE2 }) {
            output += text
            output += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{2028}": output += "\\u2028"
            case "\u{2029}": output += "\\u2029"
            default:
                if scalar.value < 0x20 {
                    output += "\\u00" + String(scalar.value, radix: 16).leftPadded(2)
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        output += "\""
    }
}

extension JSONValue {
    /// A whole number as JSON.
    package static func int(_ value: Int) -> JSONValue { .number(Double(value)) }
}

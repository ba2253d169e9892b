import Foundation

/// The JSON writer behind ``JSONValue/jsonText``: compact, object keys sorted, `/` not escaped,
/// and the line separators U+2028 and U+2029 escaped (JavaScript reads them as line breaks).
/// Whole numbers below 10^15 are written without a decimal point. It writes bytes in one pass,
/// several times faster than Foundation's `JSONEncoder`, which the emulator's answers and the
/// Graph client's batch parameter used to pay for on every call.
enum JSONWriter {
    static func bytes(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(value, to: &output)
        return output
    }

    private static func write(_ value: JSONValue, to output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let number): output.append(contentsOf: format(number).utf8)
        case .string(let text): writeString(text, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                write(member.value, to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func format(_ number: Double) -> String {
        guard number.isFinite else { return "null" }
        if number.rounded() == number, abs(number) < 1e15 { return String(Int64(number)) }
        return String(number)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func writeString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escape at all: append them whole. 0xE2 starts U+2028 and U+2029.
        // Scanned and copied as one buffer (`withUTF8` copies only a string that is not
        // contiguous UTF-8 already, which native strings are).
        var contiguous = text
        let appendedWhole = contiguous.withUTF8 { bytes -> Bool in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0xE2 }) else { return false }
            output.append(contentsOf: bytes)
            return true
        }
        if appendedWhole {
            output.append(UInt8(ascii: "\""))
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output.append(contentsOf: #"\""#.utf8)
            case "\\": output.append(contentsOf: #"\\"#.utf8)
            case "\n": output.append(contentsOf: #"\n"#.utf8)
            case "\r": output.append(contentsOf: #"\r"#.utf8)
            case "\t": output.append(contentsOf: #"\t"#.utf8)
            case "\u{2028}": output.append(contentsOf: #"\u2028"#.utf8)
            case "\u{2029}": output.append(contentsOf: #"\u2029"#.utf8)
            default:
                if scalar.value < 0x20 {
                    output.append(contentsOf: #"\u00"#.utf8)
                    output.append(hexDigits[Int(scalar.value >> 4)])
                    output.append(hexDigits[Int(scalar.value & 0xF)])
                } else {
                    output.append(contentsOf: String(scalar).utf8)
                }
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// Compact JSON text with sorted keys (see ``jsonText``), as bytes ready to send.
    package var jsonData: Data { Data(JSONWriter.bytes(self)) }

    /// A whole number as JSON.
    package static func int(_ value: Int) -> JSONValue { .number(Double(value)) }
}

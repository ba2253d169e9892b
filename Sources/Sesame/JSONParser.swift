import Foundation

/// The JSON reader behind ``JSONValue/init(parsing:)``: one pass over the bytes, without
/// recursion, so its time grows linearly with the input whatever the nesting, and nesting cannot
/// overflow the stack. A leading byte-order mark and a top-level fragment are accepted, a repeated
/// member keeps its first value; invalid UTF-8, unescaped control characters, lone surrogates,
/// numbers out of `Double`'s range, nesting deeper than ``JSONValue/maximumNestingDepth`` and more
/// than ``JSONValue/maximumContainerCount`` arrays and objects are not accepted.
///
/// It is the one JSON reader of the package: the providers parse response bodies with it, and
/// `sesame-bench json` measures it per nesting depth and on hostile megabyte bodies.
enum JSONParser {
    /// The parsed document, or `nil` when `data` is not JSON.
    static func parse(_ data: Data) -> JSONValue? {
        data.withUnsafeBytes { raw in
            var reader = Reader(bytes: raw.bindMemory(to: UInt8.self))
            return reader.document()
        }
    }

    /// Where `data` stops being JSON, for a message to the person: the 1-based line and column
    /// (in characters) at which the reader gave up, and whether that is the end of the data (a
    /// file cut short); `nil` when `data` is JSON.
    static func failure(in data: Data) -> (line: Int, column: Int, atEnd: Bool)? {
        let offset: Int? = data.withUnsafeBytes { raw in
            var reader = Reader(bytes: raw.bindMemory(to: UInt8.self))
            return reader.document() == nil ? min(reader.index, raw.count) : nil
        }
        guard let offset else { return nil }
        let before = data.prefix(offset)
        let line = before.reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 } ?? before.startIndex
        let column = String(decoding: before[lineStart...], as: UTF8.self).count + 1
        return (line, column, offset >= data.count)
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Reads `"key" :` after an object's `{` or `,`.
        mutating func memberName() -> String? {
            skipWhitespace()
            guard current == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { return nil }
            index += 1
            skipWhitespace()
            return key
        }

        mutating func document() -> JSONValue? {
            // The open containers, innermost last: whether each is an object, and the elements
            // or members read so far. Kept in flat stacks rather than one object per container,
            // so that a document of many small containers costs no allocation beyond their
            // contents; the innermost is mutated in place.
            var isObject: [Bool] = []
            var arrays: [[JSONValue]] = []
            var objects: [[String: JSONValue]] = []
            var keys: [String] = []
            var containers = 0
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }  // a UTF-8 BOM
            skipWhitespace()
            while true {
                // Read one value, or open a container and go round to read its first value.
                guard let byte = current else { return nil }
                var value: JSONValue
                switch byte {
                case UInt8(ascii: "{"):
                    index += 1
                    containers += 1
                    guard containers <= JSONValue.maximumContainerCount else { return nil }
                    skipWhitespace()
                    if current == UInt8(ascii: "}") {
                        index += 1
                        value = .object([:])
                    } else {
                        guard isObject.count < JSONValue.maximumNestingDepth, let key = memberName() else { return nil }
                        isObject.append(true)
                        objects.append([:])
                        keys.append(key)
                        continue
                    }
                case UInt8(ascii: "["):
                    index += 1
                    containers += 1
                    guard containers <= JSONValue.maximumContainerCount else { return nil }
                    skipWhitespace()
                    if current == UInt8(ascii: "]") {
                        index += 1
                        value = .array([])
                    } else {
                        guard isObject.count < JSONValue.maximumNestingDepth else { return nil }
                        isObject.append(false)
                        arrays.append([])
                        continue
                    }
                case UInt8(ascii: "\""):
                    guard let text = string() else { return nil }
                    value = .string(text)
                case UInt8(ascii: "t"):
                    guard literal("true") else { return nil }
                    value = .bool(true)
                case UInt8(ascii: "f"):
                    guard literal("false") else { return nil }
                    value = .bool(false)
                case UInt8(ascii: "n"):
                    guard literal("null") else { return nil }
                    value = .null
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    guard let number = number() else { return nil }
                    value = .number(number)
                default:
                    return nil
                }
                // Hand the value to its container; close containers that end here.
                while true {
                    guard let inObject = isObject.last else {
                        skipWhitespace()
                        return index == bytes.count ? value : nil
                    }
                    skipWhitespace()
                    if inObject {
                        let top = objects.count - 1
                        // One hash lookup for a new member; a repeated member keeps its first value.
                        if let first = objects[top].updateValue(value, forKey: keys[top]) {
                            objects[top][keys[top]] = first
                        }
                    } else {
                        arrays[arrays.count - 1].append(value)
                    }
                    let close = UInt8(ascii: inObject ? "}" : "]")
                    if current == UInt8(ascii: ",") {
                        index += 1
                        skipWhitespace()
                        if current != close {
                            if inObject {
                                guard let next = memberName() else { return nil }
                                keys[keys.count - 1] = next
                            }
                            break
                        }
                    }
                    guard current == close else { return nil }
                    index += 1
                    isObject.removeLast()
                    if inObject {
                        keys.removeLast()
                        value = .object(objects.removeLast())
                    } else {
                        value = .array(arrays.removeLast())
                    }
                }
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func number() -> Double? {
            let start = index
            func digits(_ reader: inout Reader) -> Int {
                let first = reader.index
                while let byte = reader.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                    reader.index += 1
                }
                return reader.index - first
            }
            if current == UInt8(ascii: "-") { index += 1 }
            if current == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                return nil
            }
            var isFractional = false
            if current == UInt8(ascii: ".") {
                isFractional = true
                index += 1
                guard digits(&self) > 0 else { return nil }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                isFractional = true
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { return nil }
            }
            // A whole number of up to 15 digits is exact in a Double: no text conversion needed.
            if !isFractional, index - start <= 15 {
                var whole: Int64 = 0
                var position = start
                let negative = bytes[position] == UInt8(ascii: "-")
                if negative { position += 1 }
                while position < index {
                    whole = whole * 10 + Int64(bytes[position] - UInt8(ascii: "0"))
                    position += 1
                }
                return negative ? -Double(whole) : Double(whole)
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else { return nil }
            return value
        }

        /// Reads a string starting at its opening quote.
        mutating func string() -> String? {
            index += 1
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: utf8, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escape = current else { return nil }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        utf8.append(contentsOf: String(Character(scalar)).utf8)
                    default: return nil
                    }
                case 0..<0x20:
                    return nil
                default:
                    utf8.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let first = hex4() else { return nil }
            guard (0xD800...0xDBFF).contains(first) else { return Unicode.Scalar(first) }
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else {
                return nil
            }
            index += 2
            guard let second = hex4(), (0xDC00...0xDFFF).contains(second) else { return nil }
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        }
    }
}

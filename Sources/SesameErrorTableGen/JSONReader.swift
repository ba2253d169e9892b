/// A JSON value that remembers where it was written, so that table errors can name a line.
package struct LocatedJSON: Sendable, Equatable {
    /// The value.
    package var value: Value
    /// The 1-based line where the value starts.
    package var line: Int

    /// A JSON value. Objects keep every member in order, duplicates included, so that the
    /// validator can reject a row that names a column twice.
    package indirect enum Value: Sendable, Equatable {
        case null
        case bool(Bool)
        /// A number, with its text as written (so integers are read exactly).
        case number(String)
        case string(String)
        case array([LocatedJSON])
        case object([Member])
    }

    /// One member of an object.
    package struct Member: Sendable, Equatable {
        package var key: String
        package var value: LocatedJSON
    }

    /// A short name for the kind of value, for messages ("a string", "an array").
    package var kindName: String {
        switch value {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A place in the JSON text where it stopped being JSON.
package struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The 1-based line.
    package var line: Int
    /// The 1-based column, in bytes.
    package var column: Int
    /// What was wrong.
    package var reason: String

    package var description: String { "line \(line), column \(column): \(reason)" }
}

/// A strict RFC 8259 reader that keeps line numbers and duplicate keys.
package struct JSONReader {
    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0
    private var depth = 0
    private static let maxDepth = 64

    /// Reads `bytes` as one JSON document.
    package static func read(_ bytes: [UInt8]) throws(JSONSyntaxError) -> LocatedJSON {
        var reader = JSONReader(bytes: bytes)
        reader.skipWhitespace()
        let value = try reader.readValue()
        reader.skipWhitespace()
        guard reader.index == bytes.count else { throw reader.failure("unexpected text after the JSON document") }
        return value
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private func failure(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(line: line, column: index - lineStart + 1, reason: reason)
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\n"):
                index += 1
                line += 1
                lineStart = index
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                index += 1
            default:
                return
            }
        }
    }

    private mutating func readValue() throws(JSONSyntaxError) -> LocatedJSON {
        let startLine = line
        guard let byte = current else { throw failure("the JSON ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return LocatedJSON(value: try readObject(), line: startLine)
        case UInt8(ascii: "["): return LocatedJSON(value: try readArray(), line: startLine)
        case UInt8(ascii: "\""): return LocatedJSON(value: .string(try readString()), line: startLine)
        case UInt8(ascii: "t"):
            try expectWord("true")
            return LocatedJSON(value: .bool(true), line: startLine)
        case UInt8(ascii: "f"):
            try expectWord("false")
            return LocatedJSON(value: .bool(false), line: startLine)
        case UInt8(ascii: "n"):
            try expectWord("null")
            return LocatedJSON(value: .null, line: startLine)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return LocatedJSON(value: .number(try readNumber()), line: startLine)
        default:
            throw failure("unexpected character '\(Character(Unicode.Scalar(byte)))' where a value was expected")
        }
    }

    private mutating func expectWord(_ word: String) throws(JSONSyntaxError) {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count, Array(bytes[index..<index + expected.count]) == expected else {
            throw failure("expected '\(word)'")
        }
        index += expected.count
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure("nested more than \(Self.maxDepth) levels deep") }
    }

    private mutating func readObject() throws(JSONSyntaxError) -> LocatedJSON.Value {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [LocatedJSON.Member] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure("expected a member name in double quotes") }
            let key = try readString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':' after the member name \"\(key)\"") }
            index += 1
            skipWhitespace()
            members.append(LocatedJSON.Member(key: key, value: try readValue()))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw failure("expected ',' or '}' after the value of \"\(key)\"")
            }
        }
    }

    private mutating func readArray() throws(JSONSyntaxError) -> LocatedJSON.Value {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [LocatedJSON] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try readValue())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw failure("expected ',' or ']' after an array element")
            }
        }
    }

    private mutating func readNumber() throws(JSONSyntaxError) -> String {
        let start = index
        func digits(_ reader: inout JSONReader) -> Int {
            var count = 0
            while let byte = reader.current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                reader.index += 1
                count += 1
            }
            return count
        }
        if current == UInt8(ascii: "-") { index += 1 }
        if current == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw failure("expected a digit")
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw failure("expected a digit after the decimal point") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw failure("expected a digit in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func readString() throws(JSONSyntaxError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flush(_ run: inout [UInt8], into scalars: inout String.UnicodeScalarView) {
            scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
            run.removeAll(keepingCapacity: true)
        }
        while true {
            guard let byte = current else { throw failure("the JSON ends inside a string") }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                flush(&run, into: &scalars)
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush(&run, into: &scalars)
                index += 1
                guard let escape = current else { throw failure("the JSON ends inside a string") }
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"): scalars.append(try readUnicodeEscape())
                default: throw failure("unknown escape '\\\(Character(Unicode.Scalar(escape)))' in a string")
                }
            case 0..<0x20:
                throw failure("a control character (a raw line break?) inside a string; write it as an escape")
            default:
                run.append(byte)
                index += 1
            }
        }
    }

    private mutating func readHex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count,
            let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { throw failure("expected four hexadecimal digits after '\\u'") }
        index += 4
        return value
    }

    private mutating func readUnicodeEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        let first = try readHex4()
        if (0xD800...0xDBFF).contains(first) {
            guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("a lone high surrogate '\\u\(String(first, radix: 16))' in a string")
            }
            index += 2
            let second = try readHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw failure("an invalid surrogate pair in a string") }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw failure("an invalid surrogate pair in a string") }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else {
            throw failure("a lone surrogate '\\u\(String(first, radix: 16))' in a string")
        }
        return scalar
    }
}

import Foundation

/// A parsed JSON document, kept as a value so that it can travel inside `Sendable` errors.
///
/// Provider error bodies are arbitrary JSON; ``AuthError`` keeps the parsed body so that an app
/// can look deeper than Sesame does (the Facebook SDK's `com.facebook.sdk:ParsedJSONResponseKey`).
public enum JSONValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The deepest nesting of arrays and objects that ``init(parsing:)`` accepts: 128. A deeper
    /// document is refused (`nil`), as no provider sends one and only an attacker would.
    public static let maximumNestingDepth = 128

    /// The most arrays and objects (empty ones included) that ``init(parsing:)`` accepts in one
    /// document: 100,000. Each is a heap allocation of its own, so a megabyte made of hundreds of
    /// thousands of tiny containers (`[[[[1]]]],…`) would cost far more than its size suggests; the
    /// largest answers providers send (a Graph page of 5,000 objects with nested fields, a GitHub
    /// list of 100) hold a small fraction of this.
    public static let maximumContainerCount = 100_000

    /// Parses `data` as JSON (a bare string, number or `null` is accepted too); `nil` when it is
    /// not JSON, nests deeper than ``maximumNestingDepth`` or holds more than
    /// ``maximumContainerCount`` arrays and objects. Never throws and never traps, whatever the
    /// bytes, and reads them in one linear pass: a megabyte is parsed or refused in milliseconds,
    /// whatever its shape.
    public init?(parsing data: Data) {
        guard let value = JSONParser.parse(data) else { return nil }
        self = value
    }

    /// Where `data` stops being JSON (1-based line and column, and whether it ends there, as a
    /// file cut short does), for a message that says where to look; `nil` when it is JSON.
    package static func syntaxError(in data: Data) -> (line: Int, column: Int, atEnd: Bool)? {
        JSONParser.failure(in: data)
    }

    /// Decodes any JSON value. Each value is decoded once: the container kind is asked for
    /// first, so a subtree is never decoded twice (trying each type in turn with `try?` made
    /// decoding time cubic in the nesting depth).
    public init(from decoder: any Decoder) throws {
        if var elements = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            if let count = elements.count { values.reserveCapacity(count) }
            while !elements.isAtEnd { values.append(try elements.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let members = try? decoder.container(keyedBy: MemberKey.self) {
            var values: [String: JSONValue] = [:]
            for key in members.allKeys { values[key.stringValue] = try members.decode(JSONValue.self, forKey: key) }
            self = .object(values)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    /// An object member's name, any string.
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member named `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` when this is an array and the index is in range.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, when this is a number.
    public var doubleValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The Boolean, when this is a Boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The members, when this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// An integer read leniently: a whole number, or a string or float that holds one
    /// (providers send codes as `190`, `"190"` and `190.0`).
    public var lenientInt: Int? {
        switch self {
        case .number(let value):
            guard value.isFinite, value.rounded() == value, abs(value) < 1e15 else { return nil }
            return Int(value)
        case .string(let value):
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            if let int = Int(trimmed) { return int }
            if let double = Double(trimmed) { return JSONValue.number(double).lenientInt }
            return nil
        default: return nil
        }
    }

    /// Compact JSON text with sorted keys: no white space, `/` not escaped, U+2028 and U+2029
    /// escaped, whole numbers below 10^15 without a decimal point, and `null` for a number that
    /// is not finite.
    public var jsonText: String { String(decoding: JSONWriter.bytes(self), as: UTF8.self) }

    public var description: String { jsonText }
}

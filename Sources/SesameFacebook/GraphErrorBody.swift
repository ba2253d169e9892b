import Foundation
import Sesame

/// What the body of a failed Graph API response held, read leniently.
///
/// Reading never fails: every byte sequence becomes a ``Kind`` and whatever fields could be
/// found. Codes are read from `190`, `"190"` or `190.0`; a code that is not a whole number is
/// treated as missing. Strings taken from the body are cut to ``maximumTextLength`` characters
/// and have anything that looks like an access token replaced.
public struct GraphErrorBody: Sendable, Hashable {
    /// The shape of the body.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// `{"error": {...}}`, the Graph API's error envelope.
        case errorObject
        /// `{"error": "invalid_token", "error_description": ...}`: an OAuth-style error.
        case errorString
        /// `{"error": [...]}`: the first object in the array is read as the error.
        case errorArray
        /// `{"error_code": 190, "error_msg": ...}`: the legacy REST API's top-level fields.
        case restStyle
        /// JSON with no error in it (`{}`, an array, a number, a string).
        case noError
        /// The JSON literal `null`.
        case null
        /// No bytes, or only white space.
        case empty
        /// An HTML or XML page (a proxy's or load balancer's error page).
        case html
        /// Text that is not JSON.
        case text
        /// Text that starts like JSON but is cut off or malformed.
        case malformedJSON
        /// More bytes than the reader will parse.
        case tooLarge
    }

    /// The longest string taken from a body; longer ones are cut and end with "…".
    public static let maximumTextLength = 1000

    /// The shape of the body.
    public var kind: Kind
    /// The parsed body, when it was JSON.
    public var json: JSONValue?
    /// `error.code` (or the top-level `error_code`).
    public var code: Int?
    /// `error.error_subcode`.
    public var subcode: Int?
    /// `error.type`, such as `OAuthException`.
    public var type: String?
    /// `error.message`, for developers (or `error_description`, `error_msg`, `error_reason`).
    public var message: String?
    /// `error.error_user_title`, when not blank.
    public var userTitle: String?
    /// `error.error_user_msg`, when not blank.
    public var userMessage: String?
    /// `error.is_transient` (a Boolean, `0`/`1` or `"true"`/`"false"`).
    public var isTransient: Bool?
    /// `error.fbtrace_id`.
    public var traceID: String?
    /// The string `error` of an OAuth-style body, such as `invalid_token`.
    public var errorIdentifier: String?
    /// The body's size in bytes.
    public var byteCount: Int

    /// Reads `data`; bodies larger than `maximumSize` bytes are not parsed (``Kind/tooLarge``).
    public init(_ data: Data, maximumSize: Int = 8 << 20) {
        byteCount = data.count
        kind = .noError
        guard data.count <= maximumSize else {
            kind = .tooLarge
            return
        }
        let content = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data[...]
        guard let first = content.first(where: { !Self.isWhitespace($0) }) else {
            kind = .empty
            return
        }
        guard let json = JSONValue(parsing: data) else {
            switch first {
            case UInt8(ascii: "<"): kind = .html
            case UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\""): kind = .malformedJSON
            default: kind = .text
            }
            return
        }
        self.json = json
        guard case .object(let top) = json else {
            kind = json == .null ? .null : .noError
            return
        }
        switch top["error"] {
        case .object(let error)?:
            kind = .errorObject
            read(error)
        case .array(let elements)?:
            kind = .errorArray
            if let error = elements.lazy.compactMap(\.objectValue).first { read(error) }
        case .string(let identifier)?:
            kind = .errorString
            errorIdentifier = Self.text(identifier)
            readTopLevel(top)
        default:
            if top["error_code"] != nil || top["error_msg"] != nil {
                kind = .restStyle
                readTopLevel(top)
            }
        }
    }

    private mutating func read(_ error: [String: JSONValue]) {
        code = error["code"]?.lenientInt
        subcode = error["error_subcode"]?.lenientInt
        type = error["type"]?.stringValue.flatMap(Self.text)
        message = (error["message"] ?? error["error_msg"])?.stringValue.flatMap(Self.text)
        userTitle = error["error_user_title"]?.stringValue.flatMap(Self.text)
        userMessage = error["error_user_msg"]?.stringValue.flatMap(Self.text)
        isTransient = error["is_transient"].flatMap(Self.lenientBool)
        traceID = error["fbtrace_id"]?.stringValue.flatMap(Self.text)
    }

    private mutating func readTopLevel(_ top: [String: JSONValue]) {
        code = top["error_code"]?.lenientInt
        subcode = top["error_subcode"]?.lenientInt
        message = (top["error_description"] ?? top["error_msg"] ?? top["error_reason"])?.stringValue.flatMap(Self.text)
        userTitle = top["error_user_title"]?.stringValue.flatMap(Self.text)
        userMessage = top["error_user_msg"]?.stringValue.flatMap(Self.text)
        isTransient = top["is_transient"].flatMap(Self.lenientBool)
        traceID = top["fbtrace_id"]?.stringValue.flatMap(Self.text)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func lenientBool(_ value: JSONValue) -> Bool? {
        switch value {
        case .bool(let flag): return flag
        case .number(let number) where number == 0 || number == 1: return number == 1
        case .string(let text):
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default: return nil
            }
        default: return nil
        }
    }

    /// A string from the body, fit to show: not blank, at most ``maximumTextLength``
    /// characters, with anything that looks like an access token redacted.
    static func text(_ raw: String) -> String? {
        var raw = Substring(raw)
        if raw.utf8.count > 4 * maximumTextLength + 64 {
            // Only the start can be kept; do not walk megabytes of characters to find that out.
            raw = raw.drop { $0.isWhitespace }.prefix(maximumTextLength + 8)
        }
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        var text = trimmed.count > maximumTextLength ? String(trimmed.prefix(maximumTextLength)) + "…" : trimmed
        text = redactingTokens(text)
        return text
    }

    /// Replaces Facebook access tokens (`EAA…`, with any `-` or `_` in them, as other token
    /// issuers and the emulator use) and `access_token=` values in `text`.
    static func redactingTokens(_ text: String) -> String {
        guard text.contains("EAA") || text.contains("access_token") else { return text }
        func isTokenCharacter(_ character: Character) -> Bool {
            (character.isASCII && (character.isLetter || character.isNumber)) || character == "-" || character == "_"
        }
        var output = ""
        var rest = Substring(text)
        while !rest.isEmpty {
            if rest.hasPrefix("access_token=") {
                output += "access_token=" + Redaction.placeholder
                rest = rest.dropFirst("access_token=".count).drop { !$0.isWhitespace && $0 != "&" && $0 != "\"" }
            } else if rest.hasPrefix("EAA"), rest.prefix(while: isTokenCharacter).count >= 20 {
                output += Redaction.placeholder
                rest = rest.drop(while: isTokenCharacter)
            } else {
                output.append(rest.removeFirst())
            }
        }
        return output
    }
}

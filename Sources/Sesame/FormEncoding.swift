import Foundation

/// `application/x-www-form-urlencoded`, as OAuth uses it.
public enum FormEncoding {
    /// Encodes name-value pairs in order.
    public static func encode(_ items: [(String, String)]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(estimatedCount(of: items))
        append(items, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The encoded length of `items` when nothing in them needs escaping.
    static func estimatedCount(of items: [(String, String)]) -> Int {
        items.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 }
    }

    /// Appends `items`, encoded, to `bytes`.
    static func append(_ items: [(String, String)], to bytes: inout [UInt8]) {
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: "&")) }
            append(item.0, to: &bytes)
            bytes.append(UInt8(ascii: "="))
            append(item.1, to: &bytes)
        }
    }

    /// Percent-encodes everything but the unreserved characters (`A–Z a–z 0–9 - . _ ~`), byte
    /// by byte of the UTF-8, with upper-case hex digits.
    public static func escape(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        append(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func append(_ text: String, to bytes: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
    }

    /// Decodes a form body or query string; `+` is a space; pairs that do not decode are kept
    /// as they came.
    public static func decode(_ text: String) -> [(String, String)] {
        text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
            guard let equals = pair.firstIndex(of: UInt8(ascii: "=")) else { return (unescape(pair), "") }
            return (unescape(pair[..<equals]), unescape(pair[pair.index(after: equals)...]))
        }
    }

    /// One name or value: `+` is a space and `%XX` a byte. When a `%` is not followed by two hex
    /// digits, or the bytes are not UTF-8, only the `+`s are replaced (the text is kept as it came).
    private static func unescape(_ text: Substring.UTF8View) -> String {
        guard text.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else {
            return String(Substring(text))
        }
        let spaced = text.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }
        return percentDecoded(spaced) ?? String(decoding: spaced, as: UTF8.self)
    }

    /// `text` with each `%XX` replaced by its byte, as Foundation's `removingPercentEncoding`
    /// does (`+` stays `+`): `nil` when a `%` is not followed by two hex digits or the bytes are
    /// not UTF-8. Byte by byte: Foundation's took most of what a small request cost the emulator.
    public static func percentDecoded(_ text: String) -> String? {
        var text = text
        return text.withUTF8 { percentDecoded($0) }
    }

    private static func percentDecoded(_ bytes: some Collection<UInt8>) -> String? {
        guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            index = bytes.index(after: index)
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                continue
            }
            guard index != bytes.endIndex, let high = hexValue(bytes[index]) else { return nil }
            index = bytes.index(after: index)
            guard index != bytes.endIndex, let low = hexValue(bytes[index]) else { return nil }
            index = bytes.index(after: index)
            decoded.append(high << 4 | low)
        }
        return String(validating: decoded, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Decodes a form body.
    public static func decode(_ data: Data) -> [(String, String)] { decode(String(decoding: data, as: UTF8.self)) }
}

// MARK: - Renderings without secrets (`print`, `String(reflecting:)`, `dump`)

import Foundation

/// Splits a comma- or space-separated list (`scope`, `permissions`, `fields`), dropping empties.
package func splitList(_ text: String?) -> [String] {
    guard let text else { return [] }
    return text.split(whereSeparator: { $0 == "," || $0 == " " }).map {
        $0.trimmedASCII
    }.filter { !$0.isEmpty }
}

/// Form encoding with `+` for spaces, as some providers write their redirect parameters
/// (`error_description=Permissions+error`).
package enum FormWriter {
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~ ")

    package static func encode(_ items: [(String, String)]) -> String {
        items.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    package static func escape(_ text: String) -> String {
        (text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "").replacingOccurrences(of: " ", with: "+")
    }

    /// `base` with `items` added to its query (or its fragment when `inFragment`).
    package static func appending(_ items: [(String, String)], to base: String, inFragment: Bool = false) -> String {
        var text = base
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        let encoded = encode(items)
        if inFragment { return text + "#" + encoded }
        let separator = text.contains("?") ? (text.hasSuffix("?") || text.hasSuffix("&") ? "" : "&") : "?"
        return text + separator + encoded
    }
}

extension StringProtocol {
    /// The text without leading and trailing ASCII spaces, tabs and line breaks. Much cheaper than
    /// Foundation's `trimmingCharacters(in:)` on Linux, and enough for HTTP and form values.
    package var trimmedASCII: String {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        // Native strings and their slices are contiguous UTF-8: the ends are found by offset, with
        // no index arithmetic per byte (a 200-byte bearer token was a tenth of a GET /me).
        let contiguous = utf8.withContiguousStorageIfAvailable { bytes -> String in
            var lower = 0
            var upper = bytes.count
            while lower < upper, isSpace(bytes[lower]) { lower += 1 }
            while upper > lower, isSpace(bytes[upper - 1]) { upper -= 1 }
            // The bounds are next to ASCII bytes, so the slice is whole characters.
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[lower..<upper]), as: UTF8.self)
        }
        if let contiguous { return contiguous }
        let bytes = utf8
        var start: String.Index?
        var end = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let next = bytes.index(after: index)
            if !isSpace(bytes[index]) {
                if start == nil { start = index }
                end = next
            }
            index = next
        }
        guard let start else { return "" }
        // The bounds are next to ASCII bytes, so they are character boundaries.
        return String(self[start..<end])
    }
}

extension String {
    package func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }

    package func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

import Foundation
import Sesame
import SesameEmulator

/// The permissions the emulator's dialog knows, with the words it shows for each.
enum PermissionCatalogue {
    static let descriptions: [String: String] = [
        "public_profile": "your name and profile picture",
        "email": "your email address",
        "user_friends": "your friends list",
        "user_birthday": "your birthday",
        "user_hometown": "your hometown",
        "user_location": "your current city",
        "user_likes": "the Pages you like",
        "user_photos": "your photos",
        "user_videos": "your videos",
        "user_posts": "the posts on your timeline",
        "user_gender": "your gender",
        "user_link": "your profile link",
        "user_age_range": "your age range",
        "user_events": "your events",
        "publish_actions": "post to Facebook as you",
        "publish_to_groups": "post to groups as you",
        "pages_show_list": "the list of Pages you manage",
        "pages_read_engagement": "the content of Pages you manage",
        "pages_manage_posts": "create and manage posts on Pages you manage",
        "read_insights": "the Insights of Pages you manage",
        "business_management": "the businesses you manage",
    ]

    /// Permissions that let the app act for the person; the dialog asks for an audience with them.
    static let publish: Set<String> = ["publish_actions", "publish_to_groups", "pages_manage_posts"]

    /// The permission `POST /me/feed` needs.
    static let publishPermission = "publish_actions"

    static func isKnown(_ name: String) -> Bool { descriptions[name] != nil }

    /// The requested names, checked: `public_profile` first, repeats removed.
    ///
    /// - Throws: ``GraphError`` naming the permissions the emulator does not know.
    static func checked(_ names: [String]) throws -> [String] {
        let unknown = names.filter { !isKnown($0) }
        guard unknown.isEmpty else {
            throw GraphError.invalidParameter("Invalid Scopes: \(unknown.joined(separator: ", "))")
        }
        var result = ["public_profile"]
        for name in names where !result.contains(name) { result.append(name) }
        return result
    }
}

/// A `fields` parameter: its entries, each a name with any `{…}` sub-fields and `.modifier(…)`s
/// (field expansion: `picture{url}`, `feed.limit(5){message}`).
struct FieldList {
    /// One entry of the list.
    struct Entry {
        var name: String
        /// The text between the entry's braces, when it has any.
        var subfields: String?
        /// `.limit(5)` is `["limit": "5"]`.
        var modifiers: [String: String] = [:]

        /// `.limit(n)`, checked, or `nil` when there is none.
        func limit() throws -> Int? {
            guard let text = modifiers["limit"] else { return nil }
            guard let value = Int(text.trimmedASCII), value >= 0 else {
                throw GraphError.invalidParameter("limit(\(text)) in the fields parameter is not a whole number.")
            }
            return value
        }

        /// Reads one entry: a name, then `.modifier(value)`s and at most one `{…}`, in any order.
        static func parse(_ text: Substring) throws -> Entry {
            // Most entries are a bare name (`fields=id,name,email`).
            if !text.utf8.contains(where: {
                $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "(")
            }) {
                return Entry(name: text.trimmedASCII)
            }
            let syntax = GraphError.invalidParameter("Syntax error in the fields parameter near '\(text.prefix(80))'.")
            let characters = Array(text)
            var index = characters.firstIndex { "{.(".contains($0) } ?? characters.count
            var entry = Entry(name: String(characters[..<index]).trimmedASCII)
            /// The text up to the bracket that closes the one at `index`, and where it ends.
            func enclosed(open: Character, close: Character) throws -> String {
                var depth = 0
                var end = index
                while end < characters.count {
                    if characters[end] == open { depth += 1 }
                    if characters[end] == close {
                        depth -= 1
                        if depth == 0 { break }
                    }
                    end += 1
                }
                guard end < characters.count else { throw syntax }
                defer { index = end + 1 }
                return String(characters[(index + 1)..<end])
            }
            while index < characters.count {
                switch characters[index] {
                case "{":
                    guard entry.subfields == nil else { throw syntax }
                    entry.subfields = try enclosed(open: "{", close: "}")
                case ".":
                    let nameStart = index + 1
                    guard let open = characters[nameStart...].firstIndex(of: "(") else { throw syntax }
                    let name = String(characters[nameStart..<open]).trimmedASCII
                    guard !name.isEmpty else { throw syntax }
                    index = open
                    entry.modifiers[name] = try enclosed(open: "(", close: ")")
                case " ", "\t", "\n", "\r": index += 1
                default: throw syntax
                }
            }
            return entry
        }
    }

    var entries: [Entry]

    /// The entries' names, in order.
    var names: [String] { entries.map(\.name) }

    init(names: [String]) { entries = names.map { Entry(name: $0) } }
    init(entries: [Entry]) { self.entries = entries }

    /// `text` read as a list of bare names (`id,name,email`), or `nil` when it has an entry with
    /// sub-fields or modifiers (a `{`, `}`, `(`, `)` or `.`), which ``parse(_:defaults:limit:)``
    /// reads. Without those, that parser splits at every comma and trims each name: this does
    /// the same on the text's bytes at once, for the list nearly every call sends.
    ///
    /// - Throws: ``GraphError`` when there are more than `limit` names, as the parser does.
    static func parseNames(_ text: String, limit: Int) throws(GraphError) -> FieldList? {
        func marksEntry(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "{") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "(")
                || byte == UInt8(ascii: ")") || byte == UInt8(ascii: ".")
        }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        var text = text
        let split = text.withUTF8 { bytes -> [Entry]? in
            guard !bytes.contains(where: marksEntry) else { return nil }
            var entries: [Entry] = []
            var start = 0
            // Each piece between commas, trimmed of ASCII spaces and line breaks. The bounds are
            // next to ASCII bytes, so each name is whole characters.
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: ",") {
                var lower = start
                var upper = index
                while lower < upper, isSpace(bytes[lower]) { lower += 1 }
                while upper > lower, isSpace(bytes[upper - 1]) { upper -= 1 }
                if lower < upper {
                    let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[lower..<upper]), as: UTF8.self)
                    entries.append(Entry(name: name))
                }
                start = index + 1
            }
            return entries
        }
        guard let entries = split else { return nil }
        guard entries.count <= limit else {
            throw GraphError.invalidParameter("Too many fields (the emulator accepts \(limit)).")
        }
        return FieldList(entries: entries)
    }

    /// Parses `fields`, splitting at top-level commas only.
    static func parse(_ text: String?, defaults: [String], limit: Int) throws -> FieldList {
        guard let text, !text.trimmedASCII.isEmpty else { return FieldList(names: defaults) }
        var entries: [Entry] = []
        var depth = 0
        var start = text.utf8.startIndex
        // The name ends at the first `{`, `.` or `(` of its entry.
        var nameEnd: String.Index?
        func finish(_ end: String.Index) throws {
            let name = String(text[start..<(nameEnd ?? end)]).trimmedASCII
            if !name.isEmpty { entries.append(try Entry.parse(text[start..<end])) }
        }
        var index = text.utf8.startIndex
        while index < text.utf8.endIndex {
            let byte = text.utf8[index]
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "("):
                if depth == 0, nameEnd == nil { nameEnd = index }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: ")"):
                depth -= 1
                guard depth >= 0 else { throw GraphError.invalidParameter("Syntax error in the fields parameter.") }
            case UInt8(ascii: ".") where depth == 0:
                if nameEnd == nil { nameEnd = index }
            case UInt8(ascii: ",") where depth == 0:
                try finish(index)
                start = text.utf8.index(after: index)
                nameEnd = nil
            default: break
            }
            index = text.utf8.index(after: index)
        }
        guard depth == 0 else { throw GraphError.invalidParameter("Syntax error in the fields parameter.") }
        try finish(text.utf8.endIndex)
        guard entries.count <= limit else {
            throw GraphError.invalidParameter("Too many fields (the emulator accepts \(limit)).")
        }
        return FieldList(entries: entries)
    }
}

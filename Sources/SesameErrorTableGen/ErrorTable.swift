/// A provider's error table as read from its data file, every row checked.
///
/// The file is a JSON object: `{"description": "...", "rows": [ {...}, ... ]}`. Rows are tried
/// in order and the first that matches an error classifies it. See ``ErrorTableSchema`` for the
/// columns.
package struct ErrorTable: Sendable, Equatable {
    /// The Swift name of the generated type (the file's base name, such as `GraphErrors`).
    package var name: String
    /// What the table is, from the file's `description`.
    package var description: String?
    /// The rows, in order.
    package var rows: [Row]

    /// One checked row.
    package struct Row: Sendable, Equatable {
        /// The row's 1-based position in `rows`.
        package var number: Int
        /// The line in the data file where the row starts.
        package var line: Int
        package var id: String
        package var code: IntPattern
        package var subcode: IntPattern
        package var status: IntPattern
        package var error: [String]?
        package var transient: Bool?
        package var category: String
        package var tactic: String
        package var notify: Bool
        package var closesSession: Bool
        package var silentReauthentication: Bool
        package var messageKey: String?
        package var title: String?
        package var message: String?
        package var meaning: String
        package var source: String

        /// Whether the row has no condition at all, so it matches every error.
        package var matchesEverything: Bool {
            code == .any && subcode == .any && status == .any && error == nil && transient == nil
        }

        /// Whether every error this row matches is also matched by `earlier`, so that this row,
        /// placed after it, could never be chosen.
        package func isHidden(by earlier: Row) -> Bool {
            earlier.code.covers(code) && earlier.subcode.covers(subcode) && earlier.status.covers(status)
                && (earlier.error.map { names in error.map { Set($0).isSubset(of: names) } ?? false } ?? true)
                && (earlier.transient.map { $0 == transient } ?? true)
        }
    }
}

/// A condition on an integer column: `*` (anything), `none` (no value), or a list of values
/// and ranges such as `"10, 200-299"`.
package enum IntPattern: Sendable, Equatable, CustomStringConvertible {
    case any
    case absent
    case ranges([ClosedRange<Int>])

    /// Reads the pattern syntax; `nil` with a reason when it is not one.
    package static func parse(_ text: String) -> Result<IntPattern, PatternError> {
        let trimmed = text.trimmingSpaces
        if trimmed == "*" { return .success(.any) }
        if trimmed == "none" { return .success(.absent) }
        var ranges: [ClosedRange<Int>] = []
        for piece in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let item = String(piece).trimmingSpaces
            let bounds = item.split(separator: "-", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
            guard (1...2).contains(bounds.count), bounds.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCIIDigit) })
            else {
                return .failure(
                    PatternError(
                        "'\(item)' in \"\(text)\" is not a number or a range such as 200-299 "
                            + "(write \"*\" for any value, \"none\" for no value)"))
            }
            guard let low = Int(bounds[0]), let high = Int(bounds[bounds.count - 1]), high <= 999_999_999_999 else {
                return .failure(PatternError("'\(item)' in \"\(text)\" is too large"))
            }
            guard low <= high else {
                return .failure(
                    PatternError("the range \(low)-\(high) in \"\(text)\" runs backwards; write \(high)-\(low)"))
            }
            ranges.append(low...high)
        }
        return .success(.ranges(ranges))
    }

    /// Whether `self` matches every value (or absence) that `other` matches.
    package func covers(_ other: IntPattern) -> Bool {
        switch (self, other) {
        case (.any, _): return true
        case (.absent, .absent): return true
        case (.ranges(let mine), .ranges(let theirs)):
            let merged = IntPattern.merge(mine)
            return theirs.allSatisfy { range in
                merged.contains { $0.contains(range.lowerBound) && $0.contains(range.upperBound) }
            }
        default: return false
        }
    }

    private static func merge(_ ranges: [ClosedRange<Int>]) -> [ClosedRange<Int>] {
        var merged: [ClosedRange<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, range.lowerBound <= last.upperBound + 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    package var description: String {
        switch self {
        case .any: "*"
        case .absent: "none"
        case .ranges(let ranges):
            ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }
                .joined(separator: ",")
        }
    }
}

/// Why a pattern could not be read.
package struct PatternError: Error, Sendable, Equatable {
    package var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// The columns of an error table and the names they accept.
package enum ErrorTableSchema {
    /// `ErrorCategory` case names in the Sesame core, in declaration order.
    package static let categories = [
        "invalid", "retry", "authenticationReopenSession", "permissions", "server", "throttling", "userCancelled",
        "providerOther", "badRequest",
    ]

    /// `RecoveryTactic` case names in the Sesame core, in declaration order.
    package static let tactics = [
        "none", "reauthenticate", "requestPermissions", "retry", "retryAfterBackoff", "showMessage",
    ]

    /// Every column a row may have, with whether it is required and what it holds.
    package static let columns: [(name: String, required: Bool, meaning: String)] = [
        ("id", true, "a name for the row, unique in the table: letters, digits, '.', '_' and '-'"),
        ("code", false, "the error code: \"*\" (the default), \"none\", or values and ranges such as \"10, 200-299\""),
        ("subcode", false, "the error subcode, written like code"),
        ("status", false, "the HTTP status, written like code"),
        ("error", false, "a string error identifier (OAuth's `error`), or an array of them"),
        ("transient", false, "the provider's transient flag (an absent flag counts as false)"),
        ("category", true, "an ErrorCategory case name: \(categories.joined(separator: ", "))"),
        ("tactic", true, "a RecoveryTactic case name: \(tactics.joined(separator: ", "))"),
        ("notify", true, "whether the person must be shown the message"),
        ("closesSession", true, "whether the error ends the session and clears its stored token"),
        ("silentReauthentication", false, "false when the app must not log in again without the person (default true)"),
        ("messageKey", false, "the key a host uses to replace the message; required with message"),
        ("title", false, "a default title for the person"),
        ("message", false, "the default message for the person; required when notify is true"),
        ("meaning", true, "what the error means, for developers"),
        ("source", true, "where the rule comes from: a documentation page or SDK source"),
        ("comment", false, "a note for readers of the table; ignored"),
    ]
}

/// One problem found in an error table, located as precisely as possible.
package struct ErrorTableDiagnostic: Sendable, Equatable, CustomStringConvertible {
    /// The data file.
    package var file: String
    /// The 1-based line, when known.
    package var line: Int?
    /// The 1-based row number, when the problem is in a row.
    package var row: Int?
    /// The row's id, when it has a readable one.
    package var rowID: String?
    /// What is wrong and how to fix it.
    package var message: String

    /// `file:line: error: row N ('id'): message`, the form compilers use, so that IDEs and
    /// build logs point at the line.
    package var description: String {
        var text = file
        if let line { text += ":\(line)" }
        text += ": error: "
        if let row {
            text += "row \(row)"
            if let rowID { text += " ('\(rowID)')" }
            text += ": "
        }
        return text + message
    }
}

/// An error table that could not be read: every problem found, in file order.
package struct ErrorTableError: Error, Sendable, Equatable, CustomStringConvertible {
    package var diagnostics: [ErrorTableDiagnostic]
    package var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

extension ErrorTable {
    /// Reads and checks a table.
    ///
    /// - Parameters:
    ///   - bytes: the file's contents.
    ///   - file: the file's path, for messages; its base name becomes the table's ``name``.
    /// - Throws: ``ErrorTableError`` listing every malformed row and what is wrong with it.
    package static func read(_ bytes: [UInt8], file: String) throws(ErrorTableError) -> ErrorTable {
        var checker = TableChecker(file: file)
        let table = checker.check(bytes)
        guard checker.diagnostics.isEmpty, let table else { throw ErrorTableError(diagnostics: checker.diagnostics) }
        return table
    }

    /// The Swift type name for a data file: its base name without `.json`.
    package static func typeName(forFile file: String) -> String {
        var base = String(file.split(separator: "/").last ?? Substring(file))
        if base.hasSuffix(".json") { base.removeLast(5) }
        return base
    }
}

private struct TableChecker {
    let file: String
    var diagnostics: [ErrorTableDiagnostic] = []

    init(file: String) { self.file = file }

    mutating func fail(line: Int?, row: Int? = nil, id: String? = nil, _ message: String) {
        diagnostics.append(ErrorTableDiagnostic(file: file, line: line, row: row, rowID: id, message: message))
    }

    mutating func check(_ bytes: [UInt8]) -> ErrorTable? {
        let name = ErrorTable.typeName(forFile: file)
        if !name.isSwiftIdentifier {
            fail(
                line: nil,
                "the file name '\(name)' must be a Swift type name (letters, digits and '_', not starting with a digit), "
                    + "because the generated type is named after it")
        }
        let document: LocatedJSON
        do {
            document = try JSONReader.read(bytes)
        } catch {
            fail(line: error.line, "this is not valid JSON (\(error.reason), column \(error.column))")
            return nil
        }
        guard case .object(let members) = document.value else {
            fail(
                line: document.line, "the table must be a JSON object with a \"rows\" array; found \(document.kindName)"
            )
            return nil
        }
        var description: String?
        var rowsValue: LocatedJSON?
        for member in duplicatesReported(members, line: document.line, row: nil, id: nil) {
            switch member.key {
            case "description":
                guard case .string(let text) = member.value.value else {
                    fail(line: member.value.line, "\"description\" must be a string")
                    continue
                }
                description = text
            case "rows": rowsValue = member.value
            default:
                fail(
                    line: member.value.line,
                    "unknown top-level key \"\(member.key)\"; the table has \"description\" and \"rows\"")
            }
        }
        guard let rowsValue else {
            fail(line: document.line, "the table has no \"rows\" array")
            return nil
        }
        guard case .array(let rowValues) = rowsValue.value, !rowValues.isEmpty else {
            fail(line: rowsValue.line, "\"rows\" must be a non-empty array of row objects")
            return nil
        }
        var rows: [ErrorTable.Row] = []
        for (offset, value) in rowValues.enumerated() {
            if let row = checkRow(value, number: offset + 1) { rows.append(row) }
        }
        guard rows.count == rowValues.count else { return nil }
        checkAcrossRows(rows)
        return ErrorTable(name: name, description: description, rows: rows)
    }

    mutating func duplicatesReported(
        _ members: [LocatedJSON.Member], line: Int, row: Int?, id: String?
    )
        -> [LocatedJSON.Member]
    {
        var seen: Set<String> = []
        var unique: [LocatedJSON.Member] = []
        for member in members {
            if seen.insert(member.key).inserted {
                unique.append(member)
            } else {
                fail(
                    line: member.value.line, row: row, id: id,
                    "\"\(member.key)\" is given twice; JSON readers would keep only one of them silently")
            }
        }
        return unique
    }

    mutating func checkRow(_ value: LocatedJSON, number: Int) -> ErrorTable.Row? {
        guard case .object(let allMembers) = value.value else {
            fail(line: value.line, row: number, "a row must be an object; found \(value.kindName)")
            return nil
        }
        let before = diagnostics.count
        let rawID: String? = allMembers.first { $0.key == "id" }.flatMap {
            if case .string(let id) = $0.value.value { id } else { nil }
        }
        let members = duplicatesReported(allMembers, line: value.line, row: number, id: rawID)
        var columns: [String: LocatedJSON] = [:]
        let known = Set(ErrorTableSchema.columns.map(\.name))
        for member in members {
            if known.contains(member.key) {
                columns[member.key] = member.value
            } else {
                let suggestion =
                    known.first { $0.lowercased() == member.key.lowercased() }.map { " (did you mean \"\($0)\"?)" }
                    ?? ""
                fail(
                    line: member.value.line, row: number, id: rawID,
                    "unknown column \"\(member.key)\"\(suggestion); the columns are "
                        + ErrorTableSchema.columns.map(\.name).joined(separator: ", "))
            }
        }
        for column in ErrorTableSchema.columns where column.required && columns[column.name] == nil {
            fail(
                line: value.line, row: number, id: rawID,
                "the required column \"\(column.name)\" is missing (\(column.meaning))")
        }

        func string(_ name: String) -> String? {
            guard let located = columns[name] else { return nil }
            guard case .string(let text) = located.value, !text.trimmingSpaces.isEmpty else {
                fail(
                    line: located.line, row: number, id: rawID,
                    "\"\(name)\" must be a non-empty string; found \(located.kindName)")
                return nil
            }
            return text
        }
        func bool(_ name: String) -> Bool? {
            guard let located = columns[name] else { return nil }
            guard case .bool(let flag) = located.value else {
                fail(
                    line: located.line, row: number, id: rawID,
                    "\"\(name)\" must be true or false; found \(located.kindName)")
                return nil
            }
            return flag
        }
        func pattern(_ name: String) -> IntPattern {
            guard let located = columns[name] else { return .any }
            let text: String
            switch located.value {
            case .string(let value): text = value
            case .number(let literal) where literal.allSatisfy(\.isASCIIDigit): text = literal
            default:
                fail(
                    line: located.line, row: number, id: rawID,
                    "\"\(name)\" must be a whole number or a string such as \"10, 200-299\"; found \(located.kindName)"
                        + (located.kindName == "a number" ? " that is not a whole non-negative number" : ""))
                return .any
            }
            switch IntPattern.parse(text) {
            case .success(let pattern): return pattern
            case .failure(let error):
                fail(line: located.line, row: number, id: rawID, "\"\(name)\": \(error.reason)")
                return .any
            }
        }
        func oneOf(_ name: String, _ allowed: [String], kind: String) -> String? {
            guard let text = string(name) else { return nil }
            guard allowed.contains(text) else {
                let near =
                    allowed.first { $0.lowercased() == text.lowercased() }.map { " (did you mean '\($0)'?)" } ?? ""
                fail(
                    line: columns[name]?.line, row: number, id: rawID,
                    "unknown \(kind) '\(text)'\(near); use one of \(allowed.joined(separator: ", "))")
                return nil
            }
            return text
        }

        let id = string("id")
        if let id, !id.allSatisfy({ $0.isASCIILetterOrDigit || "._-".contains($0) }) {
            fail(
                line: columns["id"]?.line, row: number, id: id, "the id may only use letters, digits, '.', '_' and '-'")
        }
        let code = pattern("code")
        let subcode = pattern("subcode")
        let status = pattern("status")
        var errorNames: [String]?
        if let located = columns["error"] {
            switch located.value {
            case .string(let name) where !name.isEmpty: errorNames = [name]
            case .array(let elements):
                let names = elements.compactMap { element -> String? in
                    if case .string(let name) = element.value, !name.isEmpty { name } else { nil }
                }
                if names.count == elements.count && !names.isEmpty {
                    errorNames = names
                } else {
                    fail(
                        line: located.line, row: number, id: id,
                        "\"error\" must be a non-empty array of non-empty strings")
                }
            default:
                fail(
                    line: located.line, row: number, id: id,
                    "\"error\" must be a string or an array of strings; found \(located.kindName)")
            }
        }
        let transient = bool("transient")
        let category = oneOf("category", ErrorTableSchema.categories, kind: "category")
        let tactic = oneOf("tactic", ErrorTableSchema.tactics, kind: "tactic")
        let notify = bool("notify")
        let closesSession = bool("closesSession")
        let silent = bool("silentReauthentication") ?? true
        let messageKey = string("messageKey")
        let title = string("title")
        let message = string("message")
        let meaning = string("meaning")
        let source = string("source")
        _ = string("comment")

        let hasMessage = columns["message"] != nil
        if notify == true && !hasMessage {
            fail(line: value.line, row: number, id: id, "\"notify\" is true but the row has no \"message\" to show")
        }
        if hasMessage != (columns["messageKey"] != nil) {
            fail(
                line: value.line, row: number, id: id,
                "\"message\" and \"messageKey\" go together: give both or neither")
        }
        if columns["title"] != nil && !hasMessage {
            fail(line: columns["title"]?.line, row: number, id: id, "a \"title\" needs a \"message\" to go with it")
        }
        guard diagnostics.count == before, let id, let category, let tactic, let notify, let closesSession, let meaning,
            let source
        else { return nil }
        return ErrorTable.Row(
            number: number, line: value.line, id: id, code: code, subcode: subcode, status: status, error: errorNames,
            transient: transient, category: category, tactic: tactic, notify: notify, closesSession: closesSession,
            silentReauthentication: silent, messageKey: messageKey, title: title, message: message, meaning: meaning,
            source: source)
    }

    mutating func checkAcrossRows(_ rows: [ErrorTable.Row]) {
        var firstRowWithID: [String: ErrorTable.Row] = [:]
        var firstRowWithKey: [String: ErrorTable.Row] = [:]
        for row in rows {
            if let earlier = firstRowWithID[row.id] {
                fail(
                    line: row.line, row: row.number, id: row.id,
                    "the id is already used by row \(earlier.number); ids must be unique")
            } else {
                firstRowWithID[row.id] = row
            }
            if let key = row.messageKey {
                if let earlier = firstRowWithKey[key] {
                    if earlier.message != row.message || earlier.title != row.title {
                        fail(
                            line: row.line, row: row.number, id: row.id,
                            "the message key '\(key)' has a different title or message in row \(earlier.number) "
                                + "('\(earlier.id)'); one key, one text")
                    }
                } else {
                    firstRowWithKey[key] = row
                }
            }
            if let hider = rows.prefix(row.number - 1).first(where: { row.isHidden(by: $0) }) {
                fail(
                    line: row.line, row: row.number, id: row.id,
                    "row \(hider.number) ('\(hider.id)') comes first and matches every error this row matches, so "
                        + "this row can never be chosen; move it above row \(hider.number) or narrow row \(hider.number)"
                )
            }
        }
        if let last = rows.last, !last.matchesEverything {
            fail(
                line: last.line, row: last.number, id: last.id,
                "the last row must match every error (no code, subcode, status, error or transient condition), "
                    + "so that every error is classified")
        }
    }
}

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }

    /// Whether the string can name a Swift type without backquotes.
    var isSwiftIdentifier: Bool {
        guard let first, first.isASCIILetter || first == "_" else { return false }
        return allSatisfy { $0.isASCIILetterOrDigit || $0 == "_" }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
    var isASCIILetter: Bool { isASCII && isLetter }
    var isASCIILetterOrDigit: Bool { isASCIIDigit || isASCIILetter }
}

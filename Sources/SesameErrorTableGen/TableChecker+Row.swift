/// The columns of one row being checked, and where the row is, for messages.
struct RowColumns {
    /// The row's JSON value.
    let value: LocatedJSON
    /// The row's 1-based number.
    let number: Int
    /// The row's id as written, when it has a string one.
    let id: String?
    /// The known columns the row gives.
    var columns: [String: LocatedJSON]

    subscript(_ name: String) -> LocatedJSON? { columns[name] }
}

extension TableChecker {
    /// One row: its columns, each read and checked, then the rules between columns.
    mutating func checkRow(_ value: LocatedJSON, number: Int) -> ErrorTable.Row? {
        guard case .object(let members) = value.value else {
            fail(line: value.line, row: number, "a row must be an object; found \(value.kindName)")
            return nil
        }
        let before = diagnostics.count
        let row = knownColumns(members, of: value, number: number)
        let id = string("id", row)
        if let id, !id.allSatisfy({ $0.isASCIILetterOrDigit || "._-".contains($0) }) {
            fail(line: row["id"]?.line, row: number, id: id, "the id may only use letters, digits, '.', '_' and '-'")
        }
        let code = pattern("code", row)
        let subcode = pattern("subcode", row)
        let status = pattern("status", row)
        let errorNames = errorNames(row)
        let transient = bool("transient", row)
        let category = oneOf("category", ErrorTableSchema.categories, kind: "category", row)
        let tactic = oneOf("tactic", ErrorTableSchema.tactics, kind: "tactic", row)
        let notify = bool("notify", row)
        let closesSession = bool("closesSession", row)
        let silent = bool("silentReauthentication", row) ?? true
        let messageKey = string("messageKey", row)
        let title = string("title", row)
        let message = string("message", row)
        let meaning = string("meaning", row)
        let source = string("source", row)
        _ = string("comment", row)
        checkMessageColumns(row, notify: notify)
        if let category, let tactic, let notify,
            let contradiction = ErrorTableSchema.contradiction(category: category, tactic: tactic, notify: notify)
        {
            fail(line: row["tactic"]?.line, row: number, id: id, contradiction)
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

    /// The row's known columns; unknown and missing required columns are reported.
    private mutating func knownColumns(
        _ allMembers: [LocatedJSON.Member], of value: LocatedJSON, number: Int
    ) -> RowColumns {
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
        return RowColumns(value: value, number: number, id: rawID, columns: columns)
    }

    /// `notify` needs a `message`; `message` and `messageKey` go together; a `title` needs a `message`.
    private mutating func checkMessageColumns(_ row: RowColumns, notify: Bool?) {
        let id = string("id", row, report: false)
        let hasMessage = row["message"] != nil
        if notify == true && !hasMessage {
            fail(
                line: row.value.line, row: row.number, id: id,
                "\"notify\" is true but the row has no \"message\" to show"
            )
        }
        if hasMessage != (row["messageKey"] != nil) {
            fail(
                line: row.value.line, row: row.number, id: id,
                "\"message\" and \"messageKey\" go together: give both or neither")
        }
        if row["title"] != nil && !hasMessage {
            fail(line: row["title"]?.line, row: row.number, id: id, "a \"title\" needs a \"message\" to go with it")
        }
    }
}

extension TableChecker {
    /// A non-empty string column, or `nil` when it is absent or (reported unless `report` is false) not one.
    mutating func string(_ name: String, _ row: RowColumns, report: Bool = true) -> String? {
        guard let located = row[name] else { return nil }
        guard case .string(let text) = located.value, !text.trimmingSpaces.isEmpty else {
            if report {
                fail(
                    line: located.line, row: row.number, id: row.id,
                    "\"\(name)\" must be a non-empty string; found \(located.kindName)")
            }
            return nil
        }
        return text
    }

    /// A boolean column, or `nil` when it is absent or (reported) not one.
    mutating func bool(_ name: String, _ row: RowColumns) -> Bool? {
        guard let located = row[name] else { return nil }
        guard case .bool(let flag) = located.value else {
            fail(
                line: located.line, row: row.number, id: row.id,
                "\"\(name)\" must be true or false; found \(located.kindName)")
            return nil
        }
        return flag
    }

    /// An integer-pattern column; ``IntPattern/any`` when it is absent or (reported) malformed.
    mutating func pattern(_ name: String, _ row: RowColumns) -> IntPattern {
        guard let located = row[name] else { return .any }
        let text: String
        switch located.value {
        case .string(let value): text = value
        case .number(let literal) where literal.allSatisfy(\.isASCIIDigit): text = literal
        default:
            fail(
                line: located.line, row: row.number, id: row.id,
                "\"\(name)\" must be a whole number or a string such as \"10, 200-299\"; found \(located.kindName)"
                    + (located.kindName == "a number" ? " that is not a whole non-negative number" : ""))
            return .any
        }
        switch IntPattern.parse(text) {
        case .success(let pattern): return pattern
        case .failure(let error):
            fail(line: located.line, row: row.number, id: row.id, "\"\(name)\": \(error.reason)")
            return .any
        }
    }

    /// A string column that must be one of `allowed`; a near miss in case is suggested.
    mutating func oneOf(_ name: String, _ allowed: [String], kind: String, _ row: RowColumns) -> String? {
        guard let text = string(name, row) else { return nil }
        guard allowed.contains(text) else {
            let near = allowed.first { $0.lowercased() == text.lowercased() }.map { " (did you mean '\($0)'?)" } ?? ""
            fail(
                line: row[name]?.line, row: row.number, id: row.id,
                "unknown \(kind) '\(text)'\(near); use one of \(allowed.joined(separator: ", "))")
            return nil
        }
        return text
    }

    /// The `error` column: one identifier or a non-empty array of them.
    mutating func errorNames(_ row: RowColumns) -> [String]? {
        guard let located = row["error"] else { return nil }
        let id = string("id", row, report: false)
        switch located.value {
        case .string(let name) where !name.isEmpty: return [name]
        case .array(let elements):
            let names = elements.compactMap { element -> String? in
                if case .string(let name) = element.value, !name.isEmpty { name } else { nil }
            }
            if names.count == elements.count && !names.isEmpty { return names }
            fail(
                line: located.line, row: row.number, id: id, "\"error\" must be a non-empty array of non-empty strings")
        default:
            fail(
                line: located.line, row: row.number, id: id,
                "\"error\" must be a string or an array of strings; found \(located.kindName)")
        }
        return nil
    }
}

extension TableChecker {
    /// The rules between rows: unique ids, one text per message key, no row hidden by an earlier
    /// one, and a last row that matches every error (a table that extends the base rows ends
    /// with theirs).
    mutating func checkAcrossRows(_ rows: [ErrorTable.Row], extendsBase: Bool = false) {
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
        if !extendsBase, let last = rows.last, !last.matchesEverything {
            fail(
                line: last.line, row: last.number, id: last.id,
                "the last row must match every error (no code, subcode, status, error or transient condition), "
                    + "so that every error is classified; or say \"extends\": \"base\" to end with the core's base "
                    + "rows")
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

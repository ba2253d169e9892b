/// Reads a table's JSON document into an ``ErrorTable``, collecting every problem it finds as
/// an ``ErrorTableDiagnostic`` instead of stopping at the first.
struct TableChecker {
    let file: String
    var diagnostics: [ErrorTableDiagnostic] = []

    init(file: String) { self.file = file }

    mutating func fail(line: Int?, row: Int? = nil, id: String? = nil, _ message: String) {
        diagnostics.append(ErrorTableDiagnostic(file: file, line: line, row: row, rowID: id, message: message))
    }

    /// The whole table: the file name, the document's shape, every row, then the checks across rows.
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
        var extendsBase = false
        var isBase = false
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
            case "extends":
                guard case .string("base") = member.value.value else {
                    fail(line: member.value.line, "\"extends\" can only be \"base\" (the core's base rows)")
                    continue
                }
                extendsBase = true
            case "base":
                // The core's own base table (Sources/Sesame/BaseErrors.json): generated inside the core.
                guard case .bool(let flag) = member.value.value else {
                    fail(line: member.value.line, "\"base\" must be true or false")
                    continue
                }
                isBase = flag
            default:
                fail(
                    line: member.value.line,
                    "unknown top-level key \"\(member.key)\"; the table has \"description\", \"extends\" and "
                        + "\"rows\"")
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
        checkAcrossRows(rows, extendsBase: extendsBase)
        return ErrorTable(name: name, description: description, extendsBase: extendsBase, isBase: isBase, rows: rows)
    }

    /// `members` without the second and later copies of a key, each reported.
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
}

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

/// A provider's error table as read from its data file, every row checked.
///
/// The file is a JSON object: `{"description": "...", "extends": "base", "rows": [ {...}, ... ]}`.
/// Rows are tried in order and the first that matches an error classifies it; a table that
/// extends `base` lists only its own rows, and the core's base rows (RFC 6749/6750/8628 codes,
/// HTTP statuses, anything) follow them. See ``ErrorTableSchema`` for the columns.
package struct ErrorTable: Sendable, Equatable {
    /// The Swift name of the generated type (the file's base name, such as `GraphErrors`).
    package var name: String
    /// What the table is, from the file's `description`.
    package var description: String?
    /// Whether the core's base rows follow ``rows``.
    package var extendsBase: Bool = false
    /// Whether this is the core's base table itself, generated inside the core (no `import Sesame`).
    package var isBase: Bool = false
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

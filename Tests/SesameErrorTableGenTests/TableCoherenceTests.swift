import Foundation
import Sesame
import Testing

@testable import SesameErrorTableGen

/// The repository's root, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// One row of a provider's error table, as its data file has it.
struct ProviderTableRow: Sendable, CustomTestStringConvertible {
    var file: String
    var id: String
    var category: String
    var tactic: String
    var notify: Bool
    var testDescription: String { "\(file) \(id): \(category)/\(tactic)\(notify ? ", notify" : "")" }
}

/// Every provider's error table: the core's base rows that the others extend (OpenID Connect's are
/// the base rows alone), the two in Sources and the outside provider's (`Examples/outside-provider`,
/// built by `scripts/test-outside-provider`).
let providerTableFiles = [
    "Sources/Sesame/BaseErrors.json", "Sources/SesameFacebook/GraphErrors.json",
    "Sources/SesameGitHub/GitHubErrors.json", "Examples/outside-provider/Sources/Acme/AcmeErrors.json",
]

/// Every row of every provider's table, read leniently so that each row is its own test case.
let providerTableRows: [ProviderTableRow] = providerTableFiles.flatMap { file -> [ProviderTableRow] in
    guard let data = try? Data(contentsOf: repositoryRoot.appending(path: file)),
        let rows = JSONValue(parsing: data)?["rows"]?.arrayValue
    else { return [ProviderTableRow(file: file, id: "(unreadable)", category: "", tactic: "", notify: false)] }
    return rows.map {
        ProviderTableRow(
            file: file, id: $0["id"]?.stringValue ?? "(no id)", category: $0["category"]?.stringValue ?? "",
            tactic: $0["tactic"]?.stringValue ?? "", notify: $0["notify"]?.boolValue ?? false)
    }
}

/// The README's guidance for each category: the tactics its errors table names, always and only
/// with `shouldNotifyUser` (the cell's part after ';').
func readmeGuidance() throws -> [String: (always: Set<String>, withNotify: Set<String>)] {
    let readme = try String(contentsOf: repositoryRoot.appending(path: "README.md"), encoding: .utf8)
    let section = try #require(readme.components(separatedBy: "\n## Errors").dropFirst().first)
        .components(separatedBy: "\n## ")[0]
    /// The `backquoted` names in `text`.
    func names(_ text: Substring) -> Set<String> {
        let pieces = text.split(separator: "`", omittingEmptySubsequences: false)
        return Set(stride(from: 1, to: pieces.count, by: 2).map { String(pieces[$0]) })
    }
    var guidance: [String: (always: Set<String>, withNotify: Set<String>)] = [:]
    for line in section.split(separator: "\n") where line.hasPrefix("| `") {
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let tacticsCell = cells[cells.count - 2]
        let parts = tacticsCell.split(separator: ";", maxSplits: 1)
        let tactics = Set(RecoveryTactic.allCases.map(\.rawValue))
        let always = names(parts[0]).intersection(tactics)
        var withNotify: Set<String> = []
        if parts.count == 2 {
            #expect(parts[1].contains("`shouldNotifyUser`"), "'\(line)' must say when its other tactics apply")
            withNotify = names(parts[1]).intersection(tactics)
        }
        for category in names(Substring(cells[1])) { guidance[category] = (always, withNotify) }
    }
    return guidance
}

@Suite("Error tables: category, tactic and the README's guidance agree")
struct TableCoherenceTests {
    @Test("the generator's tactics per category are the core's", arguments: ErrorCategory.allCases)
    func generatorKnowsTheCoresMapping(_ category: ErrorCategory) {
        for tactic in RecoveryTactic.allCases {
            for notify in [false, true] {
                let accepted =
                    ErrorTableSchema.contradiction(category: category.rawValue, tactic: tactic.rawValue, notify: notify)
                    == nil
                #expect(accepted == category.allows(tactic, shouldNotifyUser: notify), "\(tactic), notify \(notify)")
            }
        }
        #expect(category.allows(category.defaultTactic, shouldNotifyUser: false))
    }

    @Test("the README's error table names, for each category, exactly the tactics the core allows")
    func readmeStatesTheMapping() throws {
        let guidance = try readmeGuidance()
        #expect(Set(guidance.keys) == Set(ErrorCategory.allCases.map(\.rawValue)))
        for category in ErrorCategory.allCases {
            let stated = try #require(guidance[category.rawValue], "README has no row for \(category)")
            #expect(stated.always == Set(category.allowedTactics.map(\.rawValue)), "\(category)")
            #expect(stated.withNotify == Set(category.tacticsWhenThePersonMustAct.map(\.rawValue)), "\(category)")
        }
    }

    @Test(
        "every row of every provider's table has a tactic its category and the README allow",
        arguments: providerTableRows)
    func rowIsCoherent(_ row: ProviderTableRow) throws {
        let category = ErrorCategory(rawValue: row.category)
        let tactic = RecoveryTactic(rawValue: row.tactic)
        #expect(ErrorCategory.allCases.contains(category) && RecoveryTactic.allCases.contains(tactic))
        #expect(category.allows(tactic, shouldNotifyUser: row.notify))
        let stated = try #require(try readmeGuidance()[row.category], "README has no row for \(row.category)")
        #expect(stated.always.contains(row.tactic) || (row.notify && stated.withNotify.contains(row.tactic)))
    }

    @Test("every provider's table passes the generator's checks, as the build does", arguments: providerTableFiles)
    func tableBuilds(_ file: String) throws {
        let bytes = try Array(Data(contentsOf: repositoryRoot.appending(path: file)))
        let table = try ErrorTable.read(bytes, file: file)
        #expect(table.rows.count == providerTableRows.filter { $0.file == file }.count)
    }

    @Test("a table that extends the base needs no last row for anything, and its Swift ends with the base rows")
    func extendingTheBase() throws {
        let row =
            #"{"id": "own", "error": "own_code", "category": "badRequest", "tactic": "showMessage", "#
            + #""notify": false, "closesSession": false, "meaning": "m", "source": "s"}"#
        #expect(throws: ErrorTableError.self) {
            try ErrorTable.read(table([row], catchAll: false), file: "Demo/OwnErrors.json")
        }
        let extending = Array(#"{"extends": "base", "rows": [\#(row)]}"#.utf8)
        let source = try Generator.generate(extending, file: "Demo/OwnErrors.json")
        #expect(source.contains("extending: .base"))
        #expect(source.contains("import Sesame"))
        let base = try Generator.generate(
            Array(try Data(contentsOf: repositoryRoot.appending(path: "Sources/Sesame/BaseErrors.json"))),
            file: "Sources/Sesame/BaseErrors.json")
        #expect(!base.contains("import Sesame"), "the base is generated inside the core")
        #expect(ErrorRuleTable.base.rules.last?.match == ErrorRuleMatch(), "the base ends with a row for anything")
    }

    struct Contradiction: Sendable, CustomTestStringConvertible {
        var category: String
        var tactic: String
        var notify: Bool
        var says: String
        var testDescription: String { "\(category)/\(tactic)\(notify ? ", notify" : "")" }
    }

    static let contradictions: [Contradiction] = [
        // The issue's 368 as it was, without the person told: a retry error that only shows a message.
        .init(category: "retry", tactic: "showMessage", notify: false, says: "only with \"notify\": true"),
        .init(category: "throttling", tactic: "showMessage", notify: true, says: "allows 'retryAfterBackoff'"),
        .init(category: "authenticationReopenSession", tactic: "retry", notify: false, says: "'reauthenticate'"),
        .init(category: "permissions", tactic: "retryAfterBackoff", notify: false, says: "'requestPermissions'"),
        .init(category: "userCancelled", tactic: "showMessage", notify: false, says: "allows 'none'"),
        .init(category: "badRequest", tactic: "retry", notify: false, says: "allows 'showMessage'"),
        .init(category: "server", tactic: "reauthenticate", notify: false, says: "does not allow tactic"),
    ]

    @Test(
        "a row whose tactic contradicts its category fails the table, saying what is allowed", arguments: contradictions
    )
    func contradictingRowFails(_ example: Contradiction) throws {
        let message = example.notify ? #", "messageKey": "k", "message": "Do this first.""# : ""
        let bytes = table([
            #"{"id": "bad", "code": 9, "category": "\#(example.category)", "tactic": "\#(example.tactic)", "#
                + #""notify": \#(example.notify), "closesSession": false, "meaning": "m", "source": "s"\#(message)}"#
        ])
        let error = try #require(throws: ErrorTableError.self) {
            try ErrorTable.read(bytes, file: "Demo/BadErrors.json")
        }
        #expect(error.description.contains("Demo/BadErrors.json:3: error: row 1 ('bad')"), "\(error)")
        #expect(error.description.contains("category '\(example.category)'"), "\(error)")
        #expect(error.description.contains(example.says), "\(error)")
    }

    @Test("the combinations the README allows pass", arguments: ErrorCategory.allCases)
    func allowedRowsPass(_ category: ErrorCategory) throws {
        for tactic in category.allowedTactics + category.tacticsWhenThePersonMustAct {
            let notify = !category.allowedTactics.contains(tactic)
            let message = notify ? #", "messageKey": "k", "message": "Do this first.""# : ""
            let bytes = table([
                #"{"id": "ok", "code": 9, "category": "\#(category)", "tactic": "\#(tactic)", "notify": \#(notify), "#
                    + #""closesSession": false, "meaning": "m", "source": "s"\#(message)}"#
            ])
            #expect(throws: Never.self) { try ErrorTable.read(bytes, file: "Demo/GoodErrors.json") }
        }
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameErrorTableGen

/// A table of `rows` (JSON object texts) with a catch-all row appended unless `catchAll` is false.
func table(_ rows: [String], catchAll: Bool = true) -> [UInt8] {
    var all = rows
    if catchAll {
        all.append(
            #"{"id": "other", "category": "providerOther", "tactic": "showMessage", "notify": false, "#
                + #""closesSession": false, "meaning": "anything else", "source": "test"}"#)
    }
    return Array(("{\n\"rows\": [\n" + all.joined(separator: ",\n") + "\n]\n}\n").utf8)
}

/// A valid row with `id`, changed by `extra` members that replace or add columns.
func row(_ id: String, _ extra: String = "", category: String = "throttling", code: String = #""4""#) -> String {
    var members = [
        #""id": "\#(id)""#, #""code": \#(code)"#, #""category": "\#(category)""#, #""tactic": "retryAfterBackoff""#,
        #""notify": false"#, #""closesSession": false"#, #""meaning": "slow down""#, #""source": "a doc page""#,
    ]
    if !extra.isEmpty { members.append(extra) }
    return "{" + members.joined(separator: ", ") + "}"
}

@Suite("Error table generator")
struct ErrorTableTests {
    static var graphErrorsURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appending(path: "Sources/SesameFacebook/GraphErrors.json")
    }

    @Test("the generator knows exactly the core's category and tactic case names")
    func caseNamesMatchTheCore() {
        #expect(ErrorTableSchema.categories == ErrorCategory.allCases.map(\.rawValue))
        #expect(ErrorTableSchema.tactics == RecoveryTactic.allCases.map(\.rawValue))
    }

    @Test("Facebook's GraphErrors.json is a valid table that ends with a catch-all row")
    func graphErrorsIsValid() throws {
        let bytes = try Array(Data(contentsOf: Self.graphErrorsURL))
        let table = try ErrorTable.read(bytes, file: "GraphErrors.json")
        #expect(table.name == "GraphErrors")
        #expect(table.rows.count > 20)
        #expect(table.rows.last?.matchesEverything == true)
        #expect(table.rows.allSatisfy { !$0.source.isEmpty && !$0.meaning.isEmpty })
    }

    @Test("a valid table becomes Swift that builds the core's ErrorRuleTable")
    func generatesSwift() throws {
        let source = try Generator.generate(
            table([row("throttled", #""subcode": "1-3, 7", "status": 400, "transient": true"#)]),
            file: "/x/DemoErrors.json", access: .package)
        #expect(source.contains("import Sesame"))
        #expect(source.contains("package enum DemoErrors {"))
        #expect(source.contains("package static let table = ErrorRuleTable("))
        #expect(
            source.contains(
                "match: ErrorRuleMatch(code: .oneOf([4...4]), subcode: .oneOf([1...3, 7...7]), status: .oneOf([400...400]), isTransient: true)"
            ))
        #expect(source.contains("category: .throttling"))
        #expect(source.contains("recoveryTactic: .retryAfterBackoff"))
        #expect(source.contains("from DemoErrors.json"))
    }

    @Test(
        "string literals in generated code hold the exact text",
        arguments: [
            "plain", "a \"quote\"", "back\\slash", "two\nlines", "tab\tand \u{1}", "café ☕︎ \\(not interpolation)",
        ])
    func stringLiterals(text: String) {
        let literal = SwiftEmitter.literal(text)
        #expect(literal.hasPrefix("\"") && literal.hasSuffix("\""))
        #expect(!literal.dropFirst().dropLast().contains("\n"))
        // Undo the escapes the emitter uses and get the text back.
        var decoded = ""
        var iterator = literal.dropFirst().dropLast().makeIterator()
        while let character = iterator.next() {
            guard character == "\\" else {
                decoded.append(character)
                continue
            }
            switch iterator.next() {
            case "n": decoded.append("\n")
            case "t": decoded.append("\t")
            case "r": decoded.append("\r")
            case "u":
                _ = iterator.next()
                var hex = ""
                while let digit = iterator.next(), digit != "}" { hex.append(digit) }
                decoded.unicodeScalars.append(Unicode.Scalar(UInt32(hex, radix: 16)!)!)
            case let other?: decoded.append(other)
            case nil: break
            }
        }
        #expect(decoded == text)
    }

    struct Malformed: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        /// Text every diagnostic list must contain.
        var expected: [String]
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(
            name: "unknown category", bytes: table([row("a"), row("b", category: "reopen")]),
            expected: ["row 2 ('b')", "unknown category 'reopen'", "authenticationReopenSession"]),
        Malformed(
            name: "unknown category in the wrong case",
            bytes: table([row("a", category: "Throttling")]), expected: ["row 1 ('a')", "did you mean 'throttling'?"]),
        Malformed(
            name: "unknown tactic",
            bytes: table([
                row("a", #""tactic": "backoff""#).replacingOccurrences(
                    of: #""tactic": "retryAfterBackoff", "#, with: "")
            ]),
            expected: ["row 1 ('a')", "unknown tactic 'backoff'"]),
        Malformed(
            name: "a required column missing",
            bytes: table([row("a").replacingOccurrences(of: #", "source": "a doc page""#, with: "")]),
            expected: ["row 1 ('a')", "required column \"source\" is missing"]),
        Malformed(
            name: "a misspelt column", bytes: table([row("a", #""Notify": true"#)]),
            expected: ["row 1 ('a')", "unknown column \"Notify\"", "did you mean \"notify\"?"]),
        Malformed(
            name: "a column given twice", bytes: table([row("a", #""category": "retry""#)]),
            expected: ["row 1 ('a')", "\"category\" is given twice"]),
        Malformed(
            name: "a range that runs backwards", bytes: table([row("a", code: #""299-200""#)]),
            expected: ["row 1 ('a')", "runs backwards"]),
        Malformed(
            name: "a code that is not a number", bytes: table([row("a", code: #""one-ninety""#)]),
            expected: ["row 1 ('a')", "is not a number or a range"]),
        Malformed(
            name: "a code with a fraction", bytes: table([row("a", code: "190.5")]),
            expected: ["row 1 ('a')", "\"code\" must be a whole number"]),
        Malformed(
            name: "notify without a message",
            bytes: table([row("a").replacingOccurrences(of: "\"notify\": false", with: "\"notify\": true")]),
            expected: ["row 1 ('a')", "no \"message\" to show"]),
        Malformed(
            name: "a message without its key", bytes: table([row("a", #""message": "Wait.""#)]),
            expected: ["row 1 ('a')", "go together"]),
        Malformed(
            name: "a duplicate id", bytes: table([row("a"), row("a", code: "17")]),
            expected: ["row 2 ('a')", "already used by row 1"]),
        Malformed(
            name: "a row hidden by an earlier one",
            bytes: table([row("wide", code: #""1-100""#), row("narrow", #""subcode": 5"#, code: "17")]),
            expected: ["row 2 ('narrow')", "row 1 ('wide') comes first", "can never be chosen"]),
        Malformed(
            name: "rows after a catch-all", bytes: table([row("a"), row("b", code: #""*""#), row("c", code: "17")]),
            expected: ["row 3 ('c')", "row 2 ('b') comes first"]),
        Malformed(
            name: "no catch-all row at the end", bytes: table([row("a")], catchAll: false),
            expected: ["row 1 ('a')", "the last row must match every error"]),
        Malformed(
            name: "one message key with two texts",
            bytes: table([
                row("a", #""messageKey": "k", "message": "Wait.""#),
                row("b", #""messageKey": "k", "message": "Hold on.""#, code: "17"),
            ]),
            expected: ["row 2 ('b')", "message key 'k'", "row 1 ('a')"]),
        Malformed(
            name: "a flag that is not a Boolean", bytes: table([row("a", #""transient": "yes""#)]),
            expected: ["row 1 ('a')", "\"transient\" must be true or false"]),
        Malformed(
            name: "an id with spaces", bytes: table([row("a b")]), expected: ["row 1 ('a b')", "may only use letters"]),
        Malformed(
            name: "a row that is not an object", bytes: table(["[1, 2]"]), expected: ["row 1:", "must be an object"]),
        Malformed(
            name: "text that is not JSON", bytes: Array("{\n\"rows\": [\n{\"id\": \"a\",}\n]}".utf8),
            expected: [":3: error:", "not valid JSON", "expected a member name"]),
        Malformed(
            name: "no rows", bytes: Array(#"{"rows": []}"#.utf8), expected: ["\"rows\" must be a non-empty array"]),
        Malformed(
            name: "an unknown top-level key", bytes: Array(#"{"rowz": []}"#.utf8),
            expected: ["unknown top-level key \"rowz\""]),
    ]

    @Test("a malformed row is refused with a message naming the row", arguments: malformed)
    func refusesMalformedRows(_ example: Malformed) throws {
        let error = try #require(throws: ErrorTableError.self) {
            try ErrorTable.read(example.bytes, file: "Demo/TestErrors.json")
        }
        let text = error.description
        for part in example.expected { #expect(text.contains(part), "\(text)") }
        #expect(error.diagnostics.allSatisfy { $0.description.hasPrefix("Demo/TestErrors.json") })
    }

    @Test("a diagnostic points at the line where the bad row starts")
    func diagnosticsCarryLines() throws {
        let bytes = table([row("a"), row("b", category: "nope")])
        let error = try #require(throws: ErrorTableError.self) { try ErrorTable.read(bytes, file: "T.json") }
        // Line 1 "{", 2 "\"rows\": [", 3 row a, 4 row b.
        #expect(error.diagnostics.first?.line == 4)
        #expect(error.description.hasPrefix("T.json:4: error: row 2 ('b'): unknown category 'nope'"))
    }

    @Test("every problem in a table is reported at once")
    func reportsEveryProblem() throws {
        let bytes = table([row("a", category: "x"), row("b", #""tactic": "y""#), row("c", code: #""9-1""#)])
        let error = try #require(throws: ErrorTableError.self) { try ErrorTable.read(bytes, file: "T.json") }
        #expect(Set(error.diagnostics.compactMap(\.row)) == [1, 2, 3])
    }

    @Test("a file name that cannot name a Swift type is refused")
    func refusesBadFileNames() throws {
        let error = try #require(throws: ErrorTableError.self) {
            try ErrorTable.read(table([row("a")]), file: "my-errors.json")
        }
        #expect(error.description.contains("must be a Swift type name"))
    }

    @Test(
        "patterns cover what they should",
        arguments: [
            ("*", "190", true), ("*", "none", true), ("none", "none", true), ("none", "190", false),
            ("190", "*", false), ("100-300", "200-299", true), ("1-5, 6-10", "3-8", true), ("1-5, 7-10", "3-8", false),
            ("10, 200-299", "250", true), ("200-299", "none", false),
        ])
    func patternCoverage(outer: String, inner: String, covers: Bool) throws {
        let a = try IntPattern.parse(outer).get()
        let b = try IntPattern.parse(inner).get()
        #expect(a.covers(b) == covers)
    }

    @Test("the JSON reader keeps duplicate keys, escapes and line numbers")
    func jsonReader() throws {
        let value = try JSONReader.read(
            Array("{\"a\": 1,\n \"a\": \"\\u00e9\\ud83d\\ude00\\n\",\n \"b\": [true, null, -2.5e3]}".utf8))
        guard case .object(let members) = value.value else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["a", "a", "b"])
        #expect(members[1].value.value == .string("é😀\n"))
        #expect(members[2].value.line == 3)
        #expect(throws: JSONSyntaxError.self) { try JSONReader.read(Array(String(repeating: "[", count: 100).utf8)) }
        #expect(throws: JSONSyntaxError.self) { try JSONReader.read(Array("\"\\ud800\"".utf8)) }
    }

    @Test("the command line of the generator is read correctly")
    func generatorArguments() {
        #expect(
            Generator.parse(["in.json", "out.swift"])
                == .success(.generate(input: "in.json", output: "out.swift", access: .internal)))
        #expect(
            Generator.parse(["--access=public", "in.json", "out.swift"])
                == .success(.generate(input: "in.json", output: "out.swift", access: .public)))
        #expect(Generator.parse(["--check", "in.json"]) == .success(.check(input: "in.json")))
        #expect(Generator.parse(["--help"]) == .success(.help))
        #expect((try? Generator.parse(["in.json"]).get()) == nil)
        #expect((try? Generator.parse(["--access", "open", "a", "b"]).get()) == nil)
    }
}

@Suite("sesame-error-table-gen as a process")
struct GeneratorProcessTests {
    func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-gen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("a malformed row fails the generator, naming file, line, row and id, and writes no Swift")
    func malformedRowFails() async throws {
        let generator = try ProcessRunner.builtExecutable("sesame-error-table-gen")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appending(path: "BrokenErrors.json")
        try Data(table([row("fine"), row("broken", category: "reopenSession")])).write(to: input)
        let output = directory.appending(path: "BrokenErrors.swift")

        let result = try await ProcessRunner.run(generator, [input.path, output.path])

        #expect(result.status == 65)
        #expect(
            result.standardError.contains("\(input.path):4: error: row 2 ('broken'): unknown category 'reopenSession'"))
        #expect(result.standardError.contains("no Swift was generated"))
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }

    @Test("a valid table is written as Swift")
    func validTableIsWritten() async throws {
        let generator = try ProcessRunner.builtExecutable("sesame-error-table-gen")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appending(path: "GoodErrors.json")
        try Data(table([row("fine")])).write(to: input)
        let output = directory.appending(path: "GoodErrors.swift")

        let result = try await ProcessRunner.run(generator, [input.path, output.path])

        #expect(result.status == 0, "\(result.standardError)")
        let source = try String(contentsOf: output, encoding: .utf8)
        #expect(source.contains("enum GoodErrors {"))
        #expect(source.contains("id: \"fine\""))
    }

    @Test("bad arguments print the usage on stderr and exit 64")
    func usageError() async throws {
        let generator = try ProcessRunner.builtExecutable("sesame-error-table-gen")
        let result = try await ProcessRunner.run(generator, ["only-one.json"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("usage: sesame-error-table-gen"))
        #expect(result.standardOutput.isEmpty)
    }
}

import Foundation
import Sesame
import SesameFacebook
import Testing

@testable import SesameCommandLine

@Suite("sesame command-line parsing")
struct ParserTests {
    init() { TestProviders.bootstrap() }

    static let body = #"{"error":{"code":190}}"#

    @Test(
        "explain-error accepts its options in both spellings and any order",
        arguments: [
            ["explain-error", "--provider", "facebook", "--status", "400", "--body", body],
            ["explain-error", "--provider=facebook", "--status=400", "--body=\(body)"],
            ["explain-error", "--body", body, "--status", "400", "--provider", "facebook"],
            ["explain-error", "--status", "400", "--provider", "facebook", "--body", body, "--"],
        ])
    func spellings(arguments: [String]) throws {
        #expect(
            try SesameCLI.parse(arguments)
                == .explainError(ExplainError(provider: .facebook, status: 400, body: .inline(Self.body))))
    }

    @Test("headers repeat in order, --body-file - means standard input, --json is a flag")
    func headersAndStdin() throws {
        let command = try SesameCLI.parse([
            "explain-error", "--provider", "facebook", "--status", "503", "--header", "X-App-Usage: {\"call_count\":9}",
            "--header=Retry-After:30", "--body-file", "-", "--json",
        ])
        let expected = ExplainError(
            provider: .facebook, status: 503,
            headers: HTTPHeaders([("X-App-Usage", "{\"call_count\":9}"), ("Retry-After", "30")]), body: .standardInput,
            json: true)
        #expect(command == .explainError(expected))
        #expect(
            try SesameCLI.parse([
                "explain-error", "--provider", "facebook", "--status", "400", "--body-file", "resp.json",
            ])
                == .explainError(ExplainError(provider: .facebook, status: 400, body: .file("resp.json"))))
    }

    @Test("a value may look like an option after =, or be '-'")
    func oddValues() throws {
        #expect(
            try SesameCLI.parse(["explain-error", "--provider", "facebook", "--status", "400", "--body=--json"])
                == .explainError(ExplainError(provider: .facebook, status: 400, body: .inline("--json"))))
        #expect(
            try SesameCLI.parse(["explain-error", "--provider", "facebook", "--status", "400", "--body", ""])
                == .explainError(ExplainError(provider: .facebook, status: 400, body: .inline(""))))
    }

    @Test(
        "help is asked for in every usual way",
        arguments: [
            ([], nil as String?), (["--help"], nil), (["-h"], nil), (["help"], nil),
            (["help", "explain-error"], "explain-error"),
            (["explain-error", "--help"], "explain-error"),
            (["explain-error", "--status", "x", "-h"], "explain-error"),
        ])
    func help(arguments: [String], command: String?) throws {
        if arguments.isEmpty {
            #expect(throws: UsageError.self) { try SesameCLI.parse(arguments) }
        } else {
            #expect(try SesameCLI.parse(arguments) == .help(command: command))
        }
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var message: String
        var command: String? = "explain-error"
        var testDescription: String { arguments.joined(separator: " ") }
    }

    static let explain = ["explain-error", "--provider", "facebook", "--status", "400"]

    static let bad: [Bad] = [
        Bad(arguments: ["explian-error"], message: "Did you mean 'explain-error'?", command: nil),
        Bad(arguments: ["--verbose"], message: "unknown option '--verbose'", command: nil),
        Bad(arguments: ["help", "nope"], message: "unknown command 'nope'", command: nil),
        Bad(arguments: explain, message: "give the response body with --body"),
        Bad(arguments: explain + ["--body", "{}", "--body-file", "x"], message: "use one of them"),
        Bad(arguments: explain + ["--body", "{}", "--body", "{}"], message: "--body was given more than once"),
        Bad(arguments: ["explain-error", "--status", "400", "--body", "{}"], message: "--provider is required"),
        Bad(
            arguments: ["explain-error", "--provider", "facebok", "--status", "400", "--body", "{}"],
            message: "did you mean 'facebook'?"),
        Bad(arguments: ["explain-error", "--provider", "facebook", "--body", "{}"], message: "--status is required"),
        Bad(
            arguments: ["explain-error", "--provider", "facebook", "--status", "4OO", "--body", "{}"],
            message: "from 100 to 599"),
        Bad(
            arguments: ["explain-error", "--provider", "facebook", "--status", "600", "--body", "{}"],
            message: "from 100 to 599"),
        Bad(
            arguments: ["explain-error", "--provider", "facebook", "--status", "--body", "{}"],
            message: "--status needs a value"),
        Bad(arguments: explain + ["--body"], message: "--body needs a value"),
        Bad(arguments: explain + ["--body", "{}", "--header", "no colon"], message: "has no ':'"),
        Bad(
            arguments: explain + ["--body", "{}", "--header", ": value"], message: "does not start with a header name"),
        Bad(arguments: explain + ["--body", "{}", "--josn"], message: "did you mean --json?"),
        Bad(arguments: explain + ["--body", "{}", "--json=yes"], message: "--json is a flag"),
        Bad(arguments: explain + ["--body", "{}", "-j"], message: "unknown option '-j'"),
        Bad(arguments: explain + ["--body", "{}", "extra"], message: "unexpected argument 'extra'"),
        Bad(arguments: explain + ["--body", "{}", "--", "--json"], message: "unexpected argument '--json'"),
    ]

    @Test("a bad command line is a usage error that says what to do", arguments: bad)
    func usageErrors(_ example: Bad) {
        let error = #expect(throws: UsageError.self) { try SesameCLI.parse(example.arguments) }
        #expect(error?.message.contains(example.message) == true, "\(error?.message ?? "no error")")
        #expect(error?.command == example.command)
    }

    @Test("help is generated from the command tree and lists every option")
    func generatedHelp() {
        let help = ExplainError.spec.help
        for option in ExplainError.spec.options { #expect(help.contains("--\(option.name)")) }
        #expect(help.contains("-h, --help"))
        #expect(help.contains("sesame explain-error --provider NAME --status CODE"))
        for command in SesameCLI.commands { #expect(SesameCLI.help.contains(command.spec.name)) }
    }

    @Test("each command's name, known without its spec, is its spec's name, and no two are the same")
    func definitionNames() {
        for command in SesameCLI.commands { #expect(command.name == command.spec.name) }
        #expect(Set(SesameCLI.commands.map(\.name)).count == SesameCLI.commands.count)
    }

    @Test("--json prints exactly the documented keys, in order, null where unknown")
    func jsonKeys() throws {
        let error = taxonomy(status: 503, body: "<html/>")
        let text = ExplainError.json(for: error)
        let object = try #require(JSONValue(parsing: Data(text.utf8))?.objectValue)
        let keys = [
            "category", "shouldNotifyUser", "userTitle", "userMessage", "contextualMessage", "code", "subcode",
            "isTransient", "recoveryTactic", "retryAfterSeconds", "closesSession",
        ]
        #expect(Set(object.keys) == Set(keys))
        let positions = keys.map { text.range(of: "\"\($0)\":")!.lowerBound }
        #expect(positions == positions.sorted())
        #expect(object["code"] == .null)
        #expect(object["subcode"] == .null)
        #expect(object["isTransient"] == .null)
        #expect(object["userTitle"] == .null)
        #expect(object["retryAfterSeconds"] == .null)
        #expect(object["category"] == .string("server"))
        #expect(object["recoveryTactic"] == .string("retryAfterBackoff"))
    }

    func taxonomy(status: Int, body: String) -> AuthError {
        FacebookErrorTaxonomy().classify(status: status, headers: [:], body: Data(body.utf8))
    }
}

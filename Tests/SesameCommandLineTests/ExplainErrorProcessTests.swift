import Foundation
import Sesame
import SesameTestSupport
import Testing

/// `sesame explain-error` run as the built executable.
@Suite("sesame explain-error as a process")
struct ExplainErrorProcessTests {
    init() { TestProviders.bootstrap() }

    func sesame(_ arguments: [String], input: Data = Data()) async throws -> ProcessResult {
        try await ProcessRunner.run(try ProcessRunner.builtExecutable("sesame"), arguments, input: input)
    }

    func json(_ result: ProcessResult) throws -> [String: JSONValue] {
        #expect(result.standardOutput.filter { $0 == "\n" }.count == 1, "exactly one line: \(result.standardOutput)")
        return try #require(JSONValue(parsing: Data(result.standardOutput.utf8))?.objectValue)
    }

    @Test("190/458 in words: what it means, what to do, never a silent reconnect")
    func removedAppInWords() async throws {
        let result = try await sesame([
            "explain-error", "--provider", "facebook", "--status", "400", "--body",
            #"{"error":{"message":"Error validating access token","type":"OAuthException","code":190,"error_subcode":458,"fbtrace_id":"EJplcsCHuLu"}}"#,
        ])
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        #expect(result.standardOutput.hasPrefix("Facebook error 190/458 (OAuthException), HTTP 400"))
        #expect(result.standardOutput.contains("removed the app"))
        #expect(result.standardOutput.contains("Do not reconnect silently"))
        #expect(result.standardOutput.contains("authenticationReopenSession"))
        #expect(result.standardOutput.contains("EJplcsCHuLu"))
        #expect(result.standardOutput.contains("oauth-458"))
        // The seed guide's contextual message for the subcode, named as the field an app reads.
        #expect(result.standardOutput.contains("(contextualMessage): The app was removed. Please log in again."))
    }

    @Test("--json with usage headers gives the throttling back-off in seconds")
    func throttlingAsJSON() async throws {
        let result = try await sesame([
            "explain-error", "--provider", "facebook", "--status", "400",
            "--header",
            #"X-Business-Use-Case-Usage: {"1":[{"type":"pages","call_count":100,"estimated_time_to_regain_access":2}]}"#,
            "--body", #"{"error":{"code":80001,"is_transient":false}}"#, "--json",
        ])
        #expect(result.status == 0)
        let object = try json(result)
        #expect(object["category"] == .string("throttling"))
        #expect(object["recoveryTactic"] == .string("retryAfterBackoff"))
        #expect(object["retryAfterSeconds"] == .number(120))
        #expect(object["code"] == .number(80001))
        #expect(object["subcode"] == .null)
        #expect(object["isTransient"] == .bool(false))
        #expect(object["closesSession"] == .bool(false))
        #expect(object.count == 11)
    }

    @Test("--body-file - reads the body from standard input")
    func bodyFromStandardInput() async throws {
        let body = Data(
            #"{"error":{"code":190,"error_subcode":459,"error_user_msg":"Log in on the web first.","error_user_title":"Locked"}}"#
                .utf8)
        let result = try await sesame(
            ["explain-error", "--provider", "facebook", "--status", "400", "--body-file", "-", "--json"], input: body)
        #expect(result.status == 0, "\(result.standardError)")
        let object = try json(result)
        #expect(object["category"] == .string("retry"))
        #expect(object["shouldNotifyUser"] == .bool(true))
        #expect(object["userMessage"] == .string("Log in on the web first."))
        #expect(object["userTitle"] == .string("Locked"))
        #expect(object["closesSession"] == .bool(false))
    }

    @Test("--body-file PATH reads a file; an HTML page behind a 502 is a server error")
    func bodyFromFile() async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "sesame-body-\(UUID().uuidString).html")
        try Data("<html><body>502 Bad Gateway</body></html>".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await sesame([
            "explain-error", "--provider", "facebook", "--status", "502", "--body-file", file.path,
        ])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("an HTML page instead of JSON"))
        #expect(result.standardOutput.contains("server"))
    }

    @Test("a missing body file is reported with what to do, exit 66")
    func missingFile() async throws {
        let result = try await sesame([
            "explain-error", "--provider", "facebook", "--status", "400", "--body-file", "/nonexistent/x.json",
        ])
        #expect(result.status == 66)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("cannot read the body file '/nonexistent/x.json'"))
    }

    @Test(
        "bad arguments print the usage on stderr and exit 64",
        arguments: [
            ["explain-error", "--provider", "facebook", "--status", "999", "--body", "{}"],
            ["explain-error", "--provider", "facebook", "--status", "400"],
            ["no-such-command"],
            [],
        ])
    func usageError(arguments: [String]) async throws {
        let result = try await sesame(arguments)
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("USAGE"))
        #expect(result.standardError.hasPrefix("sesame"))
    }

    @Test("--help prints on stdout and exits 0")
    func help() async throws {
        let result = try await sesame(["explain-error", "--help"])
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        #expect(result.standardOutput.contains("--body-file PATH"))
        let top = try await sesame(["--help"])
        #expect(top.status == 0)
        #expect(top.standardOutput.contains("explain-error"))
    }

    @Test("a token in the error message does not reach the output")
    func noSecrets() async throws {
        let token = "EAAGm0PX4ZCpsBA" + String(repeating: "Zq9", count: 20)
        let result = try await sesame([
            "explain-error", "--provider", "facebook", "--status", "400", "--body",
            #"{"error":{"code":190,"message":"Malformed access token \#(token)"}}"#,
        ])
        #expect(result.status == 0)
        #expect(!result.standardOutput.contains(token))
        #expect(result.standardOutput.contains(Redaction.placeholder))
    }
}

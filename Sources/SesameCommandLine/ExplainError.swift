import Foundation
import Sesame
import SesameDesktop

/// `sesame explain-error`: says what a provider's error response means and what to do.
package struct ExplainError: Sendable, Equatable {
    /// Where the response body comes from.
    package enum BodySource: Sendable, Equatable {
        /// Given on the command line (`--body`).
        case inline(String)
        /// A file (`--body-file PATH`).
        case file(String)
        /// Standard input (`--body-file -`).
        case standardInput
    }

    /// The provider whose error it is.
    package var provider: ProviderID
    /// The response's HTTP status.
    package var status: Int
    /// The response's headers (`--header 'Name: value'`, in order).
    package var headers: HTTPHeaders
    /// The body.
    package var body: BodySource
    /// The most a body read from standard input may hold; reading stops just past it.
    package static let maximumBodySize = 1 << 20
    /// Whether to print one JSON object instead of words.
    package var json: Bool

    package init(provider: ProviderID, status: Int, headers: HTTPHeaders = [:], body: BodySource, json: Bool = false) {
        self.provider = provider
        self.status = status
        self.headers = headers
        self.body = body
        self.json = json
    }

    /// The command's spec: its options and help.
    package static let spec = CommandSpec(
        name: "explain-error",
        summary: "Say what a provider's error response means and what to do about it.",
        synopses: [
            "--provider NAME --status CODE [--header 'NAME: VALUE']...",
            " (--body JSON | --body-file PATH | --body-file -) [--json]",
        ],
        discussion: """
            Classifies the response the way Sesame's recovery does: its category, whether the
            person must be told and what, the recovery tactic, whether the session closes, and
            how long to wait before retrying. Any body is accepted (HTML, empty, truncated).

            The message for the person follows the one rule: userMessage when shouldNotifyUser,
            otherwise contextualMessage.

            With --json it prints exactly one JSON object with the keys category,
            shouldNotifyUser, userTitle, userMessage, contextualMessage, code, subcode, isTransient,
            recoveryTactic, retryAfterSeconds and closesSession (null where unknown).
            """,
        options: [
            OptionSpec(
                "provider", value: "NAME", required: true, "The provider that answered: \(ErrorProviderSupport.names)."),
            OptionSpec("status", value: "CODE", required: true, "The response's HTTP status, such as 400."),
            OptionSpec(
                "header", value: "'NAME: VALUE'", repeatable: true,
                "A response header, such as 'X-App-Usage: {\"call_count\":100}'. Repeatable."),
            OptionSpec("body", value: "JSON", "The response body, as text."),
            OptionSpec("body-file", value: "PATH", "A file holding the response body; '-' reads standard input."),
            OptionSpec("json", "Print one JSON object instead of an explanation in words."),
        ],
        examples: Desktop.providers.flatMap(\.explainErrorExamples)
    )

    /// The command's place in the tree.
    package static let definition = CommandDefinition(name: "explain-error", spec: spec) { parsed throws(UsageError) in
        .explainError(try ExplainError(parsed))
    }

    /// Checks the parsed arguments.
    package init(_ parsed: ParsedArguments) throws(UsageError) {
        func fail(_ message: String) -> UsageError { UsageError(message, command: Self.spec.name) }
        if let extra = parsed.positionals.first {
            throw fail("unexpected argument '\(extra)'; the body goes after --body, or in a file named by --body-file")
        }
        guard let providerName = parsed.value("provider") else {
            throw fail("--provider is required (the provider that answered: \(ErrorProviderSupport.names))")
        }
        guard ErrorProviderSupport.named(providerName) != nil else {
            let near =
                Suggestion.closest(to: providerName, in: ErrorProviderSupport.all.map(\.id.rawValue))
                .map { " (did you mean '\($0)'?)" } ?? ""
            throw fail("unknown provider '\(providerName)'\(near); known providers: \(ErrorProviderSupport.names)")
        }
        guard let statusText = parsed.value("status") else {
            throw fail("--status is required (the response's HTTP status, such as --status 400)")
        }
        guard let status = Int(statusText), (100...599).contains(status) else {
            throw fail("--status must be an HTTP status from 100 to 599; '\(statusText)' is not one")
        }
        var headers = HTTPHeaders()
        for header in parsed.values["header"] ?? [] {
            guard let colon = header.firstIndex(of: ":") else {
                throw fail("--header '\(header)' has no ':'; write it as 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.allSatisfy(\.isHeaderNameCharacter) else {
                throw fail("--header '\(header)' does not start with a header name; write it as 'Name: value'")
            }
            headers.add(name: name, value: header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let body: BodySource
        switch (parsed.value("body"), parsed.value("body-file")) {
        case (let text?, nil): body = .inline(text)
        case (nil, "-"?): body = .standardInput
        case (nil, let path?): body = .file(path)
        case (nil, nil):
            throw fail("give the response body with --body JSON, --body-file PATH, or --body-file - for standard input")
        case (_?, _?):
            throw fail("--body and --body-file both give the body; use one of them")
        }
        self.init(
            provider: ProviderID(providerName), status: status, headers: headers, body: body,
            json: parsed.flags.contains("json"))
    }

    /// Reads the body, classifies the response and prints the explanation.
    package func run(io: CommandIO) async -> Int32 {
        guard let support = ErrorProviderSupport.named(provider.rawValue) else {
            io.writeError(
                "\(Desktop.programName) explain-error: unknown provider '\(provider)'; known providers: \(ErrorProviderSupport.names)\n"
            )
            return ExitStatus.usage
        }
        let data: Data
        switch body {
        case .inline(let text): data = Data(text.utf8)
        case .standardInput:
            data = await io.readStandardInput(Self.maximumBodySize)
            guard data.count <= Self.maximumBodySize else {
                io.writeError(
                    "\(Desktop.programName) explain-error: standard input holds more than \(Self.maximumBodySize >> 20) MiB, more "
                        + "than a provider's error body; give the body alone.\n")
                return ExitStatus.dataError
            }
        case .file(let path):
            guard let contents = FileManager.default.contents(atPath: path) else {
                let reason =
                    FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "there is no such file"
                io.writeError(
                    "\(Desktop.programName) explain-error: cannot read the body file '\(path)': \(reason). Check the path, or give the "
                        + "body with --body, or on standard input with --body-file -.\n")
                return ExitStatus.noInput
            }
            data = contents
        }
        let error = support.taxonomy.classify(status: status, headers: headers, body: data)
        let facts = support.facts(error)
        io.write(
            json
                ? Self.json(for: error, facts: facts) + "\n"
                : Self.printableLines(Self.explanation(of: error, facts: facts, support: support)))
        return ExitStatus.success
    }

    // MARK: Output

    /// `text`, which quotes the response (its messages, its headers), with every line made
    /// printable: no terminal control sequence from outside reaches the terminal (a title change,
    /// a cursor move, a forged line), and the explanation's own line breaks stay.
    static func printableLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { Terminal.printable(String($0)) }
            .joined(separator: "\n")
    }

    /// The `--json` object: exactly the documented keys, in order, `null` where unknown.
    package static func json(for error: AuthError, facts: ErrorExplanationFacts = ErrorExplanationFacts()) -> String {
        func string(_ text: String?) -> String {
            guard let text else { return "null" }
            return JSONValue.string(text).jsonText
        }
        func number(_ value: Int?) -> String { value.map(String.init) ?? "null" }
        func bool(_ value: Bool?) -> String { value.map { $0 ? "true" : "false" } ?? "null" }
        let retryAfter: String =
            error.retryAfter.map { duration in
                let seconds = duration.inSeconds
                return seconds.rounded() == seconds ? String(Int(seconds)) : String(seconds)
            } ?? "null"
        let members: [(String, String)] = [
            ("category", string(error.category.rawValue)),
            ("shouldNotifyUser", bool(error.shouldNotifyUser)),
            ("userTitle", string(error.userTitle)),
            ("userMessage", string(error.userMessage)),
            ("contextualMessage", string(error.contextualMessage)),
            ("code", number(error.code)),
            ("subcode", number(error.subcode)),
            ("isTransient", bool(facts.isTransient)),
            ("recoveryTactic", string(error.recoveryTactic.rawValue)),
            ("retryAfterSeconds", retryAfter),
            ("closesSession", bool(error.closesSession)),
        ]
        return "{" + members.map { "\(string($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// The explanation in words.
    package static func explanation(
        of error: AuthError, facts: ErrorExplanationFacts, support: ErrorProviderSupport
    ) -> String {
        var heading = support.displayName
        if let code = error.code {
            heading += " error \(code)" + (error.subcode.map { "/\($0)" } ?? "")
            if let type = facts.errorType { heading += " (\(type))" }
        }
        if let status = error.httpStatus { heading += ", HTTP \(status)" }
        var text = "\(heading)\n\n\(error.message)\n\nWhat to do: \(whatToDo(error))\n"
        // The one rule: userMessage when shouldNotifyUser, otherwise contextualMessage.
        if error.shouldNotifyUser, let message = error.userMessage {
            text += "Tell the person (userMessage): \(error.userTitle.map { "\($0): " } ?? "")\(message)\n"
        } else if mustTellWhyBeforeLogin(error) {
            // The SDK shows no message of its own (notify: no), but the person must hear why they
            // are asked to log in again: "What to do" says so, and this line must not contradict it.
            text += "Before the new login, tell the person why it is needed (contextualMessage): "
            text += "\(error.contextualMessage)\n"
        } else if error.recoveryTactic == .showMessage || error.recoveryTactic == .reauthenticate {
            text += "Tell the person (contextualMessage): \(error.contextualMessage)\n"
        } else {
            text += "Nothing needs to be shown to the person unless recovery fails; then (contextualMessage): "
            text += "\(error.contextualMessage)\n"
        }
        var rows: [(String, String)] = [
            ("category", error.category.rawValue),
            ("recovery tactic", error.recoveryTactic.rawValue),
            (
                "notify the person",
                error.shouldNotifyUser
                    ? "yes"
                    : mustTellWhyBeforeLogin(error) ? "before the new login (the SDK shows nothing itself)" : "no"
            ),
            ("closes the session", error.closesSession ? "yes, and clears its stored token" : "no"),
            ("retry after", error.retryAfter?.formattedSeconds ?? "no hint"),
            ("is_transient", facts.isTransient.map { $0 ? "true" : "false" } ?? "not sent"),
        ]
        rows += facts.rows.map { ($0.label, $0.value) }
        if let ruleID = error.ruleID, let table = support.table, let origin = table.origin(ofRule: ruleID),
            let rule = table.rule(id: ruleID)
        {
            rows.append(("rule", "\(ruleID) (\(origin.table).json, row \(origin.row))"))
            rows.append(("source", rule.source))
        }
        text += "\n" + HelpFormatter.table(rows)
        return text
    }

    /// Whether the person must be told why before logging in again, though the SDK itself shows
    /// nothing: a login that must not be repeated silently (190/458, the app was removed).
    private static func mustTellWhyBeforeLogin(_ error: AuthError) -> Bool {
        !error.shouldNotifyUser && error.recoveryTactic == .reauthenticate && !error.allowsSilentReauthentication
    }

    private static func whatToDo(_ error: AuthError) -> String {
        let wait = error.retryAfter.map { " The server asks to wait at least \($0.formattedSeconds)." } ?? ""
        switch error.recoveryTactic {
        case RecoveryTactic.none:
            return "nothing; the person chose this. Offer the action again when they ask for it."
        case .retry:
            return "make the same call again; if it keeps failing, wait longer each time and give up after a few tries."
                + wait
        case .retryAfterBackoff:
            return "wait, then make the same call again, waiting longer after each failure and giving up after a few "
                + "tries." + wait
        case .reauthenticate:
            var text =
                error.closesSession
                ? "close the session, clear its stored token, and ask the person to log in again."
                : "ask the person to log in again."
            if !error.allowsSilentReauthentication {
                text += " Do not reconnect silently: tell the person why first, and let them log in themselves."
            }
            return text
        case .requestPermissions:
            return
                "ask the person again for the permission the call needs (a login with auth_type=rerequest), then make "
                + "the call again."
        default:  // .showMessage, and any tactic added later
            return error.shouldNotifyUser
                ? "show the person the message below; making the same call again now will not help."
                : "show the person the message below; making the same call again as it is will not help."
        }
    }
}

/// A provider whose errors `sesame explain-error` can read.
package struct ErrorProviderSupport: Sendable {
    /// The provider's id, as typed on the command line.
    package var id: ProviderID
    /// Its name in words.
    package var displayName: String
    /// Its taxonomy.
    package var taxonomy: any ErrorTaxonomy
    /// Its error table, when it has one, to name the rule that classified an error.
    package var table: ErrorRuleTable?
    /// The provider's own facts about an error (``SesameDesktop/ProviderPlugin/explanationFacts(of:)``).
    package var facts: @Sendable (AuthError) -> ErrorExplanationFacts

    /// Every provider the command line knows: ``SesameDesktop/Desktop/providers``.
    package static let all: [ErrorProviderSupport] = Desktop.providers.map { plugin in
        ErrorProviderSupport(
            id: ProviderID(plugin.name), displayName: plugin.displayName, taxonomy: plugin.errorTaxonomy,
            table: plugin.errorTable, facts: { plugin.explanationFacts(of: $0) })
    }

    /// The provider named `name`.
    package static func named(_ name: String) -> ErrorProviderSupport? { all.first { $0.id.rawValue == name } }

    /// The names, for messages. From the plug-ins' names alone: ``all`` builds every provider's
    /// error table, which `explain-error`'s help (part of the command table every command reads)
    /// must not do.
    package static var names: String { Desktop.providers.map(\.name).joined(separator: ", ") }
}

extension Character {
    /// Whether the character may appear in an HTTP header name (RFC 9110 token).
    var isHeaderNameCharacter: Bool {
        isASCII && (isLetter || isNumber || "!#$%&'*+-.^_`|~".contains(self))
    }
}

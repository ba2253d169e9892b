import SesameDesktop

/// One command of the `sesame` tree: its name, options and help. Help text is generated from
/// these, so it cannot drift from what the parser accepts.
package struct CommandSpec: Sendable {
    /// The word that selects the command (`explain-error`).
    package var name: String
    /// One line for the command list.
    package var summary: String
    /// Synopses after `sesame <name>`; generated from ``options`` when empty. A synopsis that
    /// starts with a space continues the one before it on a new line.
    package var synopses: [String]
    /// Paragraphs of explanation, made when help asks for them.
    package var discussion: String? { makeDiscussion() }
    /// The options, in the order help lists them.
    package var options: [OptionSpec]
    /// Example command lines, each with a comment, made when help asks for them.
    package var examples: [(command: String, comment: String)] { makeExamples() }

    // Every command's spec is made at start, to parse the command line; its help text only
    // when help, a man page or a completion is written. (Gathering each provider's paragraphs
    // and wrapping them cost a `sesame token` start about 0.6 M instructions.)
    private let makeDiscussion: @Sendable () -> String?
    private let makeExamples: @Sendable () -> [(command: String, comment: String)]

    package init(
        name: String, summary: String, synopses: [String] = [],
        discussion: @autoclosure @escaping @Sendable () -> String? = nil, options: [OptionSpec] = [],
        examples: @autoclosure @escaping @Sendable () -> [(command: String, comment: String)] = []
    ) {
        self.name = name
        self.summary = summary
        self.synopses = synopses
        self.makeDiscussion = discussion
        self.options = options
        self.makeExamples = examples
    }

    /// The option spelled `--name`, if the command has one.
    package func option(named name: String) -> OptionSpec? { options.first { $0.name == name } }

    /// The usage lines: `sesame name ...`.
    package var usage: String {
        let lines =
            synopses.isEmpty
            ? [
                options.map { option in
                    var text = "--\(option.name)" + (option.valueName.map { " \($0)" } ?? "")
                    if !option.isRequired { text = "[\(text)]" }
                    if option.isRepeatable { text += "..." }
                    return text
                }.joined(separator: " ")
            ] : synopses
        let program = Desktop.programName
        let indent = String(repeating: " ", count: "  \(program) \(name) ".count + 4)
        return lines.map { line in
            line.hasPrefix(" ")
                ? indent + line.drop { $0 == " " } : "  \(program) \(name) \(line)".trimmingTrailingSpaces
        }.joined(separator: "\n")
    }

    /// The full help text.
    package var help: String {
        var text = "\(Desktop.programName) \(name): \(summary)\n\nUSAGE\n\(usage)\n"
        if let discussion { text += "\n\(discussion)\n" }
        let rows =
            options.map { option in
                ("--\(option.name)" + (option.valueName.map { " \($0)" } ?? ""), option.summary)
            } + [("-h, --help", "Show this help.")]
        text += "\nOPTIONS\n" + HelpFormatter.table(rows)
        let examples = self.examples
        if !examples.isEmpty {
            text += "\nEXAMPLES\n"
            text += examples.map { "  # \($0.comment)\n  \($0.command)\n" }.joined(separator: "\n")
        }
        return text
    }
}

/// One `--option` of a command.
package struct OptionSpec: Sendable, Equatable {
    /// The name without dashes.
    package var name: String
    /// The placeholder of its value (`CODE`); `nil` for a flag that takes none.
    package var valueName: String?
    /// What it does, for help.
    package var summary: String
    /// Whether it may be given more than once.
    package var isRepeatable: Bool
    /// Whether the command needs it (for the generated synopsis; the command checks).
    package var isRequired: Bool

    package init(
        _ name: String, value: String? = nil, repeatable: Bool = false, required: Bool = false, _ summary: String
    ) {
        self.name = name
        self.valueName = value
        self.summary = summary
        self.isRepeatable = repeatable
        self.isRequired = required
    }

    /// Whether the option takes a value.
    package var takesValue: Bool { valueName != nil }
}

enum HelpFormatter {
    /// Two columns, the second aligned, as `git` and `gh` print option lists.
    static func table(_ rows: [(String, String)]) -> String {
        let width = min((rows.map(\.0.count).max() ?? 0) + 2, 34)
        return rows.map { left, right in
            let padding =
                left.count < width
                ? String(repeating: " ", count: width - left.count) : "\n" + String(repeating: " ", count: width + 2)
            return "  \(left)\(padding)\(right)\n"
        }.joined()
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

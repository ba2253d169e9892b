import Foundation

/// A command line that could not be understood: what was wrong, for which command.
package struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong and what to do instead, in one sentence.
    package var message: String
    /// The command whose usage to print; `nil` for the top level.
    package var command: String?

    package init(_ message: String, command: String?) {
        self.message = message
        self.command = command
    }

    package var description: String { message }
}

/// The options and arguments given to one command, checked against its ``CommandSpec``.
package struct ParsedArguments: Sendable, Equatable {
    /// The values of each option that takes one, in order.
    package var values: [String: [String]] = [:]
    /// The flags that were given.
    package var flags: Set<String> = []
    /// Arguments that are not options (everything after `--` included).
    package var positionals: [String] = []
    /// Whether `-h` or `--help` was given (before any `--`).
    package var helpRequested = false

    /// The only value of `--name`, if given.
    package func value(_ name: String) -> String? { values[name]?.last }
}

/// Splits a command's arguments into options and positionals.
///
/// Accepts `--opt value`, `--opt=value`, flags, `-h`/`--help`, and `--` to end options. The
/// value after `--opt` is taken as it is (so `--body-file -` works), unless it is itself one of
/// the command's options, which means the value was forgotten.
package enum ArgumentParser {
    package static func parse(_ arguments: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var optionsEnded = false
        func fail(_ message: String) -> UsageError { UsageError(message, command: spec.name) }
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                parsed.helpRequested = true
                continue
            }
            guard argument.hasPrefix("--") else {
                throw fail(
                    "unknown option '\(argument)'; options are spelled with two dashes, as in --\(spec.options.first?.name ?? "help")"
                )
            }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            let inline: String? = body.contains("=") ? String(body.drop { $0 != "=" }.dropFirst()) : nil
            guard let option = spec.option(named: name) else {
                let near =
                    Suggestion.closest(to: name, in: spec.options.map(\.name)).map { "; did you mean --\($0)?" } ?? ""
                throw fail("unknown option '--\(name)'\(near)")
            }
            if option.takesValue {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard index < arguments.count, !isOption(arguments[index], of: spec) else {
                        throw fail("--\(name) needs a value (\(option.valueName ?? "VALUE")): \(option.summary)")
                    }
                    value = arguments[index]
                    index += 1
                }
                if !option.isRepeatable && parsed.values[name] != nil {
                    throw fail("--\(name) was given more than once; give it once")
                }
                parsed.values[name, default: []].append(value)
            } else {
                guard inline == nil else { throw fail("--\(name) is a flag and takes no value") }
                parsed.flags.insert(name)
            }
        }
        return parsed
    }

    private static func isOption(_ argument: String, of spec: CommandSpec) -> Bool {
        guard argument.hasPrefix("--") else { return argument == "-h" }
        let name = String(argument.dropFirst(2).prefix { $0 != "=" })
        return name.isEmpty || name == "help" || spec.option(named: name) != nil
    }
}

/// "Did you mean" for misspelt names.
enum Suggestion {
    /// The candidate within two edits of `word`, if one is.
    static func closest(to word: String, in candidates: [String]) -> String? {
        candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= 2 }.min { $0.1 < $1.1 }?.0
    }

    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// The names people give their logins (`--account work`, `sesame switch facebook work`).
package enum AccountName {
    /// The longest name accepted, in characters.
    package static let maximumLength = 64

    /// `name`, when it can name an account: not empty, not only spaces, no control characters
    /// (line breaks, escapes) or invisible direction marks, at most ``maximumLength`` characters.
    /// Such a name is printed as it is, so it cannot forge lines or move the cursor.
    ///
    /// - Parameter what: how the name was given, for the message (`--account`, `ACCOUNT`).
    /// - Throws: a ``UsageError`` for `command` that says what was wrong and what a good name is.
    package static func validated(_ name: String, what: String, command: String) throws(UsageError) -> String {
        func fail(_ problem: String) -> UsageError {
            UsageError(
                "\(what) \(problem); use a short name such as 'work' or 'alice@example.com'", command: command)
        }
        if name.trimmingCharacters(in: .whitespaces).isEmpty {
            throw fail(name.isEmpty ? "is empty" : "is only spaces")
        }
        if let bad = name.unicodeScalars.first(where: isForbidden) {
            let code = "U+" + String(bad.value, radix: 16, uppercase: true).leftPadded(to: 4)
            throw fail("\(String(reflecting: name)) contains the control character \(code)")
        }
        if name.count > maximumLength {
            throw fail("is \(name.count) characters long; the limit is \(maximumLength)")
        }
        return name
    }

    private static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned: return true
        default: return false
        }
    }
}

extension ParsedArguments {
    /// The `--account` value, checked by ``AccountName/validated(_:what:command:)``.
    package func account(command: String) throws(UsageError) -> String? {
        guard let name = value("account") else { return nil }
        return try AccountName.validated(name, what: "--account", command: command)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

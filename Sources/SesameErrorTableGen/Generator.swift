/// The generator's command line, as a function the tests and the executable share.
///
///     sesame-error-table-gen INPUT.json OUTPUT.swift [--access internal|package|public]
///     sesame-error-table-gen --check INPUT.json
///
/// Reads `INPUT.json`, checks every row, and writes the Swift source to `OUTPUT.swift`
/// (only when it changed, so unchanged tables do not trigger recompiles).
package enum Generator {
    /// What the command line asked for.
    package enum Invocation: Equatable, Sendable {
        case generate(input: String, output: String, access: SwiftEmitter.Access)
        case check(input: String)
        case help
    }

    /// The usage text.
    package static let usage = """
        usage: sesame-error-table-gen INPUT.json OUTPUT.swift [--access internal|package|public]
               sesame-error-table-gen --check INPUT.json

        Turns a provider's error table (a JSON data file) into Swift for the Sesame core's
        ErrorRuleTable. The build-tool plugin ErrorTableGeneratorPlugin runs it on every
        `*Errors.json` file of a target. A malformed row stops it with a message that names
        the file, line, row number and row id.

        """

    /// Reads the arguments (without the program name).
    package static func parse(_ arguments: [String]) -> Result<Invocation, UsageFailure> {
        var positionals: [String] = []
        var access = SwiftEmitter.Access.internal
        var check = false
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "-h", "--help": return .success(.help)
            case "--check": check = true
            case "--access":
                guard let value = iterator.next(), let level = SwiftEmitter.Access(rawValue: value) else {
                    return .failure(UsageFailure("--access needs one of internal, package, public"))
                }
                access = level
            default:
                if argument.hasPrefix("--access=") {
                    guard let level = SwiftEmitter.Access(rawValue: String(argument.dropFirst(9))) else {
                        return .failure(UsageFailure("--access needs one of internal, package, public"))
                    }
                    access = level
                } else if argument.hasPrefix("-") && argument != "-" {
                    return .failure(UsageFailure("unknown option '\(argument)'"))
                } else {
                    positionals.append(argument)
                }
            }
        }
        if check {
            guard positionals.count == 1 else { return .failure(UsageFailure("--check takes one INPUT.json")) }
            return .success(.check(input: positionals[0]))
        }
        guard positionals.count == 2 else {
            return .failure(UsageFailure("expected INPUT.json and OUTPUT.swift; got \(positionals.count) path(s)"))
        }
        return .success(.generate(input: positionals[0], output: positionals[1], access: access))
    }

    /// A command line that could not be understood.
    package struct UsageFailure: Error, Equatable, Sendable {
        package var message: String
        init(_ message: String) { self.message = message }
    }

    /// Checks `bytes` read from `file` and returns the Swift source.
    package static func generate(
        _ bytes: [UInt8], file: String, access: SwiftEmitter.Access = .internal
    )
        throws(ErrorTableError) -> String
    {
        let table = try ErrorTable.read(bytes, file: file)
        let base = String(file.split(separator: "/").last ?? Substring(file))
        return SwiftEmitter.source(for: table, sourceFile: base, access: access)
    }
}

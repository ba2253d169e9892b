import Foundation
import Sesame
import SesameDesktop

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `sesame emulator [NAME]`: runs a provider's emulator (its plug-in's
/// `ProviderPlugin/foregroundEmulator`) in the foreground until interrupted.
package struct EmulatorCommand: Sendable, Equatable {
    /// The provider whose emulator runs: the first one with an emulator when none is named.
    package var provider: String
    /// The port on 127.0.0.1; 0 picks a free one.
    package var port: Int
    /// The emulator's own options, by name (a flag has one empty value).
    package var options: [String: [String]]

    package init(provider: String, port: Int = 0, options: [String: [String]] = [:]) {
        self.provider = provider
        self.port = port
        self.options = options
    }

    /// The plug-ins that have an emulator, in the program's order: one the program registered
    /// for the plug-in, else the plug-in's own.
    static var emulators: [(name: String, emulator: any ForegroundEmulator)] {
        Desktop.providers.compactMap { plugin in
            let registered = Desktop.emulators.first { $0.provider == plugin.name }?.foreground
            return (registered ?? plugin.foregroundEmulator).map { (plugin.name, $0) }
        }
    }

    /// The command's spec: `--port` and every emulator's options, and each emulator's help.
    package static var spec: CommandSpec {
        let all = emulators
        var options = [OptionSpec("port", value: "N", "The port on 127.0.0.1 (default 0: any free port).")]
        for (name, emulator) in all {
            for option in emulator.options where !options.contains(where: { $0.name == option.name }) {
                options.append(
                    OptionSpec(
                        option.name, value: option.value, repeatable: option.repeatable, "\(name): \(option.help)"))
            }
        }
        let names = all.map(\.name)
        return CommandSpec(
            name: "emulator",
            summary: "Run a provider's emulator (\(names.joined(separator: ", "))) on 127.0.0.1 until interrupted.",
            synopses: ["[\(names.joined(separator: "|"))] [--port N] [options of that emulator]"],
            discussion: """
                Runs a local stand-in for a provider on 127.0.0.1, prints its addresses and what to try,
                and runs until Ctrl-C (SIGINT) or SIGTERM; then it answers the requests in flight, saves
                its state and exits 0. With no NAME it runs \(names.first ?? "the first provider's")'s.
                """
                    + all.map { "\n\n" + Self.wrapped("\($0.name): \($0.emulator.summary) \($0.emulator.discussion)") }
                    .joined(),
            options: options,
            examples: all.flatMap(\.emulator.examples))
    }

    /// The command's place in the tree.
    package static let definition = CommandDefinition(name: "emulator", spec: spec) { parsed throws(UsageError) in
        .emulator(try EmulatorCommand(parsed))
    }

    /// Checks the parsed arguments: a known emulator, a port, and only that emulator's options.
    package init(_ parsed: ParsedArguments) throws(UsageError) {
        func fail(_ message: String) -> UsageError { UsageError(message, command: "emulator") }
        let all = Self.emulators
        guard !all.isEmpty else { throw fail("this program has no provider with an emulator") }
        if parsed.positionals.count > 1 { throw fail("unexpected argument '\(parsed.positionals[1])'") }
        let name = parsed.positionals.first ?? all[0].name
        guard let emulator = all.first(where: { $0.name == name })?.emulator else {
            throw fail(
                "there is no '\(name.sanitizedForTerminal)' emulator; the emulators are "
                    + all.map(\.name).joined(separator: ", "))
        }
        var port = 0
        if let text = parsed.value("port") {
            guard let value = Int(text), (0...65_535).contains(value) else {
                throw fail("--port must be a port number from 0 to 65535; '\(text)' is not one")
            }
            port = value
        }
        var options: [String: [String]] = [:]
        let own = Set(emulator.options.map(\.name))
        for (option, values) in parsed.values where option != "port" {
            guard own.contains(option) else {
                throw fail("--\(option) is not an option of the \(name) emulator" + Self.itsOptions(emulator))
            }
            options[option] = values
        }
        for flag in parsed.flags {
            guard own.contains(flag) else {
                throw fail("--\(flag) is not an option of the \(name) emulator" + Self.itsOptions(emulator))
            }
            options[flag] = [""]
        }
        self.init(provider: name, port: port, options: options)
    }

    /// `text` as one paragraph broken at spaces into lines of at most `width` characters.
    static func wrapped(_ text: String, width: Int = 92) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    private static func itsOptions(_ emulator: any ForegroundEmulator) -> String {
        emulator.options.isEmpty
            ? "; it takes only --port"
            : "; it takes --port and " + emulator.options.map { "--\($0.name)" }.joined(separator: ", ")
    }

    /// Runs the emulator until SIGINT or SIGTERM.
    package func run(
        io: CommandIO, environment: [String: String] = ProcessInfo.processInfo.environment,
        signals: [Int32] = [SIGINT, SIGTERM]
    ) async -> Int32 {
        guard let emulator = Self.emulators.first(where: { $0.name == provider })?.emulator else {
            io.writeError("\(Desktop.programName) emulator: there is no '\(provider)' emulator.\n")
            return ExitStatus.usage
        }
        let request = EmulatorServeRequest(
            port: port, options: options, environment: environment, signals: signals,
            write: { io.write($0) }, writeError: { io.writeError($0) })
        do {
            let signal = try await emulator.serve(request)
            io.write("Stopped (\(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)")).\n")
            return ExitStatus.success
        } catch let error as DesktopError {
            io.writeError("\(Desktop.programName) emulator: \(error.message)\n")
            return error.status.rawValue
        } catch {
            io.writeError("\(Desktop.programName) emulator: \(error.sentence)\n")
            return ExitStatus.failure
        }
    }
}

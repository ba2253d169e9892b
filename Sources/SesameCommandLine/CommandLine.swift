import Foundation
import Sesame
import SesameDesktop

/// What a `sesame` command line asks for: the result of ``SesameCLI/parse(_:)``, a
/// value that tests compare directly.
package enum Command: Sendable, Equatable {
    /// Print help: for the whole tool (an empty path) or for one command.
    case help(command: String?)
    /// `sesame explain-error`.
    case explainError(ExplainError)
    /// `sesame login|token|logout|switch|permissions PROVIDER ...`.
    case provider(ProviderCommand)
    /// `sesame status`.
    case status(StatusCommand)
    /// `sesame doctor`.
    case doctor(DoctorCommand)
    /// `sesame emulator`.
    case emulator(EmulatorCommand)
    /// `sesame providers`.
    case providers
    /// `sesame git-credential`.
    case gitCredential(GitCredentialCommand)
    /// `sesame kubeconfig PROVIDER`.
    case kubeconfig(KubeconfigCommand)
    /// `sesame credential-helpers`.
    case credentialHelpers(CredentialHelpersCommand)
    /// `sesame --version`.
    case version
    /// `sesame completion SHELL` and `sesame manpage`.
    case completion(CompletionCommand)
    /// `sesame __complete accounts PROVIDER`: what the completion scripts ask at a Tab.
    case completeAccounts(CompletionCommand.Accounts)

    /// The command's name, for messages.
    var name: String {
        switch self {
        case .help: "help"
        case .explainError: "explain-error"
        case .provider(let command): command.commandName
        case .status: "status"
        case .doctor: "doctor"
        case .emulator: "emulator"
        case .providers: "providers"
        case .gitCredential: "git-credential"
        case .kubeconfig: "kubeconfig"
        case .credentialHelpers: "credential-helpers"
        case .version: "version"
        case .completion(let completion): completion.format == .man ? "manpage" : "completion"
        case .completeAccounts: "__complete"
        }
    }
}

/// One command of the tree: its spec, and how to turn its parsed arguments into a ``Command``.
///
/// Adding a command is adding one file with a spec and a builder, a case to ``Command``, and a
/// line to ``SesameCLI/commands``.
package struct CommandDefinition: Sendable {
    /// The command's name, as its spec gives it; known without building the spec.
    package let name: String
    private let makeSpec: @Sendable () -> CommandSpec
    package var build: @Sendable (ParsedArguments) throws(UsageError) -> Command

    /// The command's options and help, built when asked: a command run builds its own spec and
    /// no other (help and completion build them all). Several specs gather every provider's
    /// options and examples; `sesame token` used to build all thirteen at start.
    package var spec: CommandSpec { makeSpec() }

    package init(
        name: String, spec: @autoclosure @escaping @Sendable () -> CommandSpec,
        build: @escaping @Sendable (ParsedArguments) throws(UsageError) -> Command
    ) {
        self.name = name
        self.makeSpec = spec
        self.build = build
    }
}

/// Every exit status `sesame` and the examples return: sysexits(3), plus 1. This is the
/// table the README's "Exit statuses" section and `sesame help` print.
package enum ExitStatus {
    package static let success: Int32 = 0
    /// The person declined or cancelled (a login, a permission request), or an error nothing
    /// else describes.
    package static let failure: Int32 = 1
    /// The person declined or cancelled.
    package static let declined: Int32 = 1
    /// EX_USAGE: the command line was wrong.
    package static let usage: Int32 = 64
    /// EX_DATAERR: the input data was wrong (a token that is not one, an answer that cannot be read).
    package static let dataError: Int32 = 65
    /// EX_NOINPUT: an input file could not be read.
    package static let noInput: Int32 = 66
    /// EX_UNAVAILABLE: a service the command needs is missing or silent (no keyring, a locked
    /// one, D-Bus not answering), or a revocation could not be made.
    package static let unavailable: Int32 = 69
    /// EX_CANTCREAT: a login or state file could not be written or removed.
    package static let cannotCreate: Int32 = 73
    /// EX_IOERR: reading a stored login failed, a logout left it stored, or the output could not be written.
    package static let ioError: Int32 = 74
    /// EX_TEMPFAIL: a passing failure (network, provider busy or down); try again later.
    package static let temporaryFailure: Int32 = 75
    /// EX_NOPERM: not logged in, no such account, a login that needs renewing, or a missing
    /// permission.
    package static let permission: Int32 = 77
    /// EX_CONFIG: a setting (flag, environment variable, config file) is wrong or missing, or this
    /// machine's clock disagrees with a provider's.
    package static let config: Int32 = 78

    /// The table, for help and the README.
    package static let table: [(Int32, String)] = [
        (success, "success"),
        (failure, "the person declined or cancelled, or another failure"),
        (usage, "the command line was wrong"),
        (dataError, "the input was wrong (a token that is not one)"),
        (noInput, "an input file could not be read"),
        (
            unavailable,
            "a service is missing, locked or silent (keyring, D-Bus, gpg-agent, PostgreSQL), no store for logins, "
                + "or revoking failed"
        ),
        (cannotCreate, "a login or state file could not be written or removed"),
        (ioError, "reading a stored login failed, a logout left it stored, or the output could not be written"),
        (temporaryFailure, "network or provider trouble; try again later"),
        (permission, "not logged in, no such account, a login that needs renewing, or a missing permission"),
        (config, "a setting is wrong or missing (also: a store's key or database password, the clock)"),
    ]
}

/// The `sesame` command line: the command tree, the parser and the runner.
package enum SesameCLI {
    /// The version `sesame --version` prints.
    package static let version = "0.1.0"

    /// Every command, in the order help lists them.
    package static let commands: [CommandDefinition] = [
        ProviderCommands.login, StatusCommand.definition, ProviderCommands.token, ProviderCommands.logout,
        ProviderCommands.switchAccount, ProviderCommands.permissions, DoctorCommand.definition,
        EmulatorCommand.definition, ExplainError.definition, ProvidersCommand.definition,
        GitCredentialCommand.definition, KubeconfigCommand.credentialDefinition, KubeconfigCommand.definition,
        CredentialHelpersCommand.definition,
        CompletionCommand.definition, CompletionCommand.manPageDefinition,
    ]

    /// The top-level help.
    package static var help: String {
        var text = """
            \(Desktop.programName): sign in with identity providers from a Linux desktop or terminal, keep the
            logins in the keyring, and understand what the providers' errors mean.

            USAGE
              \(Desktop.programName) [--debug] <command> [options]
              \(Desktop.programName) help [<command>]
              \(Desktop.programName) --version

            COMMANDS

            """
        text += HelpFormatter.table(commands.map { ($0.name, $0.spec.summary) })
        text += """

            A provider with nothing configured (no app or client id) uses Sesame's built-in
            emulator for it, whose state is kept under $XDG_STATE_HOME/sesame/ ('\(Desktop.programName) doctor'
            says which ones).

            --debug (or SESAME_DEBUG=1) prints each HTTP exchange, renewal decision and store
            operation to standard error, never a token or secret.

            EXIT STATUS

            """
        text += HelpFormatter.table(ExitStatus.table.map { (String($0.0), $0.1) })
        text += """

            Run '\(Desktop.programName) <command> --help' for a command's options.

            """
        return text
    }

    /// The usage printed with a usage error: the command's synopsis, or the command list.
    package static func usage(for command: String?) -> String {
        if let command, let spec = commands.first(where: { $0.name == command })?.spec {
            return "USAGE\n\(spec.usage)\n\nRun '\(Desktop.programName) \(command) --help' for more.\n"
        }
        return "USAGE\n  \(Desktop.programName) <command> [options]\n\nCOMMANDS\n"
            + HelpFormatter.table(commands.map { ($0.name, $0.spec.summary) })
            + "\nRun '\(Desktop.programName) help' for more.\n"
    }

    /// Reads a command line (without the program name). Pure: no I/O, so tests call it directly.
    package static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        guard let first = arguments.first else {
            throw UsageError("no command given; name one of: \(commandNames)", command: nil)
        }
        if first == "-h" || first == "--help" { return .help(command: nil) }
        if first == "--version" || first == "-V" {
            guard arguments.count == 1 else {
                throw UsageError("--version takes nothing after it", command: nil)
            }
            return .version
        }
        if first == "help" {
            guard arguments.count <= 2 else {
                throw UsageError("'help' takes at most one command name", command: nil)
            }
            guard let topic = arguments.dropFirst().first else { return .help(command: nil) }
            guard let definition = definition(named: topic) else { throw unknownCommand(topic) }
            return .help(command: definition.name)
        }
        if first.hasPrefix("-") {
            throw UsageError(
                "unknown option '\(first)'; a command comes first, as in '\(Desktop.programName) explain-error ...'",
                command: nil)
        }
        guard let definition = definition(named: first) else { throw unknownCommand(first) }
        let parsed = try ArgumentParser.parse(Array(arguments.dropFirst()), for: definition.spec)
        if parsed.helpRequested { return .help(command: definition.name) }
        return try definition.build(parsed)
    }

    private static var commandNames: String { commands.map(\.name).joined(separator: ", ") }

    private static func definition(named name: String) -> CommandDefinition? {
        commands.first { $0.name == name } ?? hiddenCommands.first { $0.name == name }
    }

    /// Commands for the completion scripts, not for people: in no help, script or page.
    private static let hiddenCommands = [CompletionCommand.accountsDefinition]

    private static func unknownCommand(_ name: String) -> UsageError {
        let near = Suggestion.closest(to: name, in: commands.map(\.name)).map { " Did you mean '\($0)'?" } ?? ""
        return UsageError("unknown command '\(name)'.\(near) Commands: \(commandNames)", command: nil)
    }

    /// Parses and runs a command line on the calling thread (``MainThreadExecutor``), printing
    /// to the standard streams; returns the exit status. What the `sesame` executable calls.
    package static func runOnMainThread(_ arguments: [String]) -> Int32 {
        StandardStreams.holdStandardDescriptors()
        sayStateFileWarnings()
        return checkingOutput(MainThreadExecutor.run { await main(arguments) })
    }

    /// Makes the library's warnings about ignored state files (`JSONStateFile`) this program's,
    /// on standard error.
    package static func sayStateFileWarnings() {
        JSONStateFile.warning.withLock { $0 = { StandardStreams.err($0) } }
    }

    /// `status`, unless what the command printed on standard output was lost (a full disk, a
    /// closed descriptor): that is said on standard error, with 74, since a script reading the
    /// output would otherwise take nothing for the answer. A reader that went away
    /// (`| head -1`) is not a failure.
    package static func checkingOutput(_ status: Int32, program: String = Desktop.programName) -> Int32 {
        guard let code = StandardStreams.outputError else { return status }
        let reason = code == EBADF ? "it is closed" : String(cString: strerror(code))
        StandardStreams.err(
            "\(program): could not write to standard output (\(reason)); nothing reliable was printed.\n")
        return status == ExitStatus.success ? ExitStatus.ioError : status
    }

    /// Parses and runs a command line, printing through `io`; returns the exit status.
    ///
    /// `--debug` before the command (or `SESAME_DEBUG=1`) prints Sesame's log events to standard
    /// error while it runs.
    package static func main(
        _ arguments: [String], io: CommandIO = .standard,
        environment: [String: String] = ProcessEnvironment.current(),
        keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService
    ) async -> Int32 {
        let debugFlags = arguments.prefix { $0 == "--debug" }.count
        guard debugFlags > 0 || DebugLogHandler.requested(by: environment) else {
            return await run(arguments, io: io, environment: environment, keyring: keyring)
        }
        return await SesameLogging.withHandler(DebugLogHandler(writeError: io.writeError)) {
            await run(Array(arguments.dropFirst(debugFlags)), io: io, environment: environment, keyring: keyring)
        }
    }

    private static func run(
        _ arguments: [String], io: CommandIO, environment: [String: String],
        keyring: @escaping DesktopStorage.KeyringFactory
    ) async -> Int32 {
        let command: Command
        do {
            command = try parse(arguments)
        } catch {
            let prefix = Desktop.programName + (error.command.map { " \($0)" } ?? "")
            io.writeError("\(prefix): \(error.message)\n\n\(usage(for: error.command))")
            return ExitStatus.usage
        }
        switch command {
        case .help(let name):
            io.write(name.flatMap { name in definition(named: name)?.spec.help } ?? help)
            return ExitStatus.success
        case .explainError(let explain):
            return await explain.run(io: io)
        case .providers:
            return ProvidersCommand.run(io: io)
        case .version:
            io.write("\(Desktop.programName) \(version)\n")
            return ExitStatus.success
        case .completion(let completion):
            io.write(completion.text)
            return ExitStatus.success
        case .completeAccounts(let accounts):
            return await accounts.run(io: io, environment: environment, keyring: keyring)
        default:
            break
        }
        let context = CommandContext(
            io: io, environment: environment, terminal: .current(environment: environment), keyring: keyring)
        var providerName = "PROVIDER"
        do {
            switch command {
            case .provider(let providerCommand):
                providerName = providerCommand.provider
                return try await AccountCommands(command: providerCommand, context: context).run()
            case .status(let status):
                return try await status.run(context: context)
            case .doctor(let doctor):
                return await doctor.run(context: context)
            case .emulator(let emulator):
                return await emulator.run(io: io, environment: environment)
            case .gitCredential(let gitCredential):
                return try await gitCredential.run(context: context)
            case .kubeconfig(let kubeconfig):
                return try kubeconfig.run(context: context)
            case .credentialHelpers(let helpers):
                return try helpers.run(context: context)
            default:
                return ExitStatus.success
            }
        } catch {
            let failure = CommandFailure.from(error, provider: providerName)
            if failure.status == ExitStatus.usage, case .provider(let providerCommand) = command {
                io.writeError(
                    "\(Desktop.programName) \(providerCommand.commandName): \(Terminal.printable(failure.message))\n\n"
                        + usage(for: providerCommand.commandName))
                return failure.status
            }
            // The message may quote what a server sent: printed without control characters.
            io.writeError("\(Desktop.programName) \(command.name): \(Terminal.printable(failure.message))\n")
            return failure.status
        }
    }
}

/// Where a command reads and writes. Tests substitute buffers.
package struct CommandIO: Sendable {
    /// Reads standard input to its end, or until more than `limit` bytes have come: at most
    /// `limit + 1` bytes, so that the caller refuses too much without reading the rest (endless
    /// input, `</dev/zero`, ends too).
    package var readStandardInput: @Sendable (_ limit: Int) async -> Data
    /// Reads a secret from standard input: on a terminal, a prompt (the argument), echo off, and
    /// one line; from a pipe, everything to the end. Bounded as ``readStandardInput``.
    package var readSecret: @Sendable (_ prompt: String, _ limit: Int) async -> Data
    /// Writes to standard output.
    package var write: @Sendable (String) -> Void
    /// Writes to standard error.
    package var writeError: @Sendable (String) -> Void

    /// - Parameter readSecret: when `nil`, the secret is all of `readStandardInput`.
    package init(
        readStandardInput: @escaping @Sendable (_ limit: Int) async -> Data,
        readSecret: (@Sendable (_ prompt: String, _ limit: Int) async -> Data)? = nil,
        write: @escaping @Sendable (String) -> Void,
        writeError: @escaping @Sendable (String) -> Void
    ) {
        self.readStandardInput = readStandardInput
        self.readSecret = readSecret ?? { _, limit in await readStandardInput(limit) }
        self.write = write
        self.writeError = writeError
    }

    /// The process's standard streams.
    package static let standard = CommandIO(
        readStandardInput: { limit in
            // On a thread of its own: reading may wait as long as the person takes to paste.
            await onOwnThread { Data(StandardStreams.read(STDIN_FILENO, upTo: limit)) }
        },
        readSecret: { prompt, limit in
            // On a thread of its own: the person may take a while to paste.
            await onOwnThread { Data(Terminal.readSecretBlocking(prompt: prompt, limit: limit)) }
        },
        // Never FileHandle.write(_:), which traps on EPIPE: a reader that went away
        // (`sesame token PROVIDER | true`) ends the output quietly.
        write: { StandardStreams.out($0) },
        writeError: { StandardStreams.err($0) }
    )
}

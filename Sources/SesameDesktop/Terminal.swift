import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the terminal can do: whether people are there, and whether to use colour.
///
/// Colour is decided per stream: what goes to standard error is coloured only when standard
/// error is a terminal, what goes to standard output only when standard output is one, and
/// neither when `NO_COLOR` is set (no-color.org) or `TERM` is `dumb`. So `sesame status > file`
/// and `sesame status | cat -v` get plain text whatever standard error is. A spinner only on a
/// terminal; plain lines otherwise, so logs and pipes stay readable.
public struct Terminal: Sendable, Hashable {
    /// Whether standard input is a terminal (a person can answer a prompt).
    public var inputIsInteractive: Bool
    /// Whether standard error is a terminal (spinners and colour make sense).
    public var errorIsInteractive: Bool
    /// Whether to colour what this value styles. For ``current(environment:)`` that is standard
    /// error; ``standardOutput`` gives the value for standard output.
    public var usesColor: Bool
    /// Whether standard output is a terminal.
    public var outputIsInteractive: Bool
    /// Whether to colour what is written to standard output.
    public var outputUsesColor: Bool
    /// Whether ``say(_:)`` writes to standard error. `false` for ``silent``, what a library app
    /// gets unless it hands in a terminal.
    public var speaks = true
    /// Whether the terminal shows more than ASCII: `false` under `TERM=dumb` or a locale that is
    /// not UTF-8 (`LC_ALL`, else `LC_CTYPE`, else `LANG`), where the spinner turns with `|/-\`.
    public var usesUnicode = true

    /// Creates a description of a terminal.
    ///
    /// - Parameters:
    ///   - inputIsInteractive: whether standard input is a terminal.
    ///   - errorIsInteractive: whether standard error is a terminal.
    ///   - usesColor: whether colour is wanted at all; each stream gets it only when it is a
    ///     terminal.
    ///   - outputIsInteractive: whether standard output is a terminal.
    public init(
        inputIsInteractive: Bool, errorIsInteractive: Bool, usesColor: Bool, outputIsInteractive: Bool = false
    ) {
        self.inputIsInteractive = inputIsInteractive
        self.errorIsInteractive = errorIsInteractive
        self.outputIsInteractive = outputIsInteractive
        self.usesColor = usesColor && errorIsInteractive
        self.outputUsesColor = usesColor && outputIsInteractive
    }

    /// A terminal that says nothing and asks nothing: what the `Desktop.<provider>(...)` entry
    /// points use unless the app hands in one, so the library never writes to the app's standard
    /// output or error by itself.
    public static let silent: Terminal = {
        var terminal = Terminal(inputIsInteractive: false, errorIsInteractive: false, usesColor: false)
        terminal.speaks = false
        return terminal
    }()

    /// The process's own terminal, in `environment`.
    public static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> Terminal {
        var terminal = Terminal(
            inputIsInteractive: isatty(STDIN_FILENO) == 1, errorIsInteractive: isatty(STDERR_FILENO) == 1,
            usesColor: environment["NO_COLOR"] == nil && environment["TERM"] != "dumb",
            outputIsInteractive: isatty(STDOUT_FILENO) == 1)
        terminal.usesUnicode = showsUnicode(environment: environment)
        return terminal
    }

    /// Whether `environment` describes a terminal that shows more than ASCII: not `TERM=dumb`,
    /// and a UTF-8 locale (the first of `LC_ALL`, `LC_CTYPE`, `LANG` that is set decides).
    package static func showsUnicode(environment: [String: String]) -> Bool {
        guard environment["TERM"] != "dumb" else { return false }
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let lowered = locale.lowercased()
        return lowered.contains("utf-8") || lowered.contains("utf8")
    }

    /// The same terminal, styling for standard output: its colours follow whether standard output
    /// is a terminal, not standard error.
    public var standardOutput: Terminal {
        var copy = self
        copy.usesColor = outputUsesColor
        return copy
    }

    /// `text` in bold, when colour is on.
    public func bold(_ text: String) -> String { usesColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    /// `text` dimmed, when colour is on.
    public func dim(_ text: String) -> String { usesColor ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
    /// `text` in green, when colour is on.
    public func green(_ text: String) -> String { usesColor ? "\u{1B}[32m\(text)\u{1B}[0m" : text }
    /// `text` in red, when colour is on.
    public func red(_ text: String) -> String { usesColor ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
    /// `text` in yellow, when colour is on.
    public func yellow(_ text: String) -> String { usesColor ? "\u{1B}[33m\(text)\u{1B}[0m" : text }

    /// Writes to standard error, unless this is ``silent``.
    public func say(_ text: String) {
        if speaks { StandardStreams.err(text) }
    }

    /// `text` from outside the program (a name a server sent, a permission name, an account name
    /// from a file) made safe to print on one line: control characters (C0, DEL, C1, such as the
    /// escape that starts a terminal sequence, and line breaks that would forge a line) and the
    /// bidirectional overrides are removed. Everything else is kept.
    public static func printable(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars where !isUnprintable(scalar) { scalars.append(scalar) }
        return String(scalars)
    }

    private static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true  // bidirectional controls
        case 0x2028, 0x2029: return true  // line and paragraph separators
        default: return false
        }
    }
}

/// A spinner on standard error while something is waited for; one plain line when standard
/// error is not a terminal.
public final class Spinner: Sendable {
    private let terminal: Terminal
    private let task = Locked<Task<Void, Never>?>(nil)

    /// Starts spinning with `message` (or prints it once, off a terminal).
    public init(_ message: String, terminal: Terminal) {
        self.terminal = terminal
        guard terminal.errorIsInteractive else {
            terminal.say("\(message)\n")
            return
        }
        let frames = Self.frames(for: terminal)
        task.withLock {
            $0 = Task.detached {
                var index = 0
                while !Task.isCancelled {
                    terminal.say("\r\(terminal.yellow(frames[index % frames.count])) \(message)")
                    index += 1
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
        }
    }

    /// What the spinner turns through: Braille dots where the terminal shows Unicode, `|/-\`
    /// otherwise (``Terminal/usesUnicode``).
    package static func frames(for terminal: Terminal) -> [String] {
        terminal.usesUnicode ? ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"] : ["|", "/", "-", "\\"]
    }

    /// Stops spinning and ends the line with `result`.
    public func stop(_ result: String) {
        let running = task.withLock { state -> Task<Void, Never>? in
            defer { state = nil }
            return state
        }
        guard let running else {
            if !terminal.errorIsInteractive { terminal.say("\(result)\n") }
            return
        }
        running.cancel()
        terminal.say("\r\u{1B}[K\(result)\n")
    }
}

/// Shows a device login's code on a terminal with a spinner while it waits, and, against the
/// built-in emulator only, offers the emulator's approval step right there.
public struct TerminalLoginPresenter: DeviceCodePresenter {
    /// The terminal.
    public var terminal: Terminal
    /// The provider's name ("Facebook").
    public var providerName: String
    /// The built-in emulator's approval step, when the app runs against it; never set for a
    /// real provider.
    public var emulatorApproval: EmulatorApproval?
    private let spinner = SpinnerSlot()

    /// Creates a presenter.
    public init(terminal: Terminal, providerName: String, emulatorApproval: EmulatorApproval? = nil) {
        self.terminal = terminal
        self.providerName = providerName
        self.emulatorApproval = emulatorApproval
    }

    /// Whether the code reaches anyone: `false` on ``Terminal/silent`` (a library app that gave
    /// no presenter of its own), unless the built-in emulator approves the login by itself; the
    /// device login then fails at once instead of waiting until the code expires.
    public var showsCode: Bool { terminal.speaks || emulatorApproval?.mode == .automatic }

    public func present(_ authorization: DeviceAuthorization) async {
        terminal.say(
            "To sign in to \(providerName), open \(authorization.verificationURL.absoluteString) and enter the code\n\n"
                + "    \(terminal.bold(authorization.userCode))\n\n")
        if let emulatorApproval { await emulatorApproval.offer(.device(userCode: authorization.userCode)) }
        let message =
            "Waiting for you to finish (the code expires in \(Int(authorization.expiresIn.components.seconds / 60)) min)..."
        spinner.value.withLock { $0 = Spinner(message, terminal: terminal) }
    }

    public func finished(_ end: DeviceLoginEnd) async {
        let result: String
        switch end {
        case .succeeded: result = terminal.green("✓") + " Signed in."
        case .cancelled: result = "Cancelled."
        case .failed(let error) where error.category == .userCancelled: result = "The sign-in was declined."
        case .failed(let error):
            result = terminal.red("✗") + " The sign-in failed: \(error.userMessage ?? error.message)"
        }
        let current = spinner.value.withLock { state -> Spinner? in
            defer { state = nil }
            return state
        }
        if let current { current.stop(result) } else { terminal.say("\(result)\n") }
    }
}

/// The presenter's running spinner, behind its lock.
final class SpinnerSlot: Sendable {
    let value = Locked<Spinner?>(nil)
}

import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the terminal can do: whether people are there, and whether to use colour.
///
/// Colour only when standard error is a terminal and `NO_COLOR` is not set (no-color.org);
/// a spinner only on a terminal; plain lines otherwise, so logs and pipes stay readable.
public struct Terminal: Sendable, Hashable {
    /// Whether standard input is a terminal (a person can answer a prompt).
    public var inputIsInteractive: Bool
    /// Whether standard error is a terminal (spinners and colour make sense).
    public var errorIsInteractive: Bool
    /// Whether to colour the output.
    public var usesColor: Bool

    /// Creates a description of a terminal.
    public init(inputIsInteractive: Bool, errorIsInteractive: Bool, usesColor: Bool) {
        self.inputIsInteractive = inputIsInteractive
        self.errorIsInteractive = errorIsInteractive
        self.usesColor = usesColor && errorIsInteractive
    }

    /// The process's own terminal, in `environment`.
    public static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> Terminal {
        let errorTTY = isatty(STDERR_FILENO) == 1
        return Terminal(
            inputIsInteractive: isatty(STDIN_FILENO) == 1, errorIsInteractive: errorTTY,
            usesColor: errorTTY && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb")
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

    /// Writes to standard error.
    public func say(_ text: String) { StandardStreams.err(text) }
}

/// A spinner on standard error while something is waited for; one plain line when standard
/// error is not a terminal.
public final class Spinner: Sendable {
    private let terminal: Terminal
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts spinning with `message` (or prints it once, off a terminal).
    public init(_ message: String, terminal: Terminal) {
        self.terminal = terminal
        guard terminal.errorIsInteractive else {
            terminal.say("\(message)\n")
            return
        }
        let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
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
    let value = Mutex<Spinner?>(nil)
}

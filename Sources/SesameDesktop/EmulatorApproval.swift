import Foundation
import Sesame

/// The built-in emulator's approval step, offered on the terminal so that a person with no
/// browser (or a script, when asked) can finish a demo login. Only ever made for the emulator
/// that a program asked for (``BuiltInEmulators``), never for a real provider, and every line it prints
/// starts with `[emulator]`.
public struct EmulatorApproval: Sendable {
    /// When to approve.
    public enum Mode: String, Sendable, Hashable {
        /// Approve at once, without asking (`SESAME_EMULATOR_APPROVE=auto`): for scripts and the demo.
        case automatic = "auto"
        /// Ask on the terminal (the default when standard input is a terminal).
        case prompt
        /// Do nothing: approve through the emulator's page or its admin API
        /// (`SESAME_EMULATOR_APPROVE=off`, and the default off a terminal).
        case off
    }

    /// A step a login waits on.
    public enum Step: Sendable {
        /// A device login waiting for its code to be entered.
        case device(userCode: String)
        /// A browser login whose dialog is at this address.
        case dialog(URL)
    }

    /// The mode `SESAME_EMULATOR_APPROVE` asks for: `auto`, `prompt` or `off`; by default a
    /// prompt when standard input is a terminal, nothing otherwise.
    ///
    /// - Throws: ``DesktopError`` (78) for any other value.
    public static func mode(environment: [String: String], terminal: Terminal) throws -> Mode {
        guard let text = environment["SESAME_EMULATOR_APPROVE"], !text.isEmpty else {
            return terminal.inputIsInteractive ? .prompt : .off
        }
        guard let mode = Mode(rawValue: text) else {
            throw DesktopError(
                "SESAME_EMULATOR_APPROVE is '\(text.sanitizedForTerminal)', which is not a mode; use auto, prompt or off.",
                status: .config)
        }
        return mode
    }

    /// The emulator.
    public var emulator: RunningEmulator
    /// When to approve.
    public var mode: Mode
    /// The terminal.
    public var terminal: Terminal
    /// Follows the dialog's redirect back to the app's loopback receiver.
    public var transport: any HTTPTransport

    /// Creates an approval step.
    public init(emulator: RunningEmulator, mode: Mode, terminal: Terminal, transport: any HTTPTransport) {
        self.emulator = emulator
        self.mode = mode
        self.terminal = terminal
        self.transport = transport
    }

    private var person: String { emulator.personName }
    private var label: String { terminal.yellow("[emulator]") }

    /// Offers the approval of `step` (or approves it at once, or does nothing, by ``mode``).
    /// Returns at once; the approval happens in the background.
    public func offer(_ step: Step) async {
        switch mode {
        case .off:
            return
        case .automatic:
            terminal.say(
                "\(label) Approving this login as \(person) in the built-in emulator (SESAME_EMULATOR_APPROVE=auto); "
                    + "no real account is involved.\n")
            Task { await approve(step) }
        case .prompt:
            terminal.say(
                "\(label) This is Sesame's built-in emulator, not the real provider. Press Enter to approve the login "
                    + "as \(person) here, or use the address above.\n")
            Task {
                // Reading the terminal blocks until the person presses Enter, so on a thread of its own.
                guard await onOwnThread({ readLine() }) != nil else { return }
                await approve(step)
            }
        }
    }

    private func approve(_ step: Step) async {
        do {
            switch step {
            case .device(let userCode):
                try await emulator.approveDevice(userCode)
            case .dialog(let url):
                let redirect = try await emulator.approveDialog(url)
                // The browser's part: follow the redirect to the app's loopback receiver.
                _ = try await transport.send(HTTPRequest(method: .get, url: redirect))
            }
        } catch {
            terminal.say(
                "\(label) The approval did not go through (\(error.sentence)); approve it at the address above.\n")
        }
    }
}

/// Opens the system browser, except against the built-in emulator with no display (or
/// `--no-browser`), where the emulator's approval step is offered on the terminal instead.
public struct DesktopBrowserOpener: BrowserOpener {
    /// The system opener (prints the address when there is no display).
    public var system: SystemBrowserOpener
    /// The emulator's approval step, when running against the built-in emulator.
    public var emulatorApproval: EmulatorApproval?

    /// Creates an opener.
    public init(system: SystemBrowserOpener, emulatorApproval: EmulatorApproval?) {
        self.system = system
        self.emulatorApproval = emulatorApproval
    }

    public func open(_ url: URL) async throws {
        do {
            try await system.open(url)
        } catch let error as AuthError where error.loginFailedReason == .noPresenter {
            // Nowhere to show the address: only the emulator's automatic approval still gets the login through.
            guard emulatorApproval?.mode == .automatic else { throw error }
        }
        if let emulatorApproval, system.mode == .printOnly || !system.hasDisplay {
            await emulatorApproval.offer(.dialog(url))
        }
    }
}

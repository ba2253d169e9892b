import Foundation
import Sesame

/// Opens the system browser with `xdg-open`, or prints the address for the person to open.
///
/// With ``Mode/automatic`` (the default), when there is no graphical display (neither
/// `DISPLAY` nor `WAYLAND_DISPLAY` is set, as over SSH) or `xdg-open` fails, the address is
/// printed with a sentence saying why; ``Mode/printOnly`` only prints. Printing goes to
/// ``output`` (standard error by default, so that standard output stays clean for the program);
/// with no output (an app without a terminal) nothing is printed, and where the address would be
/// the only way in, opening fails at once with `AuthError.noBrowserOpener(provider:)`.
public struct SystemBrowserOpener: BrowserOpener {
    /// Whether to try a browser.
    public enum Mode: Sendable, Hashable {
        /// Run the command when there is a display; print the address otherwise or on failure.
        case automatic
        /// Only print the address.
        case printOnly
    }

    /// Whether to try a browser.
    public var mode: Mode
    /// The command, looked up on `PATH`; the URL is its last argument.
    public var command: [String]
    /// The environment the display is looked for in, and the command runs with.
    public var environment: [String: String]
    /// Where the address and messages are written; `nil` writes nothing.
    public var output: FileHandle?
    /// How long to wait for the command to exit before taking it as having worked (some
    /// `xdg-open` set-ups only return when the browser closes).
    public var launchWait: Duration
    /// What ``launchWait`` is measured on.
    public var clock: any Clock<Duration>
    /// Whether ``Mode/automatic`` only runs the command when there is a display (`true`, right
    /// for `xdg-open`); `false` for a command the person chose, which may work without one (a
    /// text browser, a script that hands the address to another machine).
    public var requiresDisplay = true

    /// Creates an opener.
    public init(
        mode: Mode = .automatic, command: [String] = ["xdg-open"],
        environment: [String: String] = ProcessInfo.processInfo.environment, output: FileHandle? = .standardError,
        launchWait: Duration = .seconds(5), clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.mode = mode
        self.command = command
        self.environment = environment
        self.output = output
        self.launchWait = launchWait
        self.clock = clock
    }

    /// Whether the environment names a graphical display.
    public var hasDisplay: Bool {
        ["DISPLAY", "WAYLAND_DISPLAY"].contains { !(environment[$0] ?? "").isEmpty }
    }

    /// - Throws: `AuthError.noBrowserOpener(provider:)` when there is no ``output`` and no
    ///   browser was opened.
    public func open(_ url: URL) async throws {
        switch mode {
        case .printOnly:
            try write("Open this address in a browser to sign in:\n\n    \(url.absoluteString)\n\n")
        case .automatic:
            guard hasDisplay || !requiresDisplay else {
                try write(
                    "No graphical display was found (DISPLAY and WAYLAND_DISPLAY are not set), so no browser was "
                        + "opened. Open this address in a browser to sign in:\n\n    \(url.absoluteString)\n\n")
                return
            }
            switch await launch(url) {
            case .exited(0), .stillRunning:
                try write(
                    "A browser window was opened to sign in. If none appeared, open this address:\n\n    "
                        + "\(url.absoluteString)\n\n", onlyWay: false)
            case .exited(let status):
                try write(
                    "\(command.first ?? "The browser command") could not open a browser (exit status \(status)). "
                        + "Open this address in a browser to sign in:\n\n    \(url.absoluteString)\n\n")
            case .launchFailed(let reason):
                try write(
                    "\(command.first ?? "The browser command") could not be run (\(reason)). "
                        + "Open this address in a browser to sign in:\n\n    \(url.absoluteString)\n\n")
            }
        }
    }

    private enum LaunchOutcome: Sendable {
        case exited(Int32)
        case launchFailed(String)
        case stillRunning
    }

    private func launch(_ url: URL) async -> LaunchOutcome {
        guard !command.isEmpty else { return .launchFailed("no command is configured") }
        let clock = clock
        let launchWait = launchWait
        let command = command
        let environment = environment
        return await withCheckedContinuation { (continuation: CheckedContinuation<LaunchOutcome, Never>) in
            let pending = Locked<(CheckedContinuation<LaunchOutcome, Never>?, Task<Void, Never>?)>((continuation, nil))
            @Sendable func finish(_ outcome: LaunchOutcome) {
                let (waiter, timer) = pending.withLock { state in
                    defer { state = (nil, nil) }
                    return state
                }
                timer?.cancel()
                waiter?.resume(returning: outcome)
            }
            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: "/usr/bin/env"), arguments: command + [url.absoluteString],
                environment: environment, standardInput: .null, standardOutput: .null, standardError: .null
            ) { status in
                // `env` exits 127 when the command is not found.
                finish(status == 127 ? .launchFailed("command not found") : .exited(status))
            }
            // Started from a task: the spawn must not hold the calling thread (ChildProcess.start).
            Task {
                do {
                    try await process.start()
                } catch {
                    finish(.launchFailed("\(error)"))
                    return
                }
                let timer = Task {
                    try? await clock.sleep(for: launchWait)
                    if !Task.isCancelled { finish(.stillRunning) }
                }
                let finished = pending.withLock { state in
                    if state.0 == nil { return true }
                    state.1 = timer
                    return false
                }
                if finished { timer.cancel() }
            }
        }
    }

    /// Writes `text` to ``output``; with none, a message that is the person's only way to the
    /// address (anything but "a browser window was opened") is an error instead.
    ///
    /// write(2), never FileHandle.write(_:), which traps when the reader is gone (EPIPE).
    private func write(_ text: String, onlyWay: Bool = true) throws {
        guard let output else {
            if onlyWay { throw AuthError.noBrowserOpener() }
            return
        }
        StandardStreams.write(Array(text.utf8), to: output.fileDescriptor)
    }
}

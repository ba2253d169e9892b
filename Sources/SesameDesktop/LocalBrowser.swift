import Foundation
import Sesame
import SesameHTTPServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Whether a login can open a browser on this machine, and with what; chosen by `--no-browser`,
/// then `SESAME_BROWSER`, then the config file's `browser`, else by looking at the session.
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | browser | `--no-browser` (none) | `SESAME_BROWSER` | `browser` |
///
/// `SESAME_BROWSER` (or `browser`) is a command that opens an address given as its last
/// argument (like `BROWSER`), run even without a display; `none`, or an empty
/// `SESAME_BROWSER`, means there is none. Otherwise there is none in an SSH session
/// (`SSH_CONNECTION` or `SSH_TTY` is set) or without a display (neither `DISPLAY` nor
/// `WAYLAND_DISPLAY`), and `xdg-open` is used where there is one.
///
/// With no local browser a login uses the provider's device login where it has one; a browser
/// login prints its address and, on a terminal, reads the redirect address the person pastes
/// back (`PastedRedirect` in the core), while its loopback listener still waits in case a browser on this
/// machine answers first.
public struct LocalBrowser: Sendable, Hashable {
    /// How the sign-in page is shown.
    public enum Kind: Sendable, Hashable {
        /// `xdg-open`, where there is a display.
        case system
        /// A command the person named; the address is its last argument.
        case command([String])
        /// No browser here: the address is printed.
        case none
    }

    /// How the sign-in page is shown.
    public var kind: Kind
    /// Why, for messages and `sesame doctor`: `--no-browser`, `SESAME_BROWSER`, the config file,
    /// "an SSH session (SSH_CONNECTION is set)", "no display (…)", or `default`.
    public var source: String

    /// Creates a choice.
    public init(_ kind: Kind, source: String) {
        self.kind = kind
        self.source = source
    }

    /// Whether a browser on this machine can be opened.
    public var isAvailable: Bool { kind != .none }

    /// What the environment says when nothing was chosen: none in an SSH session or without a
    /// display, `xdg-open` otherwise.
    public static func detected(environment: [String: String]) -> LocalBrowser {
        func set(_ name: String) -> Bool { !(environment[name] ?? "").isEmpty }
        if let name = ["SSH_CONNECTION", "SSH_TTY"].first(where: set) {
            return LocalBrowser(.none, source: "an SSH session (\(name) is set)")
        }
        guard set("DISPLAY") || set("WAYLAND_DISPLAY") else {
            return LocalBrowser(.none, source: "no display (DISPLAY and WAYLAND_DISPLAY are not set)")
        }
        return LocalBrowser(.system, source: "default")
    }

    /// The choice `text` names: a command (split at spaces), or none for `none` or nothing;
    /// `source` says where it came from.
    public static func named(_ text: String, source: String) -> LocalBrowser {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        if words.isEmpty || words == ["none"] { return LocalBrowser(.none, source: source) }
        return LocalBrowser(.command(words), source: source)
    }

    /// The opener a browser login uses: the system's or the named command, or printing only.
    /// Against the built-in emulator its approval step is offered where no browser opens.
    /// Messages go to `terminal`; on ``Terminal/silent`` none, and a login whose address could
    /// only be printed fails at once (`AuthError.noBrowserOpener(provider:)`).
    public func opener(
        openBrowser: Bool = true, environment: [String: String], emulatorApproval: EmulatorApproval? = nil,
        terminal: Terminal = .current()
    ) -> any BrowserOpener {
        var system = SystemBrowserOpener(
            mode: .printOnly, environment: environment, output: terminal.speaks ? .standardError : nil)
        if openBrowser {
            switch kind {
            case .system: system.mode = .automatic
            case .command(let words):
                system.mode = .automatic
                system.command = words
                system.requiresDisplay = false
            case .none: break
            }
        }
        return DesktopBrowserOpener(system: system, emulatorApproval: emulatorApproval)
    }

    /// The receiver a browser login uses: the loopback listener, which also reads a pasted
    /// redirect address from the terminal when no browser is opened here (`openBrowser` false or
    /// none available), standard input is a terminal, and no emulator approval step reads it.
    public func receiver(
        openBrowser: Bool = true, appName: String, terminal: Terminal, emulatorApproval: EmulatorApproval? = nil
    ) -> LoopbackRedirectReceiver {
        let pastes = (!openBrowser || !isAvailable) && terminal.inputIsInteractive && emulatorApproval == nil
        guard pastes else { return LoopbackRedirectReceiver(appName: appName) }
        // Signing in on another machine and copying the address back takes longer than a click.
        return LoopbackRedirectReceiver(
            timeout: .seconds(600), appName: appName, pasteSource: TerminalPasteSource(terminal: terminal))
    }
}

/// Reads a pasted redirect address from standard input, a terminal: a prompt on standard error,
/// then one line. Ctrl-D (the end of the input) and Ctrl-C (SIGINT, caught only while it
/// waits) cancel the login; a redirect that arrives meanwhile by the loopback listener stops the
/// reading.
public struct TerminalPasteSource: RedirectPasteSource {
    /// The terminal the prompts go to.
    public var terminal: Terminal

    /// Creates a source.
    public init(terminal: Terminal) { self.terminal = terminal }

    public func nextPaste(prompt: String) async -> String? {
        guard let reader = InterruptibleLineReader(descriptor: STDIN_FILENO) else { return nil }
        // Caught before the prompt shows: a Ctrl-C in answer to it cancels, never kills.
        let interrupt = try? reader.catching(SIGINT)
        defer { interrupt?.restore() }
        terminal.say(prompt)
        let line = await onOwnThread({ reader.readLine() }, onCancel: { reader.stop() })
        if line == nil, !Task.isCancelled { terminal.say("\n") }
        return line.map { String(decoding: $0, as: UTF8.self) }
    }
}

/// One line read from a descriptor, which ``stop()`` ends early from any thread (a self-pipe
/// beside the descriptor in poll(2)).
final class InterruptibleLineReader: Sendable {
    private let descriptor: Int32
    private let wake: (read: Int32, write: Int32)

    init?(descriptor: Int32) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        // Never blocks a signal handler writing to it: a full pipe has woken the reader already.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        self.descriptor = descriptor
        wake = (ends[0], ends[1])
    }

    deinit {
        close(wake.read)
        close(wake.write)
    }

    /// Catches `signal` while the returned value lives, each arrival making ``readLine()`` return
    /// `nil` as ``stop()`` does.
    func catching(_ signal: Int32) throws -> CaughtSignal { try CaughtSignal(signal, into: wake.write) }

    /// Makes ``readLine()`` return `nil` now, or at once when it is called later.
    func stop() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// The next line without its line end; `nil` at the end of the input, on a read error, or
    /// once stopped. A line longer than `limit` bytes ends there (`limit + 1` bytes, for the
    /// caller to refuse), so that endless input without a line end (`</dev/zero`) is not held whole.
    func readLine(limit: Int = 64 * 1024) -> [UInt8]? {
        var line: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var watched = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&watched, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, watched[1].revents == 0 else { return nil }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return nil }
            line.append(contentsOf: buffer[0..<count])
            if let end = line.firstIndex(of: UInt8(ascii: "\n")) {
                var result = Array(line[..<end])
                if result.last == UInt8(ascii: "\r") { result.removeLast() }
                return result
            }
            if line.count > limit { return Array(line.prefix(limit + 1)) }
        }
    }
}

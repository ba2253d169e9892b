import Foundation
import Sesame
import SesameDesktop
import SesameHTTPServer
import Testing

/// Whether a login opens a browser here: `--no-browser`, then `SESAME_BROWSER`, then the config
/// file's `browser`, then what the session looks like (SSH, a display).
@Suite("the local browser: flag, environment, config file, then the session")
struct LocalBrowserTests {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var noBrowser = false
        var environment: [String: String] = [:]
        var file: String?
        var kind: LocalBrowser.Kind
        var source: String

        var description: String { name }
    }

    static let display = ["DISPLAY": ":0"]

    static let cases: [Case] = [
        Case(name: "a desktop session", environment: display, kind: .system, source: "default"),
        Case(
            name: "a Wayland session", environment: ["WAYLAND_DISPLAY": "wayland-0"], kind: .system, source: "default"),
        Case(name: "no display", kind: .none, source: "no display (DISPLAY and WAYLAND_DISPLAY are not set)"),
        Case(
            name: "an SSH session with X forwarding",
            environment: ["DISPLAY": "localhost:10.0", "SSH_TTY": "/dev/pts/3"],
            kind: .none, source: "an SSH session (SSH_TTY is set)"),
        Case(
            name: "--no-browser on a desktop", noBrowser: true, environment: display, kind: .none,
            source: "--no-browser"),
        Case(
            name: "--no-browser beats SESAME_BROWSER", noBrowser: true, environment: ["SESAME_BROWSER": "firefox"],
            kind: .none, source: "--no-browser"),
        Case(
            name: "SESAME_BROWSER=none on a desktop", environment: display.merging(["SESAME_BROWSER": "none"]) { $1 },
            kind: .none, source: "SESAME_BROWSER"),
        Case(
            name: "an empty SESAME_BROWSER", environment: display.merging(["SESAME_BROWSER": ""]) { $1 }, kind: .none,
            source: "SESAME_BROWSER"),
        Case(
            name: "SESAME_BROWSER names a command, even over SSH",
            environment: ["SESAME_BROWSER": "w3m -o confirm_qq=0", "SSH_CONNECTION": "a b c d"],
            kind: .command(["w3m", "-o", "confirm_qq=0"]), source: "SESAME_BROWSER"),
        Case(
            name: "SESAME_BROWSER beats the config file", environment: ["SESAME_BROWSER": "lynx"],
            file: #"{"browser": "none"}"#, kind: .command(["lynx"]), source: "SESAME_BROWSER"),
        Case(
            name: "the config file's browser", environment: display, file: #"{"browser": "none"}"#, kind: .none,
            source: "(browser)"),
        Case(
            name: "the config file's command", file: #"{"browser": "open-on-laptop"}"#,
            kind: .command(["open-on-laptop"]), source: "(browser)"),
    ]

    /// A throw-away XDG config home holding `file` as config.json, if any.
    static func environment(_ extra: [String: String], file: String?) throws -> [String: String] {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appending(path: "sesame"), withIntermediateDirectories: true)
        if let file { try Data(file.utf8).write(to: root.appending(path: "sesame/config.json")) }
        return extra.merging(["XDG_CONFIG_HOME": root.path, "XDG_STATE_HOME": root.appending(path: "state").path]) {
            $1
        }
    }

    @Test("the browser a login uses, and why", arguments: cases)
    func resolved(_ setup: Case) throws {
        let environment = try Self.environment(setup.environment, file: setup.file)
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(noBrowser: setup.noBrowser), environment: environment, knownSections: ["oidc"])
        #expect(configuration.browser.kind == setup.kind)
        #expect(configuration.browser.source.hasSuffix(setup.source), "\(configuration.browser.source)")
        #expect(configuration.browser.isAvailable == (setup.kind != .none))
    }

    @Test("a config file whose browser is not a string is refused (78), naming the key")
    func wrongType() throws {
        let environment = try Self.environment([:], file: #"{"browser": false}"#)
        #expect {
            _ = try DesktopConfiguration.resolve(environment: environment, knownSections: [])
        } throws: { error in
            guard let error = error as? DesktopError else { return false }
            return error.status == .config && error.message.contains("(browser) is true/false")
        }
    }

    @Test(
        "with no browser here (or --web --no-browser), a browser login reads a pasted address, and only from a terminal"
    )
    func pastesOnlyOnATerminal() {
        let none = LocalBrowser(.none, source: "test")
        let terminal = Terminal(inputIsInteractive: true, errorIsInteractive: true, usesColor: false)
        let pipe = Terminal(inputIsInteractive: false, errorIsInteractive: false, usesColor: false)
        #expect(none.receiver(appName: "t", terminal: terminal).pasteSource != nil)
        #expect(none.receiver(appName: "t", terminal: pipe).pasteSource == nil)
        let system = LocalBrowser(.system, source: "default")
        #expect(system.receiver(appName: "t", terminal: terminal).pasteSource == nil)
        #expect(system.receiver(openBrowser: false, appName: "t", terminal: terminal).pasteSource != nil)
    }
}

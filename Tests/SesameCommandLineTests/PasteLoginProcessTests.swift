import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sesame login` with no browser on this machine (an SSH session, `--no-browser`,
/// `SESAME_BROWSER=none`), as a process on a pseudo-terminal against an in-test OpenID emulator:
/// with device login turned off, the printed address is opened by a browser "elsewhere" (this
/// test over HTTP, the redirect not followed) and its final address pasted back; with device
/// login on, the device code is used.
@Suite("sesame login with no local browser: the pasted redirect, over a terminal")
struct PasteLoginProcessTests {
    init() { TestProviders.bootstrap() }

    /// An SSH session on a machine with no display.
    static let ssh = ["SSH_CONNECTION": "192.0.2.10 50022 192.0.2.20 22"]

    /// The environment of a login run by `cli` on a machine with no display, plus `extra`.
    static func environment(_ cli: CLIHarness, _ extra: [String: String]) -> [String: String] {
        var environment = cli.environment
        for name in ["DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "SESAME_BROWSER"] {
            environment[name] = nil
        }
        return environment.merging(extra) { $1 }
    }

    /// Runs `sesame ARGUMENTS` in a new session whose controlling terminal is a pseudo-terminal
    /// (so that Ctrl-C typed there is SIGINT), hands `body` the terminal, and awaits the program's
    /// exit: `body` must make it end; if `body` throws, the program is killed first.
    static func onTerminal(
        _ arguments: [String], environment: [String: String],
        _ body: (PseudoTerminal) async throws -> Void
    ) async throws -> (status: Int32, transcript: String) {
        let setsid = URL(fileURLWithPath: "/usr/bin/setsid")
        guard FileManager.default.isExecutableFile(atPath: setsid.path) else {
            Issue.record("setsid(1) is missing; Debian's util-linux has it")
            throw TestSetupError("/usr/bin/setsid")
        }
        let terminal = try PseudoTerminal()
        let process = ChildProcess(
            executableURL: setsid,
            arguments: ["--ctty", "--wait", try ProcessRunner.builtExecutable("sesame").path] + arguments,
            environment: environment, standardInput: .handle(terminal.child),
            standardOutput: .handle(terminal.child), standardError: .handle(terminal.child), diesWithParent: true)
        try await process.start()
        try terminal.child.close()
        do {
            try await body(terminal)
        } catch {
            process.terminate(signal: SIGKILL)
            _ = await process.exitStatus()
            throw error
        }
        let status = await process.exitStatus()
        return (status, terminal.transcript)
    }

    /// Waits until the terminal shows `text`; fails the test with the transcript otherwise.
    static func expectShown(_ text: String, on terminal: PseudoTerminal) async throws {
        let shown = await terminal.wait(for: text, limit: .seconds(90))
        #expect(shown, "waited for \(text.debugDescription): \(terminal.transcript.debugDescription)")
        if !shown { throw TestSetupError("the terminal never showed \(text.debugDescription)") }
    }

    /// The sign-in address the program printed.
    static func authorizationURL(on terminal: PseudoTerminal) async throws -> URL {
        try await expectShown("Paste the address", on: terminal)
        let text = terminal.transcript
        let address = try #require(
            text.firstMatch(of: #/(http://127\.0\.0\.1:\d+/authorize\?[^\s]+)/#).map { String($0.1) }, "\(text)")
        return try #require(URL(string: address))
    }

    /// What a browser on another machine does: signs in as Alice on the consent page (or
    /// cancels), and is sent to the app's redirect address, which it cannot reach there; that
    /// address is returned.
    static func signInElsewhere(_ authorization: URL, action: String = "allow") async throws -> String {
        let browser = CurlTransport()
        let page = try await browser.send(HTTPRequest(url: authorization))
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 200, "\(html)")
        let request = try #require(html.firstMatch(of: #/name="request" value="([^"]+)"/#).map { String($0.1) })
        var decide = try #require(URLComponents(url: authorization, resolvingAgainstBaseURL: false))
        decide.query = nil
        let answer = try await browser.send(
            HTTPRequest(
                method: .post, url: try #require(decide.url),
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(
                    FormEncoding.encode([("request", request), ("user", "248289761001"), ("action", action)]).utf8)
            ))
        #expect([302, 303].contains(answer.status))
        let location = try #require(answer.headers["Location"])
        #expect(location.hasPrefix("http://127.0.0.1:"), "\(location)")
        return location
    }

    enum NoBrowser: String, Sendable, CaseIterable, CustomStringConvertible {
        case sshSession = "an SSH session"
        case flag = "--no-browser, with a display"
        case variable = "SESAME_BROWSER=none, with a display"

        var description: String { rawValue }

        func arguments(_ issuer: String) -> [String] {
            ["login"] + OIDCProcessTests.loginArguments(issuer) + (self == .flag ? ["--no-browser"] : [])
        }

        var environment: [String: String] {
            switch self {
            case .sshSession: PasteLoginProcessTests.ssh
            case .flag: ["DISPLAY": ":99"]
            case .variable: ["DISPLAY": ":99", "SESAME_BROWSER": "none"]
            }
        }
    }

    @Test(
        "no device login and no browser here: a garbage line and a forged state are refused, the real address pasted logs in, and token works",
        arguments: NoBrowser.allCases)
    func pastedLogin(_ setup: NoBrowser) async throws {
        let emulator = try OIDCEmulator(devicePollInterval: 1)
        await emulator.setDeviceLogin(enabled: false)
        try await OIDCProcessTests.withEmulator(emulator) { _, issuer in
            let cli = try CLIHarness()
            let (status, transcript) = try await Self.onTerminal(
                setup.arguments(issuer), environment: Self.environment(cli, setup.environment)
            ) { terminal in
                let authorization = try await Self.authorizationURL(on: terminal)
                let query = FormEncoding.decode(authorization.query ?? "")
                #expect(query.first { $0.0 == "code_challenge_method" }?.1 == "S256")
                let redirect = try await Self.signInElsewhere(authorization)

                terminal.type("this is not the address\r")
                try await Self.expectShown("4 tries left", on: terminal)
                terminal.type(redirect.replacing(#/state=[^&]+/#, with: "state=forged") + "\r")
                try await Self.expectShown("3 tries left", on: terminal)
                terminal.type(redirect + "\r")
                try await Self.expectShown("Logged in to", on: terminal)
            }
            #expect(status == 0, "\(transcript)")
            #expect(transcript.contains("spaces or control characters"), "\(transcript)")
            #expect(transcript.contains("'state' did not match"), "\(transcript)")
            #expect(!transcript.contains("enter the code"), "device login is off: \(transcript)")
            let stored = try await cli.storedTokens()
            #expect(stored.count == 1)

            let token = try await cli.run("sesame", ["token", "oidc"])
            #expect(token.status == 0, "\(token.standardError)")
            #expect(token.standardOutput.trimmingCharacters(in: .newlines) == stored.first)
            #expect(!transcript.contains(try #require(stored.first)), "the token was shown at login")
        }
    }

    /// Runs `sesame login` in an SSH session against an emulator without device login, `body`
    /// answering on the terminal, and checks that it ended with status 1 and stored nothing;
    /// returns what the terminal showed.
    static func failedPasteLogin(_ body: (PseudoTerminal) async throws -> Void) async throws -> String {
        let emulator = try OIDCEmulator(devicePollInterval: 1)
        await emulator.setDeviceLogin(enabled: false)
        return try await OIDCProcessTests.withEmulator(emulator) { _, issuer in
            let cli = try CLIHarness()
            let (status, transcript) = try await Self.onTerminal(
                ["login"] + OIDCProcessTests.loginArguments(issuer), environment: Self.environment(cli, Self.ssh), body)
            #expect(status == 1, "\(transcript)")
            #expect(try await cli.storedTokens().isEmpty)
            return transcript
        }
    }

    @Test(
        "Ctrl-C or Ctrl-D at the paste prompt cancels: exit status 1, nothing stored", arguments: ["\u{03}", "\u{04}"])
    func cancelled(_ key: String) async throws {
        let transcript = try await Self.failedPasteLogin { terminal in
            _ = try await Self.authorizationURL(on: terminal)
            terminal.type(key)
            try await Self.expectShown("cancelled", on: terminal)
        }
        #expect(transcript.contains("The sign-in was cancelled at the terminal; nothing was stored."))
    }

    @Test("a sign-in declined on the other machine, pasted back, is the provider's refusal: exit status 1")
    func declined() async throws {
        let transcript = try await Self.failedPasteLogin { terminal in
            let redirect = try await Self.signInElsewhere(
                try await Self.authorizationURL(on: terminal), action: "cancel")
            #expect(redirect.contains("error=access_denied"))
            terminal.type(redirect + "\r")
            try await Self.expectShown("declined the request", on: terminal)
        }
        #expect(!transcript.contains("tries left"), "an error answer is not a bad paste: \(transcript)")
    }

    @Test("in an SSH session with no display, an issuer with device login gets the device code, not the paste")
    func deviceOverSSH() async throws {
        try await OIDCProcessTests.withEmulator { _, issuer in
            let cli = try CLIHarness()
            let result = try await OIDCProcessTests.login(
                cli, OIDCProcessTests.loginArguments(issuer), issuer: issuer,
                environment: Self.ssh.merging(["DISPLAY": "", "WAYLAND_DISPLAY": ""]) { $1 })
            #expect(result.status == 0, "\(result.standardError)")
            #expect(!result.standardError.contains("Paste the address"))
            #expect(try await cli.storedTokens().count == 1)
        }
    }

    @Test("the emulator's device switch: discovery stops naming the device endpoint, which then answers 404")
    func emulatorDeviceSwitch() async throws {
        try await OIDCProcessTests.withEmulator { _, issuer in
            let client = CurlTransport()
            let discovery = URL(string: "\(issuer)/.well-known/openid-configuration")!
            let before = try await client.send(HTTPRequest(url: discovery)).json
            #expect(before?["device_authorization_endpoint"]?.stringValue == "\(issuer)/device_authorization")
            let off = try await client.send(
                .postJSON(URL(string: "\(issuer)/__sesame/device-login")!, .object(["enabled": .bool(false)])))
            #expect(off.status == 200)
            let after = try await client.send(HTTPRequest(url: discovery)).json
            #expect(after?["device_authorization_endpoint"] == nil)
            #expect(
                after?["grant_types_supported"]?.arrayValue?.contains(
                    .string("urn:ietf:params:oauth:grant-type:device_code")) == false)
            let device = try await client.send(
                HTTPRequest(
                    method: .post, url: URL(string: "\(issuer)/device_authorization")!,
                    headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Data("client_id=\(OIDCEmulator.defaultClientID)&scope=openid".utf8)))
            #expect(device.status == 404)
        }
    }
}

import Foundation
import Sesame
import SesameCommandLine
import SesameDesktop
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The defects a new user met in `sesame` and the examples (issue 16), each run for real.
@Suite("what a new user hit: closed pipes, silent buses, help, colour, secrets on a terminal")
struct NewUserDefectTests {
    init() { TestProviders.bootstrap() }

    static let approve = ["SESAME_EMULATOR_APPROVE": "auto"]

    // MARK: 1. a reader that went away

    /// A program whose standard output and standard error are pipes whose readers are already
    /// closed (`sesame token facebook | true`, with standard error gone too).
    static func runWithClosedReaders(
        _ program: String, _ arguments: [String], environment: [String: String]
    ) async throws -> Int32 {
        let executable = try ProcessRunner.builtExecutable(program)
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let output = Pipe()
                let error = Pipe()
                try? output.fileHandleForReading.close()
                try? error.fileHandleForReading.close()
                let process = ChildProcess(
                    executableURL: executable, arguments: arguments, environment: environment,
                    standardInput: .null, standardOutput: .pipe(output), standardError: .pipe(error))
                do {
                    try process.run()
                } catch {
                    return continuation.resume(throwing: error)
                }
                let pid = process.processIdentifier
                let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
                DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
                let status = process.waitUntilExit()
                watchdog.cancel()
                continuation.resume(returning: status)
            }
        }
    }

    struct ClosedReaderCase: Sendable, CustomTestStringConvertible {
        var program: String
        var arguments: [String]
        var status: Int32
        var testDescription: String { ([program] + arguments).joined(separator: " ") }
    }

    @Test(
        "every program exits with its own status, not a signal or a trap, when its readers are gone",
        arguments: [
            ClosedReaderCase(program: "sesame", arguments: ["token", "facebook"], status: 0),
            ClosedReaderCase(program: "sesame", arguments: ["status"], status: 0),
            ClosedReaderCase(program: "sesame", arguments: ["nonsense"], status: 64),
            ClosedReaderCase(program: "fb-login", arguments: [], status: 0),
            ClosedReaderCase(program: "fb-login", arguments: ["bogus"], status: 64),
            ClosedReaderCase(program: "fb-publish", arguments: [], status: 64),
            ClosedReaderCase(program: "fb-publish", arguments: ["hello"], status: 0),
            ClosedReaderCase(program: "fb-errors", arguments: ["app-removed"], status: 0),
            ClosedReaderCase(program: "fb-errors", arguments: [], status: 64),
        ])
    func closedReaders(_ example: ClosedReaderCase) async throws {
        let cli = try CLIHarness()
        // Logged in with publish_actions, so that every program has something to print.
        let first = try await cli.run("fb-publish", ["first post"], environment: Self.approve)
        #expect(first.status == 0, "\(first.standardOutput)\(first.standardError)")
        let status = try await Self.runWithClosedReaders(
            example.program, example.arguments, environment: cli.environment.merging(Self.approve) { $1 })
        #expect(status == example.status, "exit status \(status) (above 128: killed by signal \(status - 128))")
    }

    // MARK: 2 and 3. a session bus that accepts connections and never answers

    @Test(
        "on a silent session bus the examples print one sentence and exit 69, and doctor finishes",
        arguments: [["fb-login"], ["fb-login", "logout"], ["fb-publish", "hi"], ["sesame", "doctor"]])
    func silentBus(_ command: [String]) async throws {
        let cli = try CLIHarness(storage: "keyring")
        let bus = try SilentUnixSocket()
        defer { bus.stop() }
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable(command[0]), Array(command.dropFirst()),
            environment: cli.environment.merging(["DBUS_SESSION_BUS_ADDRESS": bus.address]) { $1 },
            killAfter: .seconds(40))
        #expect(!result.wasKilled, "\(command.joined(separator: " ")) did not finish: \(result.standardError)")
        #expect(result.status == 69, "\(result.standardOutput)\(result.standardError)")
        #expect(!result.standardError.contains("Fatal error"), "\(result.standardError)")
        #expect(!result.standardError.contains("backtrace"), "\(result.standardError)")
        if command[0] == "sesame" {
            #expect(result.standardOutput.contains("did not answer within 3 s"), "\(result.standardOutput)")
        } else {
            let lines = result.standardError.split(separator: "\n")
            #expect(lines.count == 1, "one sentence, not: \(result.standardError)")
            #expect(result.standardError.hasPrefix("\(command[0]): "), "\(result.standardError)")
            #expect(!result.standardError.contains(".."), "\(result.standardError)")
        }
    }

    @Test(
        "with no session bus, token reports the keyring first, also when its provider cannot connect either",
        arguments: [["token", "facebook"], ["token", "oidc"], ["logout", "oidc"]])
    func keyringReportedFirst(_ arguments: [String]) async throws {
        // The storage and the provider's connection are made side by side for a command that
        // uses a login; an unconfigured OpenID issuer fails to connect (a usage error, 64), but
        // the missing keyring is what the person must hear about first, as when the two ran in
        // turn.
        let cli = try CLIHarness(storage: "keyring")
        let result = try await cli.run(
            "sesame", arguments, environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(cli.root.path)/no-bus"])
        #expect(result.status == 69, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("There is no desktop keyring here"), "\(result.standardError)")
        #expect(!result.standardError.contains("issuer"), "\(result.standardError)")
    }

    @Test("with no session bus, token reports the keyring at once, while an issuer's discovery would hang")
    func keyringFailureDoesNotWaitForDiscovery() async throws {
        // The issuer accepts the connection and never answers: the discovery request made beside
        // the storage check is cancelled when the check fails, not waited for (it held the
        // command for as long as the transport's own timeout).
        let cli = try CLIHarness(storage: "keyring")
        let issuer = try SilentListener()
        defer { issuer.stop() }
        let clock = ContinuousClock()
        let start = clock.now
        let result = try await cli.run(
            "sesame", ["token", "oidc"],
            environment: [
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(cli.root.path)/no-bus",
                "SESAME_OIDC_ISSUER": "http://127.0.0.1:\(issuer.port)", "SESAME_OIDC_CLIENT_ID": "desktop",
            ])
        let elapsed = clock.now - start
        #expect(result.status == 69, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("There is no desktop keyring here"), "\(result.standardError)")
        #expect(elapsed < .seconds(10), "the command took \(elapsed)")
    }

    // MARK: 11. --help

    @Test(
        "every example answers --help and -h with its usage and exit 0, and does nothing else",
        arguments: [
            ("fb-login", "--help"), ("fb-login", "-h"), ("fb-publish", "--help"), ("fb-publish", "-h"),
            ("fb-errors", "--help"), ("fb-errors", "-h"),
        ])
    func exampleHelp(_ program: String, _ flag: String) async throws {
        let cli = try CLIHarness()
        let result = try await cli.run(program, [flag], environment: Self.approve)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.hasPrefix("usage: \(program)"), "\(result.standardOutput)")
        #expect(!result.standardOutput.contains("Posted"))
        #expect(!result.standardOutput.contains("Log in with Facebook"))
        #expect(try await cli.storedTokens().isEmpty, "\(program) \(flag) logged in")
    }

    @Test("fb-publish refuses an unknown option, and posts a dash-led message after --")
    func publishDashes() async throws {
        let cli = try CLIHarness()
        let unknown = try await cli.run("fb-publish", ["--frobnicate"], environment: Self.approve)
        #expect(unknown.status == 64)
        #expect(unknown.standardError.contains("'--'"))
        let posted = try await cli.run("fb-publish", ["--", "-h is my message"], environment: Self.approve)
        #expect(posted.status == 0, "\(posted.standardOutput)\(posted.standardError)")
        #expect(posted.standardOutput.contains("Posted: "))
    }

    // MARK: 12. fb-login with a cached token that no longer works

    @Test(
        "fb-login with a cached token that stopped working shows the error's own message and the login screen",
        arguments: [
            ("app-removed", "The app was removed. Please log in again."),
            ("checkpointed", "Log in at www.facebook.com to unlock it"),
        ])
    func cachedTokenStoppedWorking(_ scenario: String, _ message: String) async throws {
        let cli = try CLIHarness()
        let first = try await cli.run("fb-login", [], environment: Self.approve)
        #expect(first.status == 0, "\(first.standardOutput)\(first.standardError)")
        let result = try await cli.run(
            "fb-login", [], environment: Self.approve.merging(["SESAME_EMULATOR_SCENARIO": scenario]) { $1 })
        let output = result.standardOutput
        #expect(output.contains(message), "\(output)\(result.standardError)")
        #expect(!output.contains("Welcome back"), "\(output)")
        let shown = try #require(output.range(of: message))
        let screen = try #require(output.range(of: "Log in with Facebook"), "no login screen: \(output)")
        #expect(shown.lowerBound < screen.lowerBound, "the message comes before the login screen")
        cli.expectNoTokenLeaks(try await cli.storedTokens())
    }

    // MARK: 13. colour per stream

    /// `sesame ARGUMENTS` run by `sh -c` under `script`, so that the streams not redirected are
    /// a terminal; returns what reached the terminal.
    static func underTerminal(_ cli: CLIHarness, shell: String) async throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("script(1) is missing; scripts/bootstrap installs bsdutils")
            throw TestSetupError("/usr/bin/script")
        }
        var environment = cli.environment
        environment["NO_COLOR"] = nil
        environment["TERM"] = "xterm-256color"
        environment["SESAME"] = try ProcessRunner.builtExecutable("sesame").path
        return try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", shell, "/dev/null"], environment: environment,
            killAfter: .seconds(60))
    }

    @Test("colour is decided per stream: a file or a pipe on standard output gets no escape codes")
    func colourPerStream() async throws {
        let cli = try CLIHarness()
        let file = cli.root.appending(path: "status.txt")
        let redirected = try await Self.underTerminal(cli, shell: "\"$SESAME\" status > '\(file.path)'")
        #expect(redirected.status == 77, "nothing is logged in: \(redirected.standardOutput)")
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.contains("facebook"), "\(text)")
        #expect(!text.contains("\u{1B}"), "escape codes in a file: \(text.debugDescription)")

        let piped = try await Self.underTerminal(cli, shell: "\"$SESAME\" status | cat -v")
        #expect(piped.standardOutput.contains("facebook"))
        #expect(!piped.standardOutput.contains("^["), "escape codes in a pipe: \(piped.standardOutput)")

        // Standard output on the terminal, standard error in a file: colour on the terminal only.
        let errors = cli.root.appending(path: "errors.txt")
        let onTerminal = try await Self.underTerminal(cli, shell: "\"$SESAME\" status 2> '\(errors.path)'")
        #expect(
            onTerminal.standardOutput.contains("\u{1B}[1mfacebook"), "\(onTerminal.standardOutput.debugDescription)")
        #expect(!(try String(contentsOf: errors, encoding: .utf8)).contains("\u{1B}"))
    }

    // MARK: 17. --with-token on a terminal

    @Test("--with-token on a terminal: a prompt, no echo, and Enter ends the token")
    func withTokenOnTerminal() async throws {
        let cli = try CLIHarness()
        try await cli.run("sesame", ["login", "facebook"], environment: Self.approve)
        let secret = try await cli.run("sesame", ["token", "facebook"]).standardOutput
            .trimmingCharacters(in: .newlines)
        #expect(secret.count > 8)
        try await cli.run("sesame", ["logout", "facebook"])  // forgets it here; the emulator still accepts it

        let terminal = try PseudoTerminal()
        let process = ChildProcess(
            executableURL: try ProcessRunner.builtExecutable("sesame"),
            arguments: ["login", "facebook", "--with-token"],
            environment: cli.environment, standardInput: .handle(terminal.child),
            standardOutput: .handle(terminal.child), standardError: .handle(terminal.child))
        try await process.start()
        try terminal.child.close()
        defer { process.terminate(signal: SIGKILL) }
        let prompted = await terminal.wait(for: "Paste the access token", limit: .seconds(60))
        #expect(prompted, "no prompt on the terminal: \(terminal.transcript.debugDescription)")
        guard prompted else { return }
        terminal.type(secret + "\r")
        let finished = await terminal.wait(for: "Stored in", limit: .seconds(60))
        #expect(finished, "Enter did not end the token: \(terminal.transcript.debugDescription)")
        if !finished { process.terminate(signal: SIGKILL) }
        let status = await process.exitStatus()
        #expect(status == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains(secret), "the token was echoed")
        #expect(try await cli.storedTokens() == [secret])
    }

    // MARK: 18. --version, account names, text from outside

    @Test("--version prints the version and exits 0")
    func version() async throws {
        let cli = try CLIHarness()
        let result = try await cli.run("sesame", ["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput == "sesame \(SesameCLI.version)\n")
        #expect(result.standardOutput.firstMatch(of: #/^sesame \d+\.\d+\.\d+\n$/#) != nil)
    }

    @Test(
        "account names that are empty, blank, too long or carry control characters are usage errors",
        arguments: [
            ["token", "facebook", "--account", ""], ["token", "facebook", "--account", "  "],
            ["login", "facebook", "--account=a\nb"], ["logout", "facebook", "--account", "\u{1B}[2Jevil"],
            ["permissions", "facebook", "--account", "tab\there"], ["switch", "facebook", ""],
            ["switch", "facebook", "right\u{202E}left"],
            ["token", "facebook", "--account", String(repeating: "a", count: 65)],
        ])
    func badAccountNames(_ arguments: [String]) throws {
        #expect(throws: UsageError.self) { try SesameCLI.parse(arguments) }
        do {
            _ = try SesameCLI.parse(arguments)
        } catch {
            #expect(error.message.contains("such as 'work'"), "\(error.message)")
            #expect(!error.message.contains("\u{1B}") && !error.message.contains("\n"), "\(error.message)")
        }
    }

    @Test("good account names pass through unchanged")
    func goodAccountNames() throws {
        for name in ["work", "alice@example.com", "Zoë", "team 2"] {
            let command = try SesameCLI.parse(["token", "facebook", "--account", name])
            guard case .provider(let provider) = command else {
                throw UsageError("not a provider command", command: nil)
            }
            #expect(provider.account == name)
        }
    }

    @Test("printable text drops control characters and direction overrides, and keeps the rest")
    func printable() {
        #expect(Terminal.printable("Sam\u{1B}[2J Sesame\nforged\r\u{07}\u{9B}") == "Sam[2J Sesameforged")
        #expect(Terminal.printable("a\u{202E}b\u{2066}c") == "abc")
        #expect(Terminal.printable("Zoë 🙂 名前") == "Zoë 🙂 名前")
    }

    @Test("status prints names from outside without control characters")
    func hostileNamesInStatus() async throws {
        let cli = try CLIHarness()
        try await cli.run("sesame", ["login", "facebook"], environment: Self.approve)
        let store = FileCredentialStore(url: cli.root.appending(path: "state/sesame/credentials.json"))
        let stored = try #require(try await store.list(provider: .facebook).first)
        let hostile = AccessToken(
            tokenString: "EAAhostile0token0never0issued", provider: .facebook, appID: stored.key.appID,
            userID: "1\u{1B}[31m", permissions: PermissionSet(granted: ["email\u{1B}]0;pwned\u{07}", "public_profile"]))
        try await store.save(
            StoredCredential(
                key: CredentialKey(provider: .facebook, appID: stored.key.appID, account: "evil\u{1B}[2J\nforged"),
                token: hostile))
        let status = try await cli.run("sesame", ["status", "--timeout", "60"])
        #expect(status.standardOutput.contains("evil[2Jforged"), "\(status.standardOutput)")
        #expect(!status.standardOutput.contains("\u{1B}"), "\(status.standardOutput.debugDescription)")
        #expect(!status.standardOutput.contains("\u{07}"), "\(status.standardOutput.debugDescription)")
    }

    @Test("fb-errors shows a message a server sent without its control characters")
    func hostileMessageInExample() async throws {
        let cli = try CLIHarness(storage: "memory")
        let body =
            #"{"error":{"code":368,"type":"OAuthException","error_user_title":"Blocked","#
            + #""error_user_msg":"You are blocked\u001b[2J\nforged line\u0007 for now."}}"#
        let result = try await cli.run("fb-errors", ["-"], input: Data(body.utf8))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("You are blocked[2Jforged line for now."), "\(result.standardOutput)")
        #expect(!result.standardOutput.contains("\u{1B}") && !result.standardOutput.contains("\u{07}"))
    }

    // MARK: 21. messages that contradicted themselves or came out of order

    @Test("explain-error 190/458 says once, consistently, that the person is told why before logging in again")
    func removedAppIsConsistent() async throws {
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable("sesame"),
            [
                "explain-error", "--provider", "facebook", "--status", "400", "--body",
                #"{"error":{"message":"Error validating access token","type":"OAuthException","code":190,"error_subcode":458}}"#,
            ])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("tell the person why first"))
        #expect(!result.standardOutput.contains("Nothing needs to be shown"), "\(result.standardOutput)")
        #expect(result.standardOutput.contains("Before the new login, tell the person why it is needed"))
    }

    @Test("fb-publish under lasting throttling: the waits in order, then one message titled for throttling")
    func publishThrottled() async throws {
        let cli = try CLIHarness()
        let first = try await cli.run("fb-publish", ["first post"], environment: Self.approve)
        #expect(first.status == 0, "\(first.standardOutput)\(first.standardError)")
        let result = try await cli.run(
            "fb-publish", ["hello"],
            environment: Self.approve.merging(["SESAME_EMULATOR_SCENARIO": "app-throttled,regainAccessMinutes=0"]) {
                $1
            })
        #expect(result.status == 1)
        let output = result.standardOutput
        #expect(!output.contains("Unknown error"), "\(output)")
        #expect(!result.standardError.contains("Unexpected error"), "\(result.standardError)")
        let waited = try #require(output.range(of: "before attempt 2"), "\(output)")
        let told = try #require(output.range(of: "Please Wait: "), "\(output)")
        #expect(waited.lowerBound < told.lowerBound)
        #expect(output.components(separatedBy: "Please Wait: ").count == 2, "one message: \(output)")
    }

    @Test("--storage memory says that the login is gone when the command exits")
    func memoryStorageSaysSo() async throws {
        let cli = try CLIHarness()
        let result = try await cli.run(
            "sesame", ["login", "facebook", "--storage", "memory"], environment: Self.approve)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("gone when this program exits"), "\(result.standardOutput)")
    }
}

/// A pseudo-terminal: the child end for a program's standard streams, and this end to type into
/// and read what the program shows.
final class PseudoTerminal: Sendable {
    let child: FileHandle
    private let parent: Int32
    private let output = Buffer()

    /// What the program has shown; each change wakes ``wait(for:limit:)``.
    private final class Buffer: Sendable {
        let data = Observed(Data())
    }

    init() throws {
        // posix_openpt and friends are not in Swift's Glibc module; they are looked up in libc.
        typealias OpenPT = @convention(c) (Int32) -> Int32
        typealias Grant = @convention(c) (Int32) -> Int32
        typealias Name = @convention(c) (Int32) -> UnsafeMutablePointer<CChar>?
        guard let openSymbol = dlsym(nil, "posix_openpt"), let grantSymbol = dlsym(nil, "grantpt"),
            let unlockSymbol = dlsym(nil, "unlockpt"), let nameSymbol = dlsym(nil, "ptsname")
        else { throw TestSetupError("libc has no posix_openpt") }
        parent = unsafeBitCast(openSymbol, to: OpenPT.self)(O_RDWR | O_NOCTTY)
        guard parent >= 0, unsafeBitCast(grantSymbol, to: Grant.self)(parent) == 0,
            unsafeBitCast(unlockSymbol, to: Grant.self)(parent) == 0,
            let name = unsafeBitCast(nameSymbol, to: Name.self)(parent)
        else {
            throw TestSetupError("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let descriptor = open(name, O_RDWR | O_NOCTTY)
        guard descriptor >= 0 else {
            throw TestSetupError("could not open \(String(cString: name))")
        }
        child = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        let parent = self.parent
        Thread.detachNewThread { [output] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(parent, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }  // EIO once the program has exited and the child end is closed
                output.data.change { $0.append(contentsOf: buffer[0..<count]) }
            }
        }
    }

    deinit { close(parent) }

    /// Everything the program has shown so far.
    var transcript: String { String(decoding: output.data.value, as: UTF8.self) }

    /// Types `text` as a person would.
    func type(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(parent, $0.baseAddress, $0.count) }
    }

    /// Waits until the transcript contains `text`; false when `limit` passed first.
    func wait(for text: String, limit: Duration) async -> Bool {
        await output.data.wait(limit: limit) { String(decoding: $0, as: UTF8.self).contains(text) }
    }
}

/// Something a test needs could not be set up; the message says what.
struct TestSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

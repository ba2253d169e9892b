import Foundation
import Sesame
import SesameDesktop
import SesameTestSupport
import Testing

/// What running `sesame` outside the test harness found, each as a process test.
@Suite("sesame as found outside the harness")
struct OutsideRunFindingsTests {
    @Test("doctor with a Graph version that is not one exits 78 (a setting is wrong), not 69")
    func doctorGraphVersion() async throws {
        let cli = try CLIHarness(storage: "memory", environment: ["SESAME_FACEBOOK_GRAPH_VERSION": "banana"])
        let doctor = try await cli.run("sesame", ["doctor"])
        #expect(doctor.status == 78, "\(doctor.standardOutput)\(doctor.standardError)")
        #expect(doctor.standardOutput.contains("SESAME_FACEBOOK_GRAPH_VERSION is 'banana'"))
    }

    @Test("doctor on a machine where nothing is configured exits 0: a preset nobody set up is not a problem")
    func doctorWithNothingConfigured() async throws {
        let cli = try CLIHarness(storage: "file", clean: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"])
        let doctor = try await cli.run("sesame", ["doctor"])
        #expect(doctor.status == 0, "\(doctor.standardOutput)\(doctor.standardError)")
        #expect(!doctor.standardOutput.contains("✗"), "\(doctor.standardOutput)")
        for name in ["Google", "Microsoft", "GitLab", "Dropbox", "Slack"] {
            #expect(doctor.standardOutput.contains("\(name): not configured"), "\(doctor.standardOutput)")
        }
        #expect(doctor.standardOutput.contains("SESAME_GOOGLE_CLIENT_ID"))
    }

    @Test(
        "a config file that is not valid JSON is named with the line and column to fix, not as 'not a JSON object'",
        arguments: [
            ("{\"storage\": \"memory\", \"facebook\": {\"app_id\": \"12", "it ends too early, at line 1, column 49"),
            ("{\n  \"storage\": \"memory\",\n  \"browser\" \"none\"\n}\n", "the error is at line 3, column 13"),
        ])
    func brokenConfig(_ text: String, expected: String) async throws {
        let cli = try CLIHarness(storage: nil)
        let folder = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: folder.appending(path: "config.json"))
        let status = try await cli.run("sesame", ["status"])
        #expect(status.status == 78)
        #expect(status.standardError.contains("is not valid JSON: \(expected)"), "\(status.standardError)")
        #expect(!status.standardError.contains("not a JSON object"))
    }

    @Test(
        "the spinner turns in ASCII under TERM=dumb or a locale that is not UTF-8, in Braille otherwise",
        arguments: [
            (["TERM": "dumb", "LANG": "en_US.UTF-8"], false), (["TERM": "xterm", "LANG": "C"], false),
            (["TERM": "xterm"], false), (["TERM": "xterm", "LC_ALL": "POSIX", "LANG": "en_US.UTF-8"], false),
            (["TERM": "xterm", "LANG": "en_US.UTF-8"], true), (["TERM": "xterm", "LC_CTYPE": "C.utf8"], true),
        ])
    func spinnerFrames(_ environment: [String: String], unicode: Bool) {
        let terminal = Terminal.current(environment: environment)
        #expect(terminal.usesUnicode == unicode)
        let braille = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
        #expect(Spinner.frames(for: terminal) == (unicode ? braille : ["|", "/", "-", "\\"]))
    }

    @Test("a device login of a checkpointed person reports 459's message (log in at facebook.com), not an expired code")
    func checkpointedDeviceLogin() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run(
            "sesame", ["login", "facebook"],
            environment: ["SESAME_EMULATOR_APPROVE": "auto", "SESAME_EMULATOR_SCENARIO": "checkpointed"])
        #expect(login.status == 75, "\(login.standardError)")
        #expect(login.standardError.contains("Log in at www.facebook.com to unlock it"), "\(login.standardError)")
        #expect(!login.standardError.contains("expired"))
    }

    @Test("a state directory that cannot be written: writes exit 73 as the table says, status 73, and doctor flags it")
    func readOnlyStateDirectory() async throws {
        // Root writes anywhere, so the commands run as nobody (setpriv), in a directory of its own.
        try #require(geteuid() == 0, "this test makes a directory nobody cannot write, which needs root")
        let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
        try #require(FileManager.default.isExecutableFile(atPath: setpriv.path), "setpriv (util-linux) is missing")
        let root = URL(fileURLWithPath: "/tmp/sesame-read-only-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let state = root.appending(path: "state/sesame")
        for folder in [state, root.appending(path: "home"), root.appending(path: "config")] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        for folder in [root, root.appending(path: "state")] { chmod(folder.path, 0o755) }
        for folder in ["state/sesame", "home", "config"] { chown(root.appending(path: folder).path, 65534, 65534) }
        chmod(state.path, 0o700)
        let environment = TestChildren.environment([
            "HOME": root.appending(path: "home").path, "XDG_STATE_HOME": root.appending(path: "state").path,
            "XDG_CONFIG_HOME": root.appending(path: "config").path, "SESAME_STORAGE": "file", "NO_COLOR": "1",
            "SESAME_EMULATOR_APPROVE": "auto", "PATH": "/usr/bin:/bin",
        ])
        let sesame = try ProcessRunner.builtExecutable("sesame").path
        func asNobody(_ arguments: [String]) async throws -> ProcessResult {
            try await ProcessRunner.run(
                setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", sesame] + arguments,
                environment: environment)
        }
        let first = try await asNobody(["login", "facebook"])
        try #require(first.status == 0, "\(first.standardError)")
        chmod(state.path, 0o500)
        let login = try await asNobody(["login", "facebook", "--account", "b"])
        #expect(login.status == 73, "\(login.standardError)")
        #expect(login.standardError.contains("Make the directory writable"))
        #expect(try await asNobody(["logout", "facebook"]).status == 73)
        let status = try await asNobody(["status"])
        #expect(status.status == 73, "\(status.standardOutput)\(status.standardError)")
        let doctor = try await asNobody(["doctor"])
        #expect(doctor.status == 73, "\(doctor.standardOutput)")
        #expect(doctor.standardOutput.contains("✗ Storage: file"), "\(doctor.standardOutput)")
        #expect(doctor.standardOutput.contains("cannot be written"))
        chmod(state.path, 0o700)
    }

    @Test("Ctrl-C during a device login ends the waiting line with 'Cancelled.', saves the emulator and exits 130")
    func interruptedLogin() async throws {
        let cli = try CLIHarness()
        let errors = Pipe()
        let process = ChildProcess(
            executableURL: try ProcessRunner.builtExecutable("sesame"), arguments: ["login", "facebook"],
            environment: cli.environment.merging(["SESAME_EMULATOR_APPROVE": "off"]) { $1 },
            standardInput: .null, standardOutput: .null, standardError: .pipe(errors), diesWithParent: true)
        try await process.start()
        let shown = await readUntil(errors.fileHandleForReading, contains: "Waiting for you to finish")
        #expect(shown.contains("Waiting for you to finish"))
        process.terminate(signal: SIGINT)
        let rest = String(decoding: await readToEnd(errors.fileHandleForReading), as: UTF8.self)
        #expect(await process.exitStatus() == 130, "\(shown)\(rest)")
        #expect(rest.hasPrefix("\nCancelled.\n") || rest.hasPrefix("Cancelled.\n"), "\(rest)")
        #expect(rest.contains("The login was cancelled (Ctrl-C)."))
        let state = cli.root.appending(path: "state/sesame")
        #expect(FileManager.default.fileExists(atPath: state.appending(path: "emulator.json").path))
        #expect(!FileManager.default.fileExists(atPath: state.appending(path: "emulator.json.running").path))
    }

    @Test(
        "permissions under each throttling scenario exits 75 (provider trouble, try again later), as the table says",
        arguments: ["app-throttled", "user-throttled", "page-throttled", "rate-limited"])
    func throttledPermissions(_ scenario: String) async throws {
        let cli = try CLIHarness()
        try await cli.run("sesame", ["login", "facebook"], environment: ["SESAME_EMULATOR_APPROVE": "auto"])
        for arguments in [["permissions", "facebook"], ["permissions", "facebook", "revoke", "public_profile"]] {
            let result = try await cli.run("sesame", arguments, environment: ["SESAME_EMULATOR_SCENARIO": scenario])
            #expect(result.status == 75, "\(arguments): \(result.standardError)")
            #expect(result.standardError.contains("Try again in a little while."))
        }
    }
}

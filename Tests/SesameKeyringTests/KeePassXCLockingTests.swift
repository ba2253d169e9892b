import Foundation
import SesameTestSupport
import Testing

/// A locked KeePassXC database, met by the store in processes of its own: reported as locked
/// (not as a keyring that did not answer), and unlocked on request through the Secret Service's
/// Prompt API, with the test typing the password into KeePassXC's unlock window.
///
/// These tests lock the one database of the run, so they run on their own:
/// `SESAME_TEST_KEEPASSXC_LOCKING=1 scripts/with-keepassxc swift test --filter KeePassXCLockingTests`
/// (scripts/test does).
@Suite(
    "A locked KeePassXC database",
    .serialized,
    .enabled(
        if: ProcessInfo.processInfo.environment["SESAME_TEST_KEEPASSXC_LOCKING"] == "1",
        Comment(
            rawValue: "locks the run's KeePassXC database, so it runs alone: `SESAME_TEST_KEEPASSXC_LOCKING=1 "
                + "scripts/with-keepassxc swift test --filter KeePassXCLockingTests`")))
struct KeePassXCLockingTests {
    let environment = ProcessInfo.processInfo.environment
    let bus = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"]

    /// Locks every collection through the Secret Service (KeePassXC answers with a prompt,
    /// which is run), and waits until the store sees the lock.
    func lockDatabase() async throws {
        let collections = try await KeyringTestSupport.run(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Service", "Collections",
            ])
        let paths = collections.standardOutput.matches(of: /'(\/org\/freedesktop\/secrets\/collection\/[^']+)'/)
            .map { String($0.output.1) }
        try #require(!paths.isEmpty, "no collections: \(collections.standardOutput) \(collections.standardError)")
        let list = "[" + paths.map { "'\($0)'" }.joined(separator: ",") + "]"
        let lock = try await KeyringTestSupport.run(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", list,
            ])
        try #require(lock.status == 0, "Lock failed: \(lock.standardError)")
        if let prompt = lock.standardOutput.firstMatch(of: /'(\/org\/freedesktop\/secrets\/prompt\/[^']+)'/) {
            _ = try await KeyringTestSupport.run(
                "gdbus",
                [
                    "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", String(prompt.output.1),
                    "--method", "org.freedesktop.Secret.Prompt.Prompt", "",
                ])
        }
        for _ in 0..<50 {
            let status = try await runProbe(["--no-prompt", "status"], busAddress: bus)
            if status.status?.contains("(locked)") == true { return }
            // Polling KeePassXC, which announces nothing when the lock is done; not timing it.
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the database did not lock")
        throw MissingPrerequisite(name: "a locked database")
    }

    /// Types the database's password into KeePassXC's unlock window once it shows, as a person would.
    func answerUnlockWindow() async throws -> ProcessResult {
        let password = environment["SESAME_TEST_KEEPASSXC_PASSWORD"] ?? ""
        let display = environment["SESAME_TEST_KEEPASSXC_DISPLAY"] ?? ""
        let xdotool = try KeyringTestSupport.requireExecutable("xdotool")
        // The window may be found a moment before it can take the focus: each step is tried
        // again for up to 20 seconds.
        let script = """
            for _ in $(seq 1 60); do
                window=$("$0" search --onlyvisible --name 'Unlock Database' 2>/dev/null | tail -n 1)
                if [ -n "$window" ] && "$0" windowfocus --sync "$window" 2>/dev/null; then
                    sleep 0.3
                    "$0" type --window "$window" --delay 20 "$1" && "$0" key --window "$window" Return && exit 0
                fi
                sleep 0.3
            done
            echo "KeePassXC's unlock window did not show, or did not take the focus" >&2
            exit 1
            """
        var childEnvironment = environment
        childEnvironment["DISPLAY"] = display
        return try await ProcessRunner.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script, xdotool, password], environment: childEnvironment,
            killAfter: .seconds(60))
    }

    /// Saves a credential, unlocking the database first (through the prompt) if an earlier
    /// test left it locked.
    func save(_ account: String) async throws {
        let status = try await runProbe(["--no-prompt", "status"], busAddress: bus)
        if status.status?.contains("(locked)") == true {
            async let answered = answerUnlockWindow()
            _ = try await runProbe(["list"], busAddress: bus)
            _ = try await answered
        }
        let saved = try await runProbe(["--no-prompt", "save", "facebook", "1234", account], busAddress: bus)
        try #require(saved.ok, "could not save before locking: \(saved.message ?? "")")
    }

    @Test("a locked database is reported as locked at once, with where to unlock it, never as 'did not answer'")
    func lockedReadsAsLocked() async throws {
        try await save("locked-alice")
        try await lockDatabase()

        for command in [["load"], ["save"], ["delete"], ["list"]] {
            let arguments =
                ["--no-prompt"] + command + (command == ["list"] ? [] : ["facebook", "1234", "locked-alice"])
            let result = try await runProbe(arguments, busAddress: bus)
            #expect(result.kind == "locked", "\(command[0]): \(result)")
            #expect(result.message?.contains("KeePassXC") == true, "\(command[0]): \(result.message ?? "")")
            #expect(result.message?.contains("did not answer") == false, "\(command[0])")
        }
    }

    @Test("when allowed, the store asks KeePassXC to unlock, and reads the credential once the person has")
    func unlockOnRequest() async throws {
        try await save("prompt-bob")
        try await lockDatabase()

        async let answered = answerUnlockWindow()
        let loaded = try await runProbe(
            ["--timeout-ms", "5000", "load", "facebook", "1234", "prompt-bob"], busAddress: bus)
        let answer = try await answered
        #expect(answer.status == 0, "could not type into the unlock window: \(answer.standardError)")
        #expect(loaded.ok, "\(loaded)")
        #expect(loaded.found == true)
        let status = try await runProbe(["--no-prompt", "status"], busAddress: bus)
        #expect(status.status?.contains("(locked)") == false)
    }
}

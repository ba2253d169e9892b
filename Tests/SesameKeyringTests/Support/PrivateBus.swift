import Foundation
import Sesame
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus session bus of the test's own: a `dbus-daemon` with no service files, so nothing
/// can be started on it unless the test starts it. Stopped by `stop()`.
final class PrivateBus {
    let directory: URL
    let address: String
    private let daemon: ChildProcess
    /// The read end of the daemon's standard output, kept open while it runs.
    private var keptOutput: FileHandle?

    init() async throws {
        let dbusDaemon = try KeyringTestSupport.requireExecutable("dbus-daemon")
        directory = try KeyringTestSupport.scratchDirectory()
        let socket = directory.appendingPathComponent("bus").path
        address = "unix:path=\(socket)"
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
              "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        let configurationFile = directory.appendingPathComponent("bus.conf")
        try configuration.write(to: configurationFile, atomically: true, encoding: .utf8)
        // The daemon prints its address once it listens: waiting for that line waits exactly as
        // long as the start takes, however loaded the machine is.
        let printed = Pipe()
        let errorLog = directory.appendingPathComponent("dbus-daemon.log")
        guard FileManager.default.createFile(atPath: errorLog.path, contents: nil),
            let errors = FileHandle(forWritingAtPath: errorLog.path)
        else { throw MissingPrerequisite(name: "a log file for dbus-daemon in \(directory.path)") }
        defer { try? errors.close() }
        daemon = ChildProcess(
            executableURL: URL(fileURLWithPath: dbusDaemon),
            arguments: ["--nofork", "--print-address", "--config-file=\(configurationFile.path)"],
            environment: TestChildren.environment(), standardInput: .null, standardOutput: .pipe(printed),
            standardError: .handle(errors), diesWithParent: true)
        try await daemon.start()
        let banner = await readUntil(printed.fileHandleForReading, contains: "\n")
        guard banner.contains(socket) else {
            let log = (try? String(contentsOf: errorLog, encoding: .utf8)) ?? ""
            stop()
            Issue.record("dbus-daemon did not start a bus at \(socket); it printed: \(banner) \(log)")
            throw MissingPrerequisite(name: "a private D-Bus bus")
        }
        keptOutput = printed.fileHandleForReading
    }

    /// Stops the bus and removes its files.
    func stop() {
        stopProcess(daemon)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A gnome-keyring of the test's own, with a fresh, unlocked “Login” collection, on a
/// ``PrivateBus``. Stopped by `stop()`.
final class PrivateKeyring {
    let bus: PrivateBus
    private let daemon: ChildProcess

    /// The password of the login collection.
    static let password = "sesame-test-password"

    init() async throws {
        let keyringDaemon = try KeyringTestSupport.requireExecutable("gnome-keyring-daemon")
        bus = try await PrivateBus()
        let home = bus.directory.appendingPathComponent("home")
        let data = bus.directory.appendingPathComponent("data")
        let runtime = bus.directory.appendingPathComponent("runtime")
        for directory in [home, data, runtime] {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        var environment = TestChildren.environment()
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = data.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        let input = Pipe()
        daemon = ChildProcess(
            executableURL: URL(fileURLWithPath: keyringDaemon),
            arguments: ["--foreground", "--unlock", "--components=secrets"],
            environment: environment, standardInput: .pipe(input), standardOutput: .null, standardError: .null,
            diesWithParent: true)
        do { try await daemon.start() } catch {
            bus.stop()
            throw error
        }
        // --unlock reads the password up to end of file; it creates the login collection.
        let written = TestChildren.write(Data(Self.password.utf8), to: input.fileHandleForWriting)
        try input.fileHandleForWriting.close()
        guard written else {
            stop()
            Issue.record("gnome-keyring-daemon exited before it read the password (exit \(daemon.waitUntilExit()))")
            throw MissingPrerequisite(name: "a private gnome-keyring")
        }

        // The Secret Service registers on the bus asynchronously. Asked until it answers or the
        // daemon exits; the minute's limit only turns a hang into a failure.
        var last: ProbeResult?
        let deadline = ContinuousClock.now + .seconds(60)
        while daemon.isRunning && ContinuousClock.now < deadline {
            last = try await runProbe(["status"], busAddress: bus.address)
            if last?.ok == true { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        stop()
        Issue.record("gnome-keyring did not come up on the private bus: \(last?.message ?? "no answer")")
        throw MissingPrerequisite(name: "a private gnome-keyring")
    }

    /// Locks the login collection, as `secret-tool lock --collection=login` does (that command
    /// crashes after locking in libsecret 0.20, so the D-Bus call is made with `gdbus`).
    func lock() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        let output = try await KeyringTestSupport.run(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']",
            ],
            environment: environment)
        #expect(output.status == 0, "gdbus could not lock the login collection: \(output.standardError)")
    }

    /// Stops the keyring and its bus.
    func stop() {
        stopProcess(daemon)
        bus.stop()
    }
}

/// Kills a daemon the test started and waits for it.
///
/// SIGKILL: the daemons are throw-away, and nothing they would do on SIGTERM matters here.
func stopProcess(_ process: ChildProcess) {
    guard process.isRunning else { return }
    process.terminate(signal: SIGKILL)
    process.waitUntilExit()
}

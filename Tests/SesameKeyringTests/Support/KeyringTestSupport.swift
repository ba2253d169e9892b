import Foundation
import Sesame
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether and how the keyring tests can run here.
///
/// `scripts/with-keyring` runs the tests inside a private D-Bus session with an unlocked,
/// throw-away gnome-keyring and sets `SESAME_TEST_KEYRING=1`. Without it, the tests that need
/// a keyring are skipped with the reason printed; with it, a keyring or tool that is missing
/// makes them fail with a message that says so, never pass.
enum KeyringTestSupport {
    /// Whether the run promises a keyring (`SESAME_TEST_KEYRING=1`).
    static let keyringPromised = ProcessInfo.processInfo.environment["SESAME_TEST_KEYRING"] == "1"

    /// The reason printed when keyring tests are skipped.
    static let keyringSkipReason: Comment =
        "needs a Secret Service: run `scripts/with-keyring swift test --filter SesameKeyringTests`"

    /// Whether tests that need the given command-line tools should run: when the tools are all
    /// there, or when a keyring was promised (so that a missing tool fails the test).
    static func canRun(needing tools: [String]) -> Bool {
        keyringPromised || tools.allSatisfy { executable($0) != nil }
    }

    /// A reason for skipping tests that need `tools`.
    static func skipReason(needing tools: [String]) -> Comment {
        "needs \(tools.joined(separator: ", ")) on PATH (install them with scripts/bootstrap)"
    }

    /// The full path of `name` on PATH, or nil.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// The full path of `name` on PATH; records a failure naming it when it is missing.
    static func requireExecutable(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        guard let path = executable(name) else {
            let message = "\(name) is not on PATH, and this test needs it; install it (scripts/bootstrap installs "
            Issue.record(Comment(rawValue: message + "every tool the tests use)."), sourceLocation: sourceLocation)
            throw MissingPrerequisite(name: name)
        }
        return path
    }

    /// The test helper that makes one keyring call in its own process.
    static func probe(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let path = directory.appendingPathComponent("sesame-keyring-probe").path
        guard access(path, X_OK) == 0 else {
            let message = "The helper \(path) was not built; build it with `swift build --build-tests` (the test "
            Issue.record(
                Comment(rawValue: message + "target depends on it, so `swift test` builds it too)."),
                sourceLocation: sourceLocation)
            throw MissingPrerequisite(name: "sesame-keyring-probe")
        }
        return path
    }

    /// A directory for one test, removed by `remove()`.
    static func scratchDirectory() throws -> URL {
        var template = Array("\(NSTemporaryDirectory())/sesame-keyring-test.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw MissingPrerequisite(name: "a temporary directory")
        }
        return URL(fileURLWithPath: String(cString: made), isDirectory: true)
    }
}

/// Thrown after a failure naming what is missing has been recorded.
struct MissingPrerequisite: Error, CustomStringConvertible {
    var name: String
    var description: String { "missing \(name)" }
}

/// What a finished process printed.
struct ProcessOutput: Sendable {
    var status: Int32
    var stdout: Data
    var stderr: String
    /// Whether the watchdog had to kill it.
    var wasKilled: Bool

    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs `executable` to completion, feeding it `input` and reading both pipes before waiting
/// for it. A process still running after `watchdog` is killed and reported as such.
func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: Data? = nil,
    watchdog: Duration = .seconds(60)
) async throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    let exited = AsyncStream<Void>.makeStream()
    process.terminationHandler = { _ in
        exited.continuation.yield()
        exited.continuation.finish()
    }
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()

    let killed = Watchdog(process: process, after: watchdog)
    async let out = readToEnd(stdout.fileHandleForReading)
    async let err = readToEnd(stderr.fileHandleForReading)
    let (outData, errData) = await (out, err)
    for await _ in exited.stream {}
    killed.cancel()
    return ProcessOutput(
        status: process.terminationStatus, stdout: outData, stderr: String(decoding: errData, as: UTF8.self),
        wasKilled: killed.fired)
}

private func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: handle.readDataToEndOfFile()) }
    }
}

/// Kills a process that outlives its time.
private final class Watchdog: Sendable {
    private let state = Mutex<(fired: Bool, cancelled: Bool)>((false, false))

    init(process: Process, after limit: Duration) {
        let pid = process.processIdentifier
        let (seconds, attoseconds) = limit.components
        let delay = Double(seconds) + Double(attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            let fire = self.state.withLock { state -> Bool in
                guard !state.cancelled else { return false }
                state.fired = true
                return true
            }
            if fire { kill(pid, SIGKILL) }
        }
    }

    var fired: Bool { state.withLock { $0.fired } }

    func cancel() { state.withLock { $0.cancelled = true } }
}

/// What `sesame-keyring-probe` printed.
struct ProbeResult: Decodable, Sendable {
    var ok: Bool
    var kind: String?
    var message: String?
    var found: Bool?
    var keys: [String]?
    var backend: String?
    var warning: String?
    var status: String?
}

/// Runs the probe with `arguments` and `DBUS_SESSION_BUS_ADDRESS` set to `busAddress` (or unset
/// when nil), and decodes what it printed.
func runProbe(
    _ arguments: [String], busAddress: String?, extraEnvironment: [String: String] = [:],
    removing: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
) async throws -> ProbeResult {
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
    for name in removing { environment[name] = nil }
    environment.merge(extraEnvironment) { _, new in new }
    let output = try await runProcess(try KeyringTestSupport.probe(), arguments, environment: environment)
    #expect(!output.wasKilled, "the probe hung and was killed", sourceLocation: sourceLocation)
    do {
        return try JSONDecoder().decode(ProbeResult.self, from: output.stdout)
    } catch {
        Issue.record(
            "the probe printed no result (exit \(output.status)): \(output.text) \(output.stderr)",
            sourceLocation: sourceLocation)
        throw error
    }
}

// Shared by the test targets that run this package's built executables as processes: each test
// starts the binary and checks its stdout, stderr and exit code.
import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#endif

/// What a finished process printed and returned.
public struct ProcessResult: Sendable {
    /// The exit status.
    public var status: Int32
    /// Everything written to standard output.
    public var standardOutput: String
    /// Everything written to standard error.
    public var standardError: String
    /// Whether the process outlived its `killAfter` limit and was killed.
    public var wasKilled = false

    /// A result (for runners that read the process themselves, as it prints).
    public init(status: Int32, standardOutput: String, standardError: String, wasKilled: Bool = false) {
        self.status = status
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.wasKilled = wasKilled
    }
}

/// Runs built executables of this package as processes, off the cooperative thread pool.
public enum ProcessRunner {
    /// The executable `name` built next to this test bundle (for example `.build/debug/sesame`).
    ///
    /// - Throws: when it is not there, saying how to build it.
    public static func builtExecutable(_ name: String) throws -> URL {
        var directories = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(packageRoot.appending(path: ".build/debug"))
        for directory in directories {
            let candidate = directory.appending(path: name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw MissingExecutable(
            description: "The executable '\(name)' was not found in \(directories.map(\.path)); build it with "
                + "'swift build' (swift test builds it too) and run the tests again.")
    }

    public struct MissingExecutable: Error, CustomStringConvertible { public var description: String }

    /// Runs `executable` with `arguments`, feeding `input` to its standard input, and returns
    /// once it has exited. Both output pipes are read to the end before waiting for the exit.
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment (`nil`: this process's), with the locale
    ///     of ``TestChildren/environment(_:)`` set. The child dies with the test process.
    ///   - killAfter: a child still running after this long (by default ``hangLimit``) is killed
    ///     (SIGKILL) and the result says so, its standard error ending with where the child's
    ///     threads were: a test of something that must not hang fails instead of hanging.
    public static func run(
        _ executable: URL, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil,
        killAfter: Duration? = nil
    ) async throws -> ProcessResult {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    continuation.resume(
                        returning: try runBlocking(
                            executable, arguments, input: input, environment: environment,
                            killAfter: killAfter ?? hangLimit, hangReport: true))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    private static func runBlocking(
        _ executable: URL, _ arguments: [String], input: Data, environment: [String: String]?, killAfter: Duration,
        hangReport: Bool
    ) throws -> ProcessResult {
        let output = Pipe()
        let error = Pipe()
        let standardInput = Pipe()
        let process = ChildProcess(
            executableURL: executable, arguments: arguments, environment: TestChildren.environment(environment),
            standardInput: .pipe(standardInput), standardOutput: .pipe(output), standardError: .pipe(error),
            diesWithParent: true)
        try process.run()
        let watchdog = Watchdog()
        let stacks = Locked("")
        let (seconds, attoseconds) = killAfter.components
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18) {
            // terminate(signal:) never signals a pid once its child has been reaped.
            guard watchdog.fire() else { return }
            if hangReport {
                let report = hungProcessReport(process.processIdentifier, executable, after: killAfter)
                stacks.withLock { $0 = report }
            }
            process.terminate(signal: SIGKILL)
        }
        let writer = Thread {
            // A child that exits without reading its input is not an error here: the test sees
            // its exit status and standard error.
            TestChildren.write(input, to: standardInput.fileHandleForWriting)
            try? standardInput.fileHandleForWriting.close()
        }
        writer.start()
        let errorData = LockedData()
        let errorDone = DispatchSemaphore(value: 0)
        let errorReader = Thread {
            errorData.set(error.fileHandleForReading.readDataToEndOfFile())
            errorDone.signal()
        }
        errorReader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        errorDone.wait()
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus ?? -1, standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData.get(), as: UTF8.self) + stacks.withLock { $0 },
            wasKilled: watchdog.finish())
    }

    /// How long a child a test starts may run, when the test sets no limit of its own, before it
    /// is taken for hung and killed: many times what any of them needs, under a sanitizer on a
    /// loaded machine. It turns a hang into a failure, it times nothing.
    public static let hangLimit: Duration = .seconds(300)

    /// What a test prints about a child it takes for hung: that it was killed, and the stacks of
    /// its threads from gdb when gdb is installed (scripts/bootstrap installs it).
    public static func hungProcessReport(_ pid: Int32, _ executable: URL, after limit: Duration) -> String {
        var report = "\n[the test killed \(executable.lastPathComponent) (pid \(pid)), still running after \(limit)"
        let gdb = URL(fileURLWithPath: "/usr/bin/gdb")
        guard pid > 0, FileManager.default.isExecutableFile(atPath: gdb.path),
            let result = try? runBlocking(
                gdb, ["-p", "\(pid)", "-batch", "-nx", "-ex", "thread apply all bt 25"], input: Data(),
                environment: nil, killAfter: .seconds(60), hangReport: false)
        else { return report + "; no stacks: gdb is not installed]\n" }
        let frames = result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("Thread") || $0.hasPrefix("#") }
        report += "; its threads were here:\n" + frames.prefix(300).joined(separator: "\n") + "\n]\n"
        return report
    }

    /// Decides once between "killed" and "finished in time".
    private final class Watchdog: Sendable {
        private let state = Locked<(fired: Bool, finished: Bool)>((false, false))

        /// Called at the deadline: whether to kill (the process had not finished).
        func fire() -> Bool {
            state.withLock { state in
                guard !state.finished else { return false }
                state.fired = true
                return true
            }
        }

        /// Called after the exit: whether the watchdog had killed the process.
        func finish() -> Bool {
            state.withLock { state in
                state.finished = true
                return state.fired
            }
        }
    }

    /// Data handed over from the reader thread.
    private final class LockedData: Sendable {
        private let data = Locked(Data())
        func set(_ value: Data) { data.withLock { $0 = value } }
        func get() -> Data { data.withLock { $0 } }
    }
}

/// Reads `handle` on a thread of its own (never the cooperative pool) until what has arrived
/// contains `marker`, the stream ends, or `timeout` passes; returns all of it. For a program's
/// start-up banner: the caller checks that the marker is there, and a program that hangs or
/// exits early fails that check with what it did print instead of hanging the test.
public func readUntil(_ handle: FileHandle, contains marker: String, timeout: Duration = .seconds(120)) async -> String
{
    await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
        Thread {
            let descriptor = handle.fileDescriptor
            let deadline = ContinuousClock.now + timeout
            var text = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: text, as: UTF8.self).contains(marker) {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { break }
                var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(min(left.components.seconds * 1000 + 1, 60_000))
                let ready = poll(&descriptorSet, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                if ready <= 0 { continue }
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                text.append(contentsOf: buffer[0..<count])
            }
            continuation.resume(returning: String(decoding: text, as: UTF8.self))
        }.start()
    }
}

/// Everything `handle` delivers until end of file, read on a thread of its own: the read blocks
/// until every writer has closed (a child, until it exits), which must not hold a thread of the
/// cooperative pool that the rest of the test process (its in-process servers) runs on.
public func readToEnd(_ handle: FileHandle) async -> Data {
    await onOwnThread { handle.readDataToEndOfFile() }
}

/// What every process a test starts gets: the environment it needs, spelled out, and a way to
/// write to it that never traps.
public enum TestChildren {
    /// `base` (or this process's environment) with what a child needs whatever the test process
    /// was started with: a UTF-8 locale (`LANG` and `LC_ALL` are `C.UTF-8`; under the C locale
    /// `secret-tool` refuses a label with a non-ASCII character), and `PATH` when missing; and this
    /// process's sanitizer options (`TSAN_OPTIONS` and the like) when `base` has none, so that under
    /// `scripts/sanitize` a report in a child goes to the log directory the script counts, however
    /// bare the environment the test gives the child.
    public static func environment(_ base: [String: String]? = nil) -> [String: String] {
        var environment = base ?? ProcessInfo.processInfo.environment
        environment["LANG"] = "C.UTF-8"
        environment["LC_ALL"] = "C.UTF-8"
        if environment["PATH"] == nil { environment["PATH"] = "/usr/local/bin:/usr/bin:/bin" }
        // A sanitized run (`swift test --sanitize=…`) builds the children with the sanitizer
        // too: they get the test process's options (where reports go, the suppressions) even
        // when a test spells out their whole environment.
        for name in sanitizerOptions where environment[name] == nil {
            environment[name] = ProcessInfo.processInfo.environment[name]
        }
        return environment
    }

    /// The variables the sanitizers' runtimes read their options from.
    private static let sanitizerOptions = ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"]

    /// Writes all of `data` to `handle`; returns `false` when the reader went away (`EPIPE`) or
    /// the write failed otherwise. Never traps, unlike `FileHandle.write(_:)`, and never lets
    /// `SIGPIPE` end the test process.
    @discardableResult
    public static func write(_ data: Data, to handle: FileHandle) -> Bool {
        _ = ignoreBrokenPipes
        return StandardStreams.write(Array(data), to: handle.fileDescriptor)
    }

    /// SIGPIPE ignored in the test process, once: a write to a child that has exited then fails
    /// with `EPIPE` instead of killing every test. (Children get the default action back.)
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()
}

// Shared by the test targets that run this package's built executables as processes
// (STYLE.md: end-to-end tests start the binary and check stdout, stderr and the exit code).
import Foundation
import Sesame
import Synchronization

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
    ///   - environment: the child's whole environment; `nil` inherits this process's.
    ///   - killAfter: when set, a child still running after this long is killed (SIGKILL) and the
    ///     result says so, so that a test of something that must not hang fails instead of hanging.
    public static func run(
        _ executable: URL, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil,
        killAfter: Duration? = nil
    ) async throws -> ProcessResult {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    continuation.resume(
                        returning: try runBlocking(
                            executable, arguments, input: input, environment: environment, killAfter: killAfter))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    private static func runBlocking(
        _ executable: URL, _ arguments: [String], input: Data, environment: [String: String]?, killAfter: Duration?
    ) throws -> ProcessResult {
        let output = Pipe()
        let error = Pipe()
        let standardInput = Pipe()
        let process = ChildProcess(
            executableURL: executable, arguments: arguments, environment: environment,
            standardInput: .pipe(standardInput), standardOutput: .pipe(output), standardError: .pipe(error))
        try process.run()
        let watchdog = Watchdog()
        if let killAfter {
            let pid = process.processIdentifier
            let (seconds, attoseconds) = killAfter.components
            DispatchQueue.global().asyncAfter(deadline: .now() + Double(seconds) + Double(attoseconds) / 1e18) {
                if watchdog.fire() { kill(pid, SIGKILL) }
            }
        }
        let writer = Thread {
            standardInput.fileHandleForWriting.write(input)
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
            standardError: String(decoding: errorData.get(), as: UTF8.self), wasKilled: watchdog.finish())
    }

    /// Decides once between "killed" and "finished in time".
    private final class Watchdog: Sendable {
        private let state = Mutex<(fired: Bool, finished: Bool)>((false, false))

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
        private let data = Mutex(Data())
        func set(_ value: Data) { data.withLock { $0 = value } }
        func get() -> Data { data.withLock { $0 } }
    }
}

/// Reads `handle` on a thread of its own (never the cooperative pool) until what has arrived
/// contains `marker` or the stream ends; returns all of it. For a program's start-up banner.
public func readUntil(_ handle: FileHandle, contains marker: String) async -> String {
    await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
        Thread {
            var text = ""
            while true {
                let chunk = handle.availableData
                text += String(decoding: chunk, as: UTF8.self)
                if text.contains(marker) || chunk.isEmpty {
                    continuation.resume(returning: text)
                    return
                }
            }
        }.start()
    }
}

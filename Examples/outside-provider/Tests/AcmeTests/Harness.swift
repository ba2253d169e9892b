import AcmeEmulator
import Foundation
import Sesame
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a finished `acme-sesame` printed and returned.
struct Outcome: Sendable {
    var status: Int32
    var standardOutput: String
    var standardError: String
}

/// A throw-away home for `acme-sesame`: temporary XDG directories and a home of its own, logins in
/// a file (`SESAME_STORAGE=file`), the built-in emulator's approval automatic, no colour.
final class Home: Sendable {
    let root: URL
    let environment: [String: String]

    init() throws {
        root = FileManager.default.temporaryDirectory.appending(path: "acme-sesame-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        // SESAME_TEST_RUN_ID marks the processes of one scripts/test run, for its check that none is left.
        for name in environment.keys where name.hasPrefix("SESAME_") && name != "SESAME_TEST_RUN_ID" {
            environment[name] = nil
        }
        for name in ["DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "NO_COLOR", "TERM"] { environment[name] = nil }
        environment["XDG_STATE_HOME"] = root.appending(path: "state").path
        environment["XDG_CONFIG_HOME"] = root.appending(path: "config").path
        environment["HOME"] = root.appending(path: "home").path
        environment["SESAME_STORAGE"] = "file"
        environment["SESAME_EMULATOR_APPROVE"] = "auto"
        environment["NO_COLOR"] = "1"
        environment["LANG"] = "C.UTF-8"
        environment["LC_ALL"] = "C.UTF-8"
        self.environment = environment
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// The logins `acme-sesame` stored.
    var store: FileCredentialStore {
        FileCredentialStore(url: root.appending(path: "state/sesame/credentials.json"))
    }

    /// The Acme logins stored now.
    func acmeLogins() async throws -> [StoredCredential] { try await store.list(provider: "acme") }

    /// The built-in emulator's saved state.
    var emulatorState: URL { root.appending(path: "state/sesame/acme-emulator.json") }

    /// Runs `acme-sesame arguments` to its end.
    func run(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> Outcome {
        try await start(arguments, environment: extra).finish()
    }

    /// Starts `acme-sesame arguments`, for a test that talks to it while it runs.
    func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> Running {
        try Running(AcmeSesame.executable(), arguments, environment: environment.merging(extra) { $1 })
    }

    /// Moves every stored login `seconds` into the past, as if the clock had moved on: its issue
    /// and expiry dates (the processes' own clock cannot be moved).
    func age(by seconds: TimeInterval) async throws {
        for var credential in try await store.list(provider: nil) {
            credential.token.refreshDate -= seconds
            credential.token.expirationDate = credential.token.expirationDate.map { $0 - seconds }
            credential.savedAt -= seconds
            try await store.save(credential)
        }
    }
}

/// Runs `body` with an Acme emulator of the test's own on 127.0.0.1, and stops it afterwards,
/// whether `body` returned or threw.
func withEmulator<Result>(_ body: (AcmeEmulator, URL) async throws -> Result) async throws -> Result {
    let emulator = AcmeEmulator(devicePollInterval: 1)
    let base = try emulator.start()
    do {
        let result = try await body(emulator, base)
        await emulator.stop()
        return result
    } catch {
        await emulator.stop()
        throw error
    }
}

/// Where the built `acme-sesame` is.
enum AcmeSesame {
    static func executable() throws -> URL {
        var directories: [URL] = []
        if let test = Bundle.main.executableURL { directories.append(test.deletingLastPathComponent()) }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(package.appending(path: ".build/debug"))
        for directory in directories {
            let candidate = directory.appending(path: "acme-sesame")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw Missing(description: "acme-sesame is not built next to the tests (looked in \(directories.map(\.path)))")
    }

    struct Missing: Error, CustomStringConvertible { var description: String }
}

/// A running `acme-sesame`: both pipes read on threads of their own as the program writes, so that
/// a test can wait for a line (an event) and the program never blocks on a full pipe.
final class Running: Sendable {
    private let process: Process
    private let output = Stream()
    private let error = Stream()
    private let exited = Stream()

    init(_ executable: URL, _ arguments: [String], environment: [String: String]) throws {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        process.standardInput = FileHandle.nullDevice
        self.process = process
        try process.run()
        for (pipe, stream) in [(outputPipe, output), (errorPipe, error)] {
            Thread.detachNewThread {
                let descriptor = pipe.fileHandleForReading.fileDescriptor
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    stream.append(buffer[0..<count])
                }
                stream.close()
            }
        }
        Thread.detachNewThread { [output, error, exited] in
            // Both pipes are read to their end before the exit is waited for.
            output.waitClosed()
            error.waitClosed()
            process.waitUntilExit()
            exited.close()
        }
    }

    /// Waits until standard error contains `text`; returns all of it so far. A program that exits
    /// first, or prints nothing of the kind for two minutes, fails the wait with what it printed.
    func waitForError(containing text: String) async throws -> String {
        try await wait(error, "standard error", containing: text)
    }

    /// Waits until standard output contains `text`, as ``waitForError(containing:)``.
    func waitForOutput(containing text: String) async throws -> String {
        try await wait(output, "standard output", containing: text)
    }

    private func wait(_ stream: Stream, _ name: String, containing text: String) async throws -> String {
        let found = await stream.wait(for: text, timeout: .seconds(120))
        guard found.contains(text) else {
            process.terminate()
            throw Missing(description: "acme-sesame did not print '\(text)' on \(name); it printed: \(found)")
        }
        return found
    }

    /// Asks the program to stop (SIGTERM).
    func terminate() { process.terminate() }

    /// Waits for the exit; returns what it printed and its status. A program still running after
    /// five minutes is killed, so that a hang fails the test instead of holding up the run.
    func finish() async -> Outcome {
        _ = await exited.wait(for: nil, timeout: .seconds(300))
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = await exited.wait(for: nil, timeout: nil)
        }
        return Outcome(status: process.terminationStatus, standardOutput: output.text, standardError: error.text)
    }

    struct Missing: Error, CustomStringConvertible { var description: String }

    /// Bytes as they arrive, and the waits for them: each wait is resumed by the reader's append
    /// or close that satisfies it, or by its timeout.
    final class Stream: Sendable {
        private struct Waiter {
            var text: String?
            var continuation: CheckedContinuation<String, Never>
        }
        private struct State {
            var data = Data()
            var closed = false
            var waiters: [UUID: Waiter] = [:]
        }
        private let state = Mutex(State())
        private let closedSignal = DispatchSemaphore(value: 0)

        var text: String { state.withLock { String(decoding: $0.data, as: UTF8.self) } }

        func append(_ bytes: ArraySlice<UInt8>) {
            resume { $0.data.append(contentsOf: bytes) }
        }

        func close() {
            resume { $0.closed = true }
            closedSignal.signal()
        }

        /// Blocks (a reader's thread, never the cooperative pool) until ``close()``.
        func waitClosed() {
            closedSignal.wait()
            closedSignal.signal()
        }

        /// Waits until the text contains `text` (or, for `nil`, the stream is closed), the stream
        /// closes, or `timeout` passes (a guard that turns a hang into a failure, not a timing);
        /// returns the text then.
        func wait(for text: String?, timeout: Duration?) async -> String {
            let id = UUID()
            return await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> String? in
                    let current = String(decoding: state.data, as: UTF8.self)
                    if state.closed || text.map(current.contains) == true { return current }
                    state.waiters[id] = Waiter(text: text, continuation: continuation)
                    return nil
                }
                if let ready { return continuation.resume(returning: ready) }
                guard let timeout else { return }
                let seconds = Double(timeout.components.seconds)
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                    let expired = state.withLock { state -> (CheckedContinuation<String, Never>, String)? in
                        guard let waiter = state.waiters.removeValue(forKey: id) else { return nil }
                        return (waiter.continuation, String(decoding: state.data, as: UTF8.self))
                    }
                    if let (continuation, text) = expired { continuation.resume(returning: text) }
                }
            }
        }

        private func resume(after change: (inout State) -> Void) {
            let ready = state.withLock { state -> [(CheckedContinuation<String, Never>, String)] in
                change(&state)
                let current = String(decoding: state.data, as: UTF8.self)
                var ready: [(CheckedContinuation<String, Never>, String)] = []
                for (id, waiter) in state.waiters where state.closed || waiter.text.map(current.contains) == true {
                    ready.append((waiter.continuation, current))
                    state.waiters[id] = nil
                }
                return ready
            }
            for (continuation, text) in ready { continuation.resume(returning: text) }
        }
    }
}

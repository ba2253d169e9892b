import Foundation
import Sesame
import SesameCurl
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A throw-away home for the `sesame` programs: temporary XDG directories, file (or memory)
/// storage, and a record of everything every run printed, for the check that no token leaks.
final class CLIHarness: Sendable {
    let root: URL
    let environment: [String: String]
    private let outputs = Locked<[(command: String, text: String)]>([])
    /// The store the programs use, when it is not the credential file (a fleet's database).
    private let sharedStore: (any CredentialStore)?

    /// - Parameters:
    ///   - storage: `SESAME_STORAGE`, or `nil` for none (the default policy).
    ///   - clean: when given, the programs' whole environment is this (and the harness's own
    ///     variables), as under `env -i`: no D-Bus, no display, nothing of the test's.
    ///   - extra: more variables for the programs (a fleet's database).
    ///   - store: the storage's store, when it is not the credential file.
    init(
        storage: String? = "file", clean: [String: String]? = nil, environment extra: [String: String] = [:],
        store: (any CredentialStore)? = nil
    ) throws {
        sharedStore = store
        root = FileManager.default.temporaryDirectory.appending(path: "sesame-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        if let clean {
            environment = clean.merging(environment.filter { $0.key == "SESAME_TEST_RUN_ID" }) { $1 }
        }
        // SESAME_TEST_RUN_ID marks the processes of one scripts/test run, for its orphan check.
        let kept: Set = ["SESAME_TEST_KEYRING", "SESAME_TEST_RUN_ID"]
        for name in environment.keys where name.hasPrefix("SESAME_") && !kept.contains(name) {
            environment[name] = nil
        }
        environment["XDG_STATE_HOME"] = root.appending(path: "state").path
        environment["XDG_CONFIG_HOME"] = root.appending(path: "config").path
        environment["HOME"] = root.appending(path: "home").path
        environment["SESAME_STORAGE"] = storage
        environment["NO_COLOR"] = "1"
        environment.merge(extra) { $1 }
        self.environment = TestChildren.environment(environment)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// Runs a built program to the end, reading both pipes before waiting.
    @discardableResult
    func run(
        _ program: String, _ arguments: [String], input: Data = Data(), environment extra: [String: String] = [:]
    ) async throws -> ProcessResult {
        let running = try await LiveProcess(
            try ProcessRunner.builtExecutable(program), arguments, environment: environment.merging(extra) { $1 },
            input: input)
        let result = await running.finish()
        outputs.withLock {
            $0.append(("\(program) \(arguments.joined(separator: " "))", result.standardOutput + result.standardError))
        }
        return result
    }

    /// Runs a built program as ``run(_:_:input:environment:)`` does, started by `sh -c` after
    /// `setup`, shell commands that change what the program inherits (`umask 002`, `exec
    /// </dev/zero`). A program still running after `limit` is killed and its result says so.
    @discardableResult
    func run(
        _ program: String, _ arguments: [String], shellSetup setup: String, limit: Duration = ProcessRunner.hangLimit,
        environment extra: [String: String] = [:]
    ) async throws -> ProcessResult {
        let executable = try ProcessRunner.builtExecutable(program)
        let running = try await LiveProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "\(setup)\nexec \"$0\" \"$@\"", executable.path] + arguments,
            environment: environment.merging(extra) { $1 }, input: Data())
        let result = await running.finish(limit: limit)
        outputs.withLock {
            $0.append(("\(program) \(arguments.joined(separator: " "))", result.standardOutput + result.standardError))
        }
        return result
    }

    /// Starts a program and returns it running (for a login to approve through the admin API).
    func start(
        _ program: String, _ arguments: [String], environment extra: [String: String] = [:]
    ) async throws -> LiveProcess {
        try await LiveProcess(
            try ProcessRunner.builtExecutable(program), arguments, environment: environment.merging(extra) { $1 },
            input: Data())
    }

    func record(_ command: String, _ result: ProcessResult) {
        outputs.withLock { $0.append((command, result.standardOutput + result.standardError)) }
    }

    /// The access tokens in the credential file now.
    func storedTokens() async throws -> [String] {
        let store = FileCredentialStore(url: root.appending(path: "state/sesame/credentials.json"))
        return try await store.list(provider: nil).map(\.token.tokenString)
    }

    /// The credential file's store.
    var fileStore: FileCredentialStore {
        FileCredentialStore(url: root.appending(path: "state/sesame/credentials.json"))
    }

    /// The store the programs keep their logins in: the credential file, or the one given.
    var store: any CredentialStore { sharedStore ?? fileStore }

    /// Moves every stored login `seconds` into the past, as if the clock had moved forward that
    /// much: its issue, expiry and refresh-token expiry dates (the processes' own clock cannot be
    /// moved; the emulator's is moved with its admin API beside this).
    func age(by seconds: TimeInterval) async throws {
        let store = self.store
        for var credential in try await store.list(provider: nil) {
            credential.token.refreshDate -= seconds
            credential.token.expirationDate = credential.token.expirationDate.map { $0 - seconds }
            credential.token.refreshTokenExpirationDate = credential.token.refreshTokenExpirationDate.map {
                $0 - seconds
            }
            credential.savedAt -= seconds
            try await store.save(credential)
        }
    }

    /// Checks that none of `tokens` appears in any output except `sesame token`'s.
    func expectNoTokenLeaks(_ tokens: [String]) {
        let all = outputs.withLock { $0 }
        #expect(!all.isEmpty)
        for token in Set(tokens) where token.count >= 8 {
            for (command, text) in all where !command.hasPrefix("sesame token") {
                #expect(!text.contains(token), "a token appeared in the output of '\(command)'")
            }
        }
    }

    /// Approves a device login through the emulator's admin API, reading the emulator's address
    /// and the code from what the program printed.
    func approveDevice(of process: LiveProcess, grant: [String]? = nil) async throws {
        let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z0-9]{4,}\n"#)
        let base = try #require(
            printed.firstMatch(of: #/open (http://127\.0\.0\.1:\d+)/device/#).map { String($0.1) })
        let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z0-9]{4,})\s*\n/#).map { String($0.1) })
        var body: [String: JSONValue] = ["user_code": .string(code)]
        if let grant { body["grant"] = .array(grant.map { .string($0) }) }
        let response = try await CurlTransport().send(
            .postJSON(URL(string: "\(base)/__sesame/device/approve")!, .object(body)))
        #expect(response.status == 200, "admin approve: \(String(decoding: response.body, as: UTF8.self))")
    }
}

/// A program running in the background whose standard error is read as it comes.
final class LiveProcess: Sendable {
    private let process: ChildProcess
    private let executable: URL
    private let output = Locked(Data())
    /// Standard error so far, and whether it has ended; each change wakes ``waitForError(containing:timeout:)``.
    private let error = Observed((data: Data(), ended: false))
    private let done = Locked<ProcessResult?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(_ executable: URL, _ arguments: [String], environment: [String: String], input: Data) async throws {
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        let inputPipe = Pipe()
        let process = ChildProcess(
            executableURL: executable, arguments: arguments, environment: TestChildren.environment(environment),
            standardInput: .pipe(inputPipe), standardOutput: .pipe(outputPipe), standardError: .pipe(errorPipe),
            diesWithParent: true)
        self.process = process
        self.executable = executable
        try await process.start()
        Thread.detachNewThread {
            // A program that exits without reading its input fails its test on its exit status
            // and standard error; the write only reports the closed pipe.
            TestChildren.write(input, to: inputPipe.fileHandleForWriting)
            try? inputPipe.fileHandleForWriting.close()
        }
        let errorDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            // read(2) returns what has arrived, so the test sees each line as it is printed.
            let descriptor = errorPipe.fileHandleForReading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                self.error.change { $0.data.append(contentsOf: buffer[0..<count]) }
            }
            self.error.change { $0.ended = true }
            errorDone.signal()
        }
        Thread.detachNewThread { [self] in
            let data = outputPipe.fileHandleForReading.readDataToEndOfFile()
            self.output.withLock { $0 = data }
            errorDone.wait()
            process.waitUntilExit()
            done.withLock {
                $0 = ProcessResult(
                    status: process.terminationStatus ?? -1, standardOutput: String(decoding: data, as: UTF8.self),
                    standardError: String(decoding: error.value.data, as: UTF8.self))
            }
            finished.signal()
        }
    }

    /// Asks the program to stop (SIGTERM); ``finish()`` then waits for its exit.
    func terminate() { process.terminate(signal: SIGTERM) }
    /// Kills the program at once (SIGKILL), as a crash or the OOM killer would.
    func kill() { process.terminate(signal: SIGKILL) }

    /// Standard error so far.
    var standardError: String { String(decoding: error.value.data, as: UTF8.self) }

    /// Waits until standard error contains `text`; throws, with what the program printed, when
    /// it exits without it or has not printed it within `timeout`.
    func waitForError(containing text: String, timeout: Duration = .seconds(120)) async throws -> String {
        try await waitForError(timeout: timeout) { $0.contains(text) }
    }

    /// Waits until standard error matches `pattern` (as ``waitForError(containing:timeout:)``).
    func waitForError(matching pattern: String, timeout: Duration = .seconds(120)) async throws -> String {
        let regex = try Regex(pattern)
        return try await waitForError(timeout: timeout) { $0.firstMatch(of: regex) != nil }
    }

    private func waitForError(timeout: Duration, _ ready: (String) -> Bool) async throws -> String {
        // The limit is far beyond any expected wait: it turns a hang into a failure, it does not
        // time anything.
        _ = await error.wait(limit: timeout) { ready(String(decoding: $0.data, as: UTF8.self)) || $0.ended }
        let text = standardError
        if ready(text) { return text }
        if error.value.ended {
            throw ProcessEnded(description: "the program exited first; it printed: \(text)")
        }
        process.terminate(signal: SIGKILL)
        throw ProcessEnded(
            description: "the program did not print what was expected in \(timeout); it printed: \(text)")
    }

    struct ProcessEnded: Error, CustomStringConvertible { var description: String }

    /// Waits for the exit. A program still running after `limit` is taken for hung: it is killed,
    /// and its result (exit status -1 when its output stays open) ends with where its threads
    /// were, so that the test fails instead of never ending.
    func finish(limit: Duration = ProcessRunner.hangLimit) async -> ProcessResult {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in
                let (seconds, _) = limit.components
                guard finished.wait(timeout: .now() + .seconds(Int(seconds))) == .timedOut else {
                    finished.signal()
                    continuation.resume(returning: done.withLock { $0! })
                    return
                }
                let report = ProcessRunner.hungProcessReport(
                    process.processIdentifier, executable, after: limit)
                process.terminate(signal: SIGKILL)
                // A program's own child may hold its output open after it is killed.
                guard finished.wait(timeout: .now() + .seconds(10)) == .success else {
                    continuation.resume(
                        returning: ProcessResult(
                            status: -1, standardOutput: "", standardError: standardError + report, wasKilled: true))
                    return
                }
                finished.signal()
                var result = done.withLock { $0! }
                result.standardError += report
                result.wasKilled = true
                continuation.resume(returning: result)
            }
        }
    }
}

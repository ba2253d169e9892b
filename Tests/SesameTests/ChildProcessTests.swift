import Foundation
import Sesame
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The spawn path every child of Sesame and of its tests goes through (the C shim
/// `sesame_spawn`): what the child gets, and what a failed start says.
@Suite("ChildProcess")
struct ChildProcessTests {
    /// Runs `/bin/sh -c script` with piped output and returns what it printed and its status:
    /// with ``ChildProcess/run()`` and blocking reads, on a thread of its own, not the pool's.
    private func shell(
        _ script: String, input: Data = Data(), diesWithParent: Bool = false
    ) async throws -> (output: String, error: String, status: Int32) {
        try await onOwnThread { try Self.shellBlocking(script, input: input, diesWithParent: diesWithParent) }
    }

    private static func shellBlocking(
        _ script: String, input: Data, diesWithParent: Bool
    ) throws -> (output: String, error: String, status: Int32) {
        let output = Pipe()
        let error = Pipe()
        let standardInput = Pipe()
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script],
            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], standardInput: .pipe(standardInput),
            standardOutput: .pipe(output), standardError: .pipe(error), diesWithParent: diesWithParent)
        try process.run()
        _ = StandardStreams.write(Array(input), to: standardInput.fileHandleForWriting.fileDescriptor)
        try standardInput.fileHandleForWriting.close()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let errors = error.fileHandleForReading.readDataToEndOfFile()
        return (
            String(decoding: printed, as: UTF8.self), String(decoding: errors, as: UTF8.self),
            process.waitUntilExit()
        )
    }

    @Test("standard input, output and error go where they were asked, with the exit status", arguments: [false, true])
    func streams(diesWithParent: Bool) async throws {
        let result = try await shell(
            "cat; echo to-error >&2; exit 3", input: Data("to-output\n".utf8), diesWithParent: diesWithParent)
        #expect(result.output == "to-output\n")
        #expect(result.error == "to-error\n")
        #expect(result.status == 3)
    }

    @Test("no descriptor of the parent other than the three streams reaches the child")
    func otherDescriptorsClosed() async throws {
        let held = Pipe()  // open in this process, not close-on-exec
        let number = held.fileHandleForReading.fileDescriptor
        _ = fcntl(number, F_SETFD, 0)
        let result = try await shell("ls /proc/$$/fd")
        let open = Set(result.output.split(separator: "\n").compactMap { Int32($0) })
        #expect(open.isSuperset(of: [0, 1, 2]), "\(result)")
        #expect(!open.contains(number), "descriptor \(number) of the parent leaked into the child: \(open.sorted())")
        try held.fileHandleForWriting.close()
    }

    @Test("the child has no signal blocked and SIGPIPE at its default action, though this process ignores it")
    func cleanSignalState() async throws {
        // Left ignored afterwards: the test harness ignores it in the test process anyway, and
        // putting the default back could end the process while another test writes to a pipe.
        signal(SIGPIPE, SIG_IGN)
        // grep takes the shell's place (exec keeps the masks and what is ignored) and prints them.
        // Not the shell's own: while it waits for a child, dash blocks every signal.
        let result = try await shell("exec grep -E '^(SigBlk|SigIgn):' /proc/self/status")
        let masks = Dictionary(
            uniqueKeysWithValues: result.output.split(separator: "\n").compactMap { line -> (String, UInt64)? in
                let parts = line.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, let value = UInt64(parts[1], radix: 16) else { return nil }
                return (parts[0], value)
            })
        let blocked = try #require(masks["SigBlk"], "\(result)")
        let ignored = try #require(masks["SigIgn"], "\(result)")
        #expect(blocked == 0)
        #expect(ignored & (1 << (UInt64(SIGPIPE) - 1)) == 0, "SIGPIPE is ignored in the child")
    }

    @Test("a program that cannot be started is an error naming it and the reason, and leaves no child")
    func missingProgram() throws {
        let process = ChildProcess(executableURL: URL(fileURLWithPath: "/nonexistent/sesame-no-such-program"))
        #expect {
            try process.run()
        } throws: { error in
            let message = "\(error)"
            return message.contains("/nonexistent/sesame-no-such-program")
                && message.contains("No such file or directory")
        }
        #expect(!process.isRunning)
        #expect(process.processIdentifier == 0)
    }

    @Test("start() from a task: the same error for a program that cannot be started, and the same streams")
    func startFromTask() async throws {
        let missing = ChildProcess(executableURL: URL(fileURLWithPath: "/nonexistent/sesame-no-such-program"))
        await #expect {
            try await missing.start()
        } throws: { error in
            "\(error)".contains("/nonexistent/sesame-no-such-program")
                && "\(error)".contains("No such file or directory")
        }
        #expect(!missing.isRunning)
        let output = Pipe()
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", "echo started; exit 4"],
            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], standardInput: .null,
            standardOutput: .pipe(output),
            standardError: .null, diesWithParent: true)
        try await process.start()
        // The child's end of the pipe is closed once start() returns: reading ends at its exit.
        #expect(String(decoding: await readToEnd(output.fileHandleForReading), as: UTF8.self) == "started\n")
        #expect(await process.exitStatus() == 4)
    }

    @Test("terminate() after the child was reaped does nothing, and its status stays")
    func terminateAfterExit() throws {
        let process = ChildProcess(executableURL: URL(fileURLWithPath: "/bin/true"), diesWithParent: true)
        try process.run()
        #expect(process.waitUntilExit() == 0)
        process.terminate(signal: SIGKILL)
        #expect(process.terminationStatus == 0)
        #expect(!process.isRunning)
    }

    @Test("a child ended by a signal reports 128 plus the signal")
    func killedBySignal() async throws {
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: "/bin/sleep"), arguments: ["600"], diesWithParent: true)
        try await process.start()
        #expect(process.isRunning)
        process.terminate(signal: SIGKILL)
        #expect(await process.exitStatus() == 128 + SIGKILL)
    }

    @Test("a test's child still running at its limit is killed, and the result says where its threads were")
    func hungChildIsReported() async throws {
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/bin/sleep"), ["30"], killAfter: .milliseconds(500))
        #expect(result.wasKilled)
        #expect(result.status == 128 + SIGKILL || result.status == -1, "status \(result.status)")
        #expect(result.standardError.contains("the test killed sleep"), "\(result.standardError)")
        // scripts/bootstrap installs gdb; without it the report says so instead of the stacks.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") {
            #expect(result.standardError.contains("#0 "), "no stack in: \(result.standardError)")
        } else {
            #expect(result.standardError.contains("gdb is not installed"))
        }
    }
}

internal import CSesameSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with vfork and exec (the C shim `sesame_spawn`), with the small part
/// of `Foundation.Process`'s interface this package uses.
///
/// swift-corelibs-foundation's `Process.run()` (Swift 6.3) crashes intermittently on Linux:
/// while listing `/proc/self/fd` it copies a whole 256-byte `d_name` from each `readdir` record
/// and can read past the end of glibc's buffer (swift-corelibs-foundation#5472). Sesame starts
/// `xdg-open`, `dbus-send` and, in its tests, its own executables, often from many threads at
/// once, so it spawns children itself: descriptors 3 and up are closed in the child with
/// `close_range`, and the thread that started a child waits for it and reaps it.
package final class ChildProcess: Sendable {
    /// Where a standard stream of the child goes.
    package enum Stream: Sendable {
        /// Inherit this process's descriptor.
        case inherit
        /// `/dev/null`.
        case null
        /// One end of a pipe: the child gets the other.
        case pipe(Pipe)
        /// An open file handle.
        case handle(FileHandle)
    }

    private struct State {
        var pid: pid_t?
        /// Set once the child has exited, before it is reaped: from then on its pid is not signalled.
        var exited = false
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Locked(State())
    private let exited = DispatchSemaphore(value: 0)

    /// The program to run.
    package let executableURL: URL
    /// Its arguments, without the program name.
    package let arguments: [String]
    /// Its whole environment; `nil` inherits this process's.
    package let environment: [String: String]?
    let standardInput: Stream
    let standardOutput: Stream
    let standardError: Stream
    private let terminationHandler: (@Sendable (Int32) -> Void)?
    /// Whether the child is killed (SIGKILL) when this process ends, however it ends.
    package let diesWithParent: Bool

    /// Describes a child; nothing starts until ``run()``.
    ///
    /// - Parameters:
    ///   - diesWithParent: kill the child (SIGKILL, through `PR_SET_PDEATHSIG`) when this process
    ///     ends, even when it crashes or is killed. Tests set it for every server and daemon they
    ///     start, so that none outlives the test process.
    ///   - terminationHandler: called on the reaper thread with the exit status.
    package init(
        executableURL: URL, arguments: [String] = [], environment: [String: String]? = nil,
        standardInput: Stream = .inherit, standardOutput: Stream = .inherit, standardError: Stream = .inherit,
        diesWithParent: Bool = false, terminationHandler: (@Sendable (Int32) -> Void)? = nil
    ) {
        self.diesWithParent = diesWithParent
        self.executableURL = executableURL
        self.arguments = arguments
        self.environment = environment
        self.standardInput = standardInput
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.terminationHandler = terminationHandler
    }

    /// The child's process id, once started.
    package var processIdentifier: Int32 { state.withLock { $0.pid ?? 0 } }

    /// Whether the child has started and not yet been reaped.
    package var isRunning: Bool { state.withLock { $0.pid != nil && $0.status == nil } }

    /// The exit status (or 128 + the signal that ended it); `nil` while running.
    package var terminationStatus: Int32? { state.withLock { $0.status } }

    /// Starts the child, blocking the calling thread until it has been started.
    ///
    /// The child is started from a thread of its own that then waits for it, so that a child
    /// made with `diesWithParent` lives exactly as long as that thread, which ends only once the
    /// child has been reaped (or with this process). Starting takes a vfork and an exec, well
    /// under a millisecond, but ThreadSanitizer turns vfork into a fork of the whole process,
    /// which takes up to seconds: from a task, use ``start()``, which does not hold a thread of
    /// the cooperative pool meanwhile.
    ///
    /// - Throws: ``ChildProcessError`` naming the program and the reason.
    package func run() throws {
        let started = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Void, ChildProcessError>?>(nil)
        try launch { result in
            outcome.withLock { $0 = result }
            started.signal()
        }
        started.wait()
        try outcome.withLock { $0 }?.get()
    }

    /// Starts the child as ``run()`` does, suspending the calling task, not blocking its
    /// thread, until it has been started.
    ///
    /// - Throws: ``ChildProcessError`` naming the program and the reason.
    package func start() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            do {
                try launch { result in continuation.resume(with: result.mapError { $0 as any Error }) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Prepares the child's streams and starts it from a thread of its own, which calls
    /// `started` once the child has been started or could not be, then waits for it.
    private func launch(_ started: @escaping @Sendable (Result<Void, ChildProcessError>) -> Void) throws {
        var childEnds: [FileHandle] = []
        var nullDescriptors: [Int32] = []
        var descriptors: [Int32] = []
        for (stream, childReads) in [(standardInput, true), (standardOutput, false), (standardError, false)] {
            switch stream {
            case .inherit: descriptors.append(-1)
            case .null:
                let descriptor = open("/dev/null", (childReads ? O_RDONLY : O_WRONLY) | O_CLOEXEC)
                guard descriptor >= 0 else {
                    let reason = String(cString: strerror(errno))
                    for descriptor in nullDescriptors { close(descriptor) }
                    throw ChildProcessError(message: "Could not start \(executableURL.path): /dev/null: \(reason).")
                }
                nullDescriptors.append(descriptor)
                descriptors.append(descriptor)
            case .pipe(let pipe):
                let childEnd = childReads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                descriptors.append(childEnd.fileDescriptor)
                childEnds.append(childEnd)
            case .handle(let handle):
                descriptors.append(handle.fileDescriptor)
            }
        }
        let argv = [executableURL.path] + arguments
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let path = executableURL.path
        let streams = descriptors
        let diesWithParent = diesWithParent
        let childEndsToClose = childEnds
        let nullsToClose = nullDescriptors
        Thread.detachNewThread { [self] in
            var pid: pid_t = 0
            let result = withCStrings(argv) { cArguments in
                withCStrings(envp) { cEnvironment in
                    sesame_spawn(
                        &pid, path, cArguments, cEnvironment, streams[0], streams[1], streams[2],
                        diesWithParent ? 1 : 0)
                }
            }
            // The child has its copies; the parent keeps only its own ends of the pipes (closed
            // through the handle, so that it does not close the number again when it goes away).
            for descriptor in nullsToClose { close(descriptor) }
            for handle in childEndsToClose { try? handle.close() }
            if result == 0 { state.withLock { $0.pid = pid } }
            started(
                result == 0
                    ? .success(())
                    : .failure(
                        ChildProcessError(message: "Could not start \(path): \(String(cString: strerror(result))).")))
            if result == 0 { reap(pid) }
        }
    }

    /// Waits for the child on the thread that started it, then hands its status to the waiters.
    ///
    /// The child is first waited for without being reaped (`WNOWAIT`), and marked as exited
    /// under the lock that ``terminate(signal:)`` holds while it signals; only then is it
    /// reaped. So a signal can reach the child or its zombie, never another process that was
    /// given the same pid after it.
    private func reap(_ child: pid_t) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        state.withLock { $0.exited = true }
        var raw: Int32 = 0
        while waitpid(child, &raw, 0) < 0 && errno == EINTR {}
        let status = Self.exitStatus(raw)
        let waiters = state.withLock { state in
            state.status = status
            defer { state.waiters = [] }
            return state.waiters
        }
        exited.signal()
        for waiter in waiters { waiter.resume(returning: status) }
        terminationHandler?(status)
    }

    /// Blocks the calling thread until the child has exited; returns its status. Call it off
    /// the cooperative pool, or use ``exitStatus()``.
    @discardableResult package func waitUntilExit() -> Int32 {
        if let status = terminationStatus { return status }
        exited.wait()
        exited.signal()  // let any other waiter through too
        return terminationStatus ?? -1
    }

    /// Suspends until the child has exited; returns its status.
    package func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let done: Int32? = state.withLock { state in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Sends `signal` (default SIGTERM) to a running child.
    ///
    /// The signal is sent under the lock the reaper takes before it reaps the child, so it never
    /// reaches a process that was later given the same pid.
    package func terminate(signal: Int32 = SIGTERM) {
        state.withLock { state in
            guard !state.exited, let pid = state.pid else { return }
            kill(pid, signal)
        }
    }

    private static func exitStatus(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }
}

/// A child process that could not be started.
package struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    package var message: String
    package var description: String { message }
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { for pointer in pointers { free(pointer) } }
    return body(pointers)
}

internal import CSesameSystem
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with `posix_spawn`, with the small part of `Foundation.Process`'s
/// interface this package uses.
///
/// swift-corelibs-foundation's `Process.run()` (Swift 6.3) crashes intermittently on Linux:
/// while listing `/proc/self/fd` it copies a whole 256-byte `d_name` from each `readdir` record
/// and can read past the end of glibc's buffer (swift-corelibs-foundation#5472). Sesame starts
/// `xdg-open`, `dbus-send` and, in its tests, its own executables, often from many threads at
/// once, so it spawns children itself: descriptors 3 and up are closed in the child with
/// `posix_spawn_file_actions_addclosefrom_np`, and one thread per child reaps it with `waitpid`.
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
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Mutex(State())
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

    /// Describes a child; nothing starts until ``run()``.
    ///
    /// - Parameter terminationHandler: called on the reaper thread with the exit status.
    package init(
        executableURL: URL, arguments: [String] = [], environment: [String: String]? = nil,
        standardInput: Stream = .inherit, standardOutput: Stream = .inherit, standardError: Stream = .inherit,
        terminationHandler: (@Sendable (Int32) -> Void)? = nil
    ) {
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

    /// Starts the child.
    ///
    /// - Throws: ``ChildProcessError`` naming the program and the reason.
    package func run() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var childEndsToClose: [FileHandle] = []
        for (stream, target, childReads) in [
            (standardInput, Int32(0), true), (standardOutput, Int32(1), false), (standardError, Int32(2), false),
        ] {
            switch stream {
            case .inherit: break
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", childReads ? O_RDONLY : O_WRONLY, 0)
            case .pipe(let pipe):
                let childEnd = childReads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, childEnd.fileDescriptor, target)
                childEndsToClose.append(childEnd)
            case .handle(let handle):
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target)
            }
        }
        // Nothing else of this process leaks into the child: no sockets, no other children's pipes.
        _ = sesame_spawn_file_actions_addclosefrom(&actions, 3)

        let argv = [executableURL.path] + arguments
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // A clean signal state: nothing blocked (threads of this process may block SIGTERM), and
        // the default action for signals this process ignores (such as SIGPIPE).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = withCStrings(argv) { cArguments in
            withCStrings(envp) { cEnvironment in
                posix_spawn(&pid, executableURL.path, &actions, &attributes, cArguments, cEnvironment)
            }
        }
        guard result == 0 else {
            throw ChildProcessError(
                message: "Could not start \(executableURL.path): \(String(cString: strerror(result))).")
        }
        // The child has its copies; the parent keeps only its own ends of the pipes (closed
        // through the handle, so that it does not close the number again when it goes away).
        for handle in childEndsToClose { try? handle.close() }
        let child = pid
        state.withLock { $0.pid = child }
        let handler = terminationHandler
        Thread.detachNewThread { [self] in
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
            handler?(status)
        }
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
    package func terminate(signal: Int32 = SIGTERM) {
        let pid: pid_t? = state.withLock { $0.status == nil ? $0.pid : nil }
        if let pid { kill(pid, signal) }
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

import Foundation
import Sesame
import SesameCurl

#if canImport(Glibc)
    import Glibc
#endif

/// The time limits of `sesame doctor`: no probe waits longer than ``perProbe``, and the whole
/// command finishes within ``overall``, whatever the bus, the keyring or the network do.
enum DoctorLimits {
    /// The longest any one probe may take.
    static let perProbe: Duration = .seconds(3)
    /// The longest the whole command may take.
    static let overall: Duration = .seconds(10)
}

/// Runs `work` and returns its result, or `nil` when it has not finished within `limit`.
///
/// The work is not waited for after the limit: a call blocked in C (a D-Bus handshake that never
/// completes) cannot be cancelled, so it is left behind, and the process exits without it.
func withTimeLimit<T: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async -> T) async -> T? {
    await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        let once = ResumeOnce(continuation)
        let worker = Task { once.resume(returning: await work()) }
        Task {
            try? await Task.sleep(for: limit)
            once.resume(returning: nil)
            worker.cancel()
        }
    }
}

/// A continuation resumed by whichever comes first; later resumes are ignored.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<T?, Never>?>

    init(_ continuation: CheckedContinuation<T?, Never>) { self.continuation = Locked(continuation) }

    func resume(returning value: T?) {
        let pending = continuation.withLock { state -> CheckedContinuation<T?, Never>? in
            defer { state = nil }
            return state
        }
        pending?.resume(returning: value)
    }
}

/// What a probe found out.
enum ProbeAnswer<Value: Sendable>: Sendable {
    /// It answered.
    case answer(Value)
    /// It did not answer within the limit (a bus that accepts connections and stays silent).
    case noAnswer
    /// It could not ask (the tool is missing, or the call failed).
    case failed
}

/// Asks the session bus with `dbus-send`: `NameHasOwner` tells whether a Secret Service is
/// running without starting one, and the collection's `Locked` property without unlocking it.
///
/// Every call is bounded: `dbus-send --reply-timeout` does not cover the connection handshake,
/// so a bus that accepts the connection and never answers would hold it forever. The child is
/// killed once the limit has passed.
enum DBusProbe {
    /// Runs `dbus-send` and returns its reply, waiting for it on a thread of its own; kills it
    /// after `limit`, or at once when the task is cancelled.
    static func dbusSend(
        _ arguments: [String], environment: [String: String], limit: Duration = DoctorLimits.perProbe
    ) async -> ProbeAnswer<String> {
        let milliseconds = max(
            100, Int(limit.components.seconds * 1000 + limit.components.attoseconds / 1_000_000_000_000_000))
        let output = Pipe()
        var environment = environment
        environment["LANG"] = "C.UTF-8"
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: "/usr/bin/env"),
            arguments: ["dbus-send", "--session", "--print-reply", "--reply-timeout=\(milliseconds)"] + arguments,
            environment: environment, standardInput: .null, standardOutput: .pipe(output), standardError: .null)
        guard (try? await process.start()) != nil else { return .failed }
        let killed = Locked(false)
        let timer = Task {
            guard (try? await Task.sleep(for: .milliseconds(milliseconds))) != nil, process.isRunning else { return }
            killed.withLock { $0 = true }
            process.terminate(signal: SIGKILL)
        }
        let reading = output.fileHandleForReading
        let (data, status) = await onOwnThread {
            (reading.readDataToEndOfFile(), process.waitUntilExit())
        } onCancel: {
            process.terminate(signal: SIGKILL)
        }
        timer.cancel()
        if killed.withLock({ $0 }) { return .noAnswer }
        return status == 0 ? .answer(String(decoding: data, as: UTF8.self)) : .failed
    }

    /// Whether `name` has an owner on the session bus.
    static func nameHasOwner(_ name: String, environment: [String: String]) async -> ProbeAnswer<Bool> {
        let reply = await dbusSend(
            [
                "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                "string:\(name)",
            ], environment: environment)
        switch reply {
        case .answer(let text): return .answer(text.contains("boolean true"))
        case .noAnswer: return .noAnswer
        case .failed: return .failed
        }
    }
}

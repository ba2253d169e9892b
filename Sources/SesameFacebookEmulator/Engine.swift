import Foundation
import Sesame
import SesameEmulator

/// The Facebook emulator's engine: maps a request value to a response value.
///
/// Concurrent clients see one consistent Facebook: the state (``FacebookState``) lives in a
/// `Locked`, and a request's handling runs in its closure start to finish without
/// suspending, so it is atomic. Most requests take the write lock. The reads every session makes
/// (`GET /me`, `GET /me/permissions`; ``FacebookState/readsOnly(_:)``) take the read lock when no
/// scenario is active, so the server's threads answer them side by side: on one lock taken in
/// turn, two threads answering `GET /me` under load waited for each other on about every other
/// request, and served fewer requests than one thread.
///
/// The work that needs no state happens outside the lock: the request's path, body, form, token
/// and `batch` parameter are read before it is taken; a Graph answer is finished (its version
/// header, `suppress_http_code`) and its JSON encoded after it is released, so a large request or
/// answer delays only its own client. The `slow` scenario's delay and the state file's write are
/// outside it too. A lock rather than an actor: handling takes microseconds, and an actor hop per
/// request halved the throughput under load.
package final class EmulatorEngine: Sendable {
    let configuration: EmulatorConfiguration
    let writer: StateWriter?
    private let state: Locked<FacebookState>

    /// Creates an engine, reading the state file when there is one, and applies it.
    ///
    /// - Throws: `EmulatorError` for a bad configuration or a state file that cannot be used.
    package init(configuration: EmulatorConfiguration) throws {
        self.configuration = configuration
        writer = configuration.stateFileURL.map { StateWriter(url: $0) }
        let initial = try FacebookState(configuration: configuration)
        // The configured people and scenarios are saved as any other change.
        let save = initial.takeSaveRequest()
        state = Locked(initial)
        if save { scheduleSave() }
    }

    package func setBaseURL(_ url: URL) { locked { $0.baseURL = url } }

    /// Runs `body` with the state under the write lock, and schedules a save when it changed the
    /// state.
    func locked<T: Sendable, E: Error>(_ body: (FacebookState) throws(E) -> T) throws(E) -> T {
        let (result, save) = try state.withLock { state throws(E) -> (T, Bool) in
            let result = try body(state)
            return (result, state.takeSaveRequest())
        }
        if save { scheduleSave() }
        return result
    }

    /// Runs `body` under the lock, turning its Graph errors into `EmulatorError`.
    func run<T: Sendable>(_ body: (FacebookState) throws -> T) throws -> T {
        try locked { state in
            do {
                return try body(state)
            } catch let error as GraphError {
                throw EmulatorError(message: error.message)
            }
        }
    }

    /// Answers one request.
    package func handle(_ request: EmulatorRequest) -> EmulatorOutcome {
        // Parsed before the lock: a large body or batch then delays only its own client.
        let request = request.parsed(maxPathBytes: configuration.limits.maxPathBytes)
        // A read every session makes is answered under the read lock, beside others, unless a
        // scenario (which the call might use up) is active.
        let shared =
            FacebookState.readsOnly(request)
            ? state.withReadLock { state in state.scenarios.isEmpty ? state.handle(request) : nil } : nil
        var pending = shared ?? locked { $0.handle(request) }
        // Finished and encoded after it, for the same reason.
        if let versionPrefix = pending.graphVersionPrefix {
            FacebookState.finish(
                &pending, request, versionPrefix: versionPrefix, graphVersion: configuration.graphVersion)
        }
        let outcome = EmulatorOutcome(response: pending.reply?.response, delay: pending.delay)
        // Outside the lock: the log is the caller's code.
        if let log = configuration.requestLog {
            let status = outcome.response.map { String($0.status) } ?? "dropped"
            log(
                "\(Self.loggable(request.method.rawValue)) \(Self.loggable(String(request.path.prefix(200)))) \(status)"
            )
        }
        return outcome
    }

    /// `text` safe to print on one terminal line: control characters (a decoded `%0a` would
    /// start a forged log line, `%1b` a terminal escape), `\` and the Unicode line and format
    /// controls are written as `\xNN` or `\u{NNNN}`.
    static func loggable(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x5C: output += "\\\\"
            case 0..<0x20, 0x7F:
                let digits = Array("0123456789abcdef")
                output += "\\x\(digits[Int(scalar.value >> 4)])\(digits[Int(scalar.value & 0xF)])"
            case 0x80...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0xFEFF:
                output += "\\u{\(String(scalar.value, radix: 16))}"
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        return output
    }

    // MARK: - Persistence

    /// Saves shortly after a change, once for a burst of changes.
    private func scheduleSave() {
        Task {
            try? await Task.sleep(for: .milliseconds(50))
            await self.saveNow()
        }
    }

    /// Writes the state file now (on the writer's own queue) and waits for it, and for any write
    /// queued before it: when this returns, the file holds everything done so far (what
    /// `Emulator.stop()` relies on before a process exits).
    package func saveNow() async {
        guard let writer else { return }
        let failure: (any Error)? = await withCheckedContinuation { continuation in
            state.withLock { state in
                state.saveScheduled = false
                guard state.isDirty else {
                    // Nothing new, but a scheduled save may still be writing: wait for it.
                    writer.afterQueuedWrites { continuation.resume(returning: nil) }
                    return
                }
                state.isDirty = false
                // Queued under the lock, so snapshots reach the file in the order they were taken.
                writer.enqueue(state.snapshot()) { error in continuation.resume(returning: error) }
            }
        }
        if let failure {
            state.withLock { $0.isDirty = true }
            configuration.requestLog?("emulator: could not save its state: \(failure)")
        }
    }
}

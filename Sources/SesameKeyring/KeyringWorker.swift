internal import CLibSecret
import Dispatch
import Sesame
import Synchronization

/// Runs blocking libsecret calls on a dedicated serial queue, off Swift's cooperative pool, each
/// bounded by a deadline.
///
/// A call gets a ``Cancellation`` (a `GCancellable`) to pass to libsecret. When the deadline
/// passes, the caller is resumed at once with the timeout error and the `GCancellable` is
/// cancelled; libsecret then gives up on its own. If the blocked call still does not return
/// (a C call that ignores cancellation), the caller has already been answered, and the worker
/// moves later calls to a fresh queue so they do not wait behind it. Cancelling the calling
/// task cancels the call in the same way, with `CancellationError`.
final class KeyringWorker: Sendable {
    /// The worker every ``SecretServiceStore`` uses by default: libsecret and the D-Bus
    /// connection are process-wide, so there is one queue for the process.
    static let shared = KeyringWorker(label: "org.sesame.keyring")

    private let label: String
    private let queue: Locked<(queue: DispatchQueue, generation: Int)>

    /// Creates a worker whose queues are named after `label`.
    init(label: String) {
        self.label = label
        queue = Locked((Self.makeQueue("\(label).0"), 0))
    }

    private static let queueLabelKey = DispatchSpecificKey<String>()

    /// The label of the worker queue the caller runs on, or nil when it runs elsewhere.
    static var currentQueueLabel: String? { DispatchQueue.getSpecific(key: queueLabelKey) }

    private static func makeQueue(_ label: String) -> DispatchQueue {
        let queue = DispatchQueue(label: label, qos: .userInitiated)
        queue.setSpecific(key: queueLabelKey, value: label)
        return queue
    }

    /// How many times calls that never returned made the worker start a fresh queue.
    var abandonedQueues: Int { queue.withLock { $0.generation } }

    /// Runs `body` on the worker's queue and returns its result, or throws `timeoutError(stage)`
    /// when `timeout` passes first, with the stage the body had reached.
    func run<T: Sendable>(
        timeout: Duration,
        timeoutError: @escaping @Sendable (KeyringStage) -> CredentialStoreError,
        _ body: @escaping @Sendable (Cancellation) throws -> T
    ) async throws -> T {
        let cancellation = Cancellation()
        let call = PendingCall<T>()
        let (queue, generation) = self.queue.withLock { ($0.queue, $0.generation) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                call.install(continuation)
                // The deadline. When it comes after the call has finished, as it usually does,
                // it does nothing.
                DispatchQueue.global(qos: .userInitiated).asyncAfter(deadline: .now() + Self.dispatchInterval(timeout))
                {
                    [weak self] in
                    let outcome = Result<T, any Error>.failure(timeoutError(cancellation.stage))
                    let (claimed, waiting) = call.claim(outcome)
                    guard claimed else { return }
                    cancellation.cancel()
                    // Later calls must not queue behind a call that may never return; the
                    // queue is replaced before the caller hears of the timeout.
                    if call.isRunning { self?.abandon(generation: generation) }
                    waiting?.resume(with: outcome)
                }
                queue.async {
                    // A call whose caller has already been answered (it timed out behind a
                    // stuck one, or was cancelled) is not started.
                    guard call.start() else { return }
                    let result = Result { try body(cancellation) }
                    call.bodyReturned()
                    call.finish(result)
                }
            }
        } onCancel: {
            if call.finish(.failure(CancellationError())) { cancellation.cancel() }
        }
    }

    /// Starts a fresh queue if the one of `generation` is still the current one.
    private func abandon(generation: Int) {
        queue.withLock { current in
            guard current.generation == generation else { return }
            current.generation += 1
            current.queue = Self.makeQueue("\(label).\(current.generation)")
        }
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !nanoseconds.overflow, seconds >= 0 else { return seconds < 0 ? .nanoseconds(0) : .never }
        let total = nanoseconds.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000)
        return total.overflow ? .never : .nanoseconds(Int(clamping: total.partialValue))
    }
}

/// One call's state: who is waiting, whether it has started, and its outcome. The first
/// outcome wins (the result, the timeout or the cancellation); later ones are dropped.
private final class PendingCall<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var outcome: Result<T, any Error>?
        var started = false
        var returned = false
    }

    private let state = Locked(State())

    /// Whether the body has started and not returned.
    var isRunning: Bool { state.withLock { $0.started && !$0.returned } }

    func install(_ continuation: CheckedContinuation<T, any Error>) {
        let outcome: Result<T, any Error>? = state.withLock { state in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let outcome { continuation.resume(with: outcome) }
    }

    /// Marks the body as started; false when the caller has already been answered.
    func start() -> Bool {
        state.withLock { state in
            guard state.outcome == nil else { return false }
            state.started = true
            return true
        }
    }

    /// Marks the body as returned.
    func bodyReturned() { state.withLock { $0.returned = true } }

    /// Records `outcome` unless an outcome was recorded before. Returns whether it was
    /// recorded, and the caller waiting for it, who must then be resumed with it.
    func claim(_ outcome: Result<T, any Error>) -> (claimed: Bool, waiting: CheckedContinuation<T, any Error>?) {
        state.withLock { state in
            guard state.outcome == nil else { return (false, nil) }
            state.outcome = outcome
            let waiting = state.continuation
            state.continuation = nil
            return (true, waiting)
        }
    }

    /// Records `outcome` and resumes the caller, unless an outcome was recorded before.
    /// Returns whether this outcome was the one delivered.
    @discardableResult func finish(_ outcome: Result<T, any Error>) -> Bool {
        let (claimed, waiting) = claim(outcome)
        waiting?.resume(with: outcome)
        return claimed
    }
}

/// A `GCancellable` owned by Swift.
///
/// `@unchecked Sendable`: GLib guards a `GCancellable` with its own mutex, and
/// `g_cancellable_cancel` and `g_cancellable_is_cancelled` are documented as callable from any
/// thread; the pointer itself never changes, and the stage is an `Atomic`.
final class Cancellation: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>
    private let currentStage = Atomic<UInt8>(KeyringStage.bus.rawValue)

    /// How far the call has got; read when it times out.
    var stage: KeyringStage {
        get { KeyringStage(rawValue: currentStage.load(ordering: .relaxed)) ?? .call }
        set { currentStage.store(newValue.rawValue, ordering: .relaxed) }
    }

    init() { pointer = g_cancellable_new() }

    deinit { g_object_unref(pointer) }

    /// Cancels the libsecret call that holds this cancellation, if any.
    func cancel() { g_cancellable_cancel(pointer) }

    /// Whether ``cancel()`` was called.
    var isCancelled: Bool { g_cancellable_is_cancelled(pointer) != 0 }
}

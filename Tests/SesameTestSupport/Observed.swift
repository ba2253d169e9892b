// Shared by the tests that wait for something another thread or task does (a request seen, a
// line printed, a handler entered): they wait for the change itself instead of polling for it.

import Dispatch
import Sesame

/// A value that tests wait on: every change wakes the tasks waiting for a condition on it.
///
/// ```swift
/// let seen = Observed(0)
/// server.onRequest = { seen.change { $0 += 1 } }
/// #expect(await seen.wait { $0 >= 2 })
/// ```
public final class Observed<Value: Sendable>: Sendable {
    private struct State {
        var value: Value
        /// Bumped by every change, so that a waiter can tell a change it has not seen yet.
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state: Locked<State>

    /// Starts with `value`.
    public init(_ value: Value) { state = Locked(State(value: value)) }

    /// The value now.
    public var value: Value { state.withLock { $0.value } }

    /// Changes the value and wakes every waiter, which checks its condition again.
    @discardableResult
    public func change<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        let (result, waiters) = try state.withLock { state in
            let result = try body(&state.value)
            state.generation &+= 1
            defer { state.waiters = [:] }
            return (result, Array(state.waiters.values))
        }
        for waiter in waiters { waiter.resume() }
        return result
    }

    /// Waits until `condition` holds for the value, checking it at once and after each change;
    /// returns whether it holds. Gives up (false) when the task is cancelled or `limit` has
    /// passed: the limit only turns a hang into a failure, it does not time anything.
    public func wait(limit: Duration = .seconds(120), until condition: (Value) -> Bool) async -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(limit / .nanoseconds(1)))
        while true {
            let (holds, generation) = state.withLock { (condition($0.value), $0.generation) }
            if holds { return true }
            if Task.isCancelled || DispatchTime.now() >= deadline { return false }
            await nextChange(after: generation, deadline: deadline)
        }
    }

    /// Returns after the first change past `generation`, at `deadline`, or on cancellation,
    /// whichever comes first.
    private func nextChange(after generation: UInt64, deadline: DispatchTime) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let changed = state.withLock { state in
                    if state.generation != generation { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if changed { return continuation.resume() }
                DispatchQueue.global().asyncAfter(deadline: deadline) { [weak self] in self?.release(id) }
                if Task.isCancelled { release(id) }
            }
        } onCancel: {
            release(id)
        }
    }

    /// Wakes waiter `id`, if it still waits.
    private func release(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}

import Sesame

/// A clock that moves only when told to, so code that waits (back-off, polling, timeouts)
/// can be tested without sleeping.
///
/// Two modes:
/// - manual (the default): `sleep` suspends until ``advance(by:)`` moves time past its deadline;
///   ``waitForSleepers(_:limit:)`` lets a test wait until the code under test is asleep.
/// - auto-advancing (`ManualClock(autoAdvance: true)`): every `sleep` returns at once and moves
///   time to its deadline. ``sleeps`` records each requested duration, in order.
public final class ManualClock: Clock, Sendable {
    /// A point on a ``ManualClock``: the time elapsed since it was created.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock's start.
        public var offset: Duration
        /// Creates an instant.
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var sleeps: [Duration] = []
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())
    private let autoAdvance: Bool

    /// Creates a clock at offset zero.
    ///
    /// - Parameter autoAdvance: when true, sleeps return at once and move time forward.
    public init(autoAdvance: Bool = false) { self.autoAdvance = autoAdvance }

    /// The current instant.
    public var now: Instant { state.withLock { $0.now } }

    /// No resolution limit.
    public var minimumResolution: Duration { .zero }

    /// Every duration slept so far, in order (measured from the time of each call).
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// How many tasks are asleep on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Time elapsed since the clock was created.
    public var elapsed: Duration { now.offset }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        if autoAdvance {
            state.withLock { state in
                state.sleeps.append(state.now.duration(to: deadline))
                if deadline > state.now { state.now = deadline }
            }
            await Task.yield()
            try Task.checkCancellation()
            return
        }
        let id: UInt64 = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = state.withLock { state in
                    state.sleeps.append(state.now.duration(to: deadline))
                    if deadline <= state.now { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let sleeper: Sleeper? = state.withLock { state in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let due: [Sleeper] = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Suspends until at least `count` tasks are asleep on this clock, or `limit` has passed on
    /// the real clock (so that a test whose code under test ended early fails on its own
    /// expectations instead of spinning forever); returns whether they are.
    @discardableResult
    public func waitForSleepers(_ count: Int = 1, limit: Duration = .seconds(120)) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while sleeperCount < count {
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            // A short real pause rather than Task.yield(): a spin would take a core from the
            // very tasks it waits for on a two-core machine.
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }
}

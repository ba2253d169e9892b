// Shared by the tests that hold one party at a chosen point (a hook, a save) while another
// party runs, and then let it go.

import Sesame

/// A gate that is shut until ``open()``: ``wait()`` suspends until then, and returns at once
/// afterwards. ``waitingCount`` lets a test see that a party has reached the gate.
public final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    /// A shut gate.
    public init() {}

    /// Parties waiting at the gate now.
    public var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Waits until the gate is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let goOn = state.withLock { state in
                if state.isOpen { return true }
                state.waiting.append(continuation)
                return false
            }
            if goOn { continuation.resume() }
        }
    }

    /// Opens the gate: every waiting party goes on, and later ones do not stop.
    public func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

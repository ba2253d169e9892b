// Reproduces the ThreadSanitizer report that scripts/sanitizers/tsan.supp suppresses, with
// nothing of Sesame's: a continuation resumed on another thread while the awaiting task is
// between its closure and its await. Every hand-over below goes through an atomic, as
// CurlTransfer's does, and the runtime orders the rest; TSan still reports a race between
// UnsafeContinuation.resume and withUnsafeThrowingContinuation's resume partial function.
//
//   swiftc -sanitize=thread scripts/sanitizers/continuation-fast-path.swift -o /tmp/fast-path
//   /tmp/fast-path                                        # reports, usually within a second
//   TSAN_OPTIONS=suppressions=$PWD/scripts/sanitizers/tsan.supp /tmp/fast-path   # none
import Dispatch
import Synchronization

final class Parked: @unchecked Sendable {  // `continuation` is ordered by `state`
    let state = Atomic<Int>(0)
    var continuation: UnsafeContinuation<Void, any Error>?
}

struct Refused: Error {}

let resumer = DispatchQueue(label: "resumer")
for round in 0..<20_000 {
    let parked = Parked()
    try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        parked.continuation = continuation
        parked.state.store(1, ordering: .releasing)
        resumer.async {
            guard parked.state.load(ordering: .acquiring) == 1, let continuation = parked.continuation else { return }
            if round.isMultiple(of: 2) { continuation.resume(throwing: Refused()) } else { continuation.resume() }
        }
        // Widen the window between this closure's return and the task's await.
        for _ in 0..<Int.random(in: 0..<2_000) { _ = parked.state.load(ordering: .relaxed) }
    }
}
print("20000 continuations resumed")

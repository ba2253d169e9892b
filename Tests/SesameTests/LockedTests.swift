import Foundation
import Sesame
import Synchronization
import Testing

/// State a test keeps outside any lock's value, guarded by a plain `Locked<Void>` the way
/// `CurlEngine` and `FileCredentialStore` guard theirs.
private final class Tally: @unchecked Sendable {  // @unchecked Sendable: guarded by the test's `Locked<Void>`
    var count = 0
}

private struct Refused: Error, Equatable {}

// Under `scripts/sanitize thread` these are also the check that ThreadSanitizer sees the lock:
// a contended `Locked<Void>` once drew a false race report on every hand-over (the empty value's
// address was the object's own start), and `Synchronization.Mutex` on every contended lock.
@Suite("Locked: Sesame's lock for small synchronous state")
struct LockedTests {
    static let threads = 4
    static let rounds = 20_000

    /// Runs `body(thread)` on `threads` threads of their own, released together so that they
    /// contend, and returns once every one has returned.
    static func onThreads(_ body: @escaping @Sendable (Int) -> Void) {
        let ready = Atomic<Int>(0)
        let done = Atomic<Int>(0)
        for thread in 0..<threads {
            Thread {
                ready.add(1, ordering: .sequentiallyConsistent)
                while ready.load(ordering: .sequentiallyConsistent) < threads {}
                body(thread)
                done.add(1, ordering: .sequentiallyConsistent)
            }.start()
        }
        while done.load(ordering: .sequentiallyConsistent) < threads { sched_yield() }
    }

    @Test("a plain lock (no value) taken from many threads at once lets one section in at a time")
    func plainLockUnderContention() {
        let lock = Locked(())
        let tally = Tally()
        Self.onThreads { _ in
            for _ in 0..<Self.rounds { lock.withLock { _ in tally.count += 1 } }
        }
        #expect(lock.withLock { _ in tally.count } == Self.threads * Self.rounds)
    }

    @Test("a value changed from many threads at once keeps every change")
    func valueUnderContention() {
        let lock = Locked<[Int: Int]>([:])
        Self.onThreads { thread in
            for round in 0..<Self.rounds { lock.withLock { $0[thread, default: 0] += round % 2 + 1 } }
        }
        let perThread = Self.rounds / 2 * 3
        #expect(lock.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<Self.threads).map { ($0, perThread) }))
    }

    @Test("withLockIfAvailable runs its body when the lock is free, and returns nil at once while it is held")
    func ifAvailable() {
        let lock = Locked(1)
        let incremented = lock.withLockIfAvailable { value in
            value += 1
            return value
        }
        #expect(incremented == 2)
        let ranWhileHeld: Bool? = lock.withLock { _ in lock.withLockIfAvailable { _ in true } }
        #expect(ranWhileHeld == nil)
        #expect(lock.withLock { $0 } == 2)
    }

    @Test("an error thrown in the body comes out typed, and the lock is released")
    func typedThrows() {
        let lock = Locked(0)
        #expect(throws: Refused.self) {
            try lock.withLock { (value) throws(Refused) in
                value = 5
                throw Refused()
            }
        }
        #expect(lock.withLockIfAvailable { $0 } == 5)
    }
}

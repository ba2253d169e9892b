import Dispatch
import Foundation

/// Runs tasks that prefer it on threads of their own, not on Swift's cooperative pool.
///
/// A lone caller of `CurlTransport` waits for its answer inline, holding the thread it runs on
/// for up to its inline budget. The tests of that path use budgets of seconds, so that a loaded
/// machine cannot switch the path off; run on the cooperative pool (one thread per CPU, two on
/// the CI machine), such a wait would hold half of it, and the servers that tests running
/// meanwhile await would starve. Sending through ``send(_:_:)`` keeps those waits off the pool.
final class BlockingWaitExecutor: TaskExecutor {
    /// One for all the tests: a concurrent queue, which gets a thread per job that blocks.
    static let shared = BlockingWaitExecutor()

    private let queue = DispatchQueue(label: "sesame.tests.inline-waits", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Runs `body` (and the child tasks it starts) on this executor's threads.
    static func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(shared) { try await body() }
    }
}

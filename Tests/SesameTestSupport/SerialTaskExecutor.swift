import Foundation

/// A task executor with one thread that runs its jobs strictly in the order they were enqueued,
/// so that a test can tell, without timing anything, whether work suspended or blocked its
/// thread: a task enqueued behind one that blocks runs only once that one has finished; behind
/// one that suspends, it runs at once.
///
/// ```swift
/// let executor = SerialTaskExecutor()
/// defer { executor.shutdown() }
/// let first = Task(executorPreference: executor) { await work() }
/// let second = Task(executorPreference: executor) { /* runs when `first` suspends or ends */ }
/// ```
public final class SerialTaskExecutor: TaskExecutor, @unchecked Sendable {
    // `jobs` and `stopped` are only touched with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    /// Starts the executor's thread.
    public init() {
        let thread = Thread { [self] in run() }
        thread.name = "sesame-test-serial-executor"
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs enqueued so far have run.
    public func shutdown() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

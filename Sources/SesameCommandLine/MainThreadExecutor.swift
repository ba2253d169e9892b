import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Runs one command's async work on the thread that calls ``run(_:)`` (the process's main
/// thread), and returns its result there.
///
/// `sesame` is a short-lived process: what it awaits is mostly a keyring or network call made on
/// a thread of its own. An `async` top-level `main` would start Swift's cooperative pool (a thread
/// for each core) to run the command's few steps, hand every step between those threads and the
/// threads that answer, and end on one more thread that `dispatch_main` starts for the main
/// queue. Started here instead, the command's task prefers this executor (SE-0417): its steps,
/// its child tasks and the actors it calls (default actors follow the task's preference) run on
/// the calling thread, which sleeps on a condition variable while nothing is ready. What it buys
/// (`sesame-bench cli --baseline`, three runs): `sesame token` 15–21% faster, `status` 12–13%.
///
/// Work that opts out still runs: an unstructured `Task {}` or `Task.detached` goes to the global
/// pool as usual, and resumes whoever awaits it here. Nothing may wait for the main actor, which
/// this executor does not drain (Sesame has no `@MainActor` code).
final class MainThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs` is read and written only while `mutex` is held.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: [UnownedJob] = []
    private var finished = false

    private init() {
        mutex.initialize(to: pthread_mutex_t())
        ready.initialize(to: pthread_cond_t())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(ready, nil)
    }

    deinit {
        pthread_cond_destroy(ready)
        pthread_mutex_destroy(mutex)
        ready.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` to completion on the calling thread, with the calling thread as its task's
    /// preferred executor, and returns what it returns.
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let executor = MainThreadExecutor()
        let result = Locked<T?>(nil)
        Task(executorPreference: executor) {
            let value = await body()
            result.withLock { $0 = value }
            executor.finish()
        }
        executor.drain()
        // `drain()` returns only after `finish()`, which comes after the value was set.
        return result.withLock { $0 }!
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        jobs.append(job)
        pthread_cond_signal(ready)
        pthread_mutex_unlock(mutex)
    }

    /// Runs jobs as they come until the command's task has finished and none is left.
    private func drain() {
        let unowned = asUnownedTaskExecutor()
        while true {
            pthread_mutex_lock(mutex)
            while jobs.isEmpty && !finished { pthread_cond_wait(ready, mutex) }
            if jobs.isEmpty {
                pthread_mutex_unlock(mutex)
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            pthread_mutex_unlock(mutex)
            for job in batch { job.runSynchronously(on: unowned) }
        }
    }

    private func finish() {
        pthread_mutex_lock(mutex)
        finished = true
        pthread_cond_signal(ready)
        pthread_mutex_unlock(mutex)
    }
}

import Dispatch
import Foundation
import Synchronization

// MARK: The engine thread as a task executor

extension CurlEngine: TaskExecutor {
    /// Queues `job` to run on the engine thread, between its rounds of libcurl work; see
    /// ``CurlTransport/executor``. Once the thread has stopped, jobs run on Dispatch's global
    /// queue instead, so that no task waits for a thread that is gone.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        guard !stopped.load(ordering: .acquiring) else {
            runElsewhere([job])
            return
        }
        jobs.withLock { $0.append(job) }
        jobCount.add(1, ordering: .sequentiallyConsistent)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        // The engine thread queues its own callers' jobs as it resumes them, and runs them before
        // it next waits: no wake-up. Another thread wakes it if it is asleep (the fences pair
        // with the ones in `run`).
        if !isEngineThread && !engineBusy.load(ordering: .sequentiallyConsistent) { wakeEngine() }
        // The thread stopped meanwhile: run what it left, here (`tearDown` stores `stopped`
        // before its own look, so one of the two finds the job).
        if stopped.load(ordering: .sequentiallyConsistent) { runElsewhere(takeJobs()) }
    }

    /// Whether the calling thread is the engine thread.
    var isEngineThread: Bool { engineThreadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Takes every queued job.
    func takeJobs() -> [UnownedJob] {
        let taken = jobs.withLock { jobs in
            defer { jobs.removeAll(keepingCapacity: true) }
            return jobs
        }
        if !taken.isEmpty { jobCount.subtract(taken.count, ordering: .sequentiallyConsistent) }
        return taken
    }

    /// Engine thread: runs the jobs queued so far (not those they queue: the sockets come
    /// first), and starts the transfers they left.
    func runJobs() {
        guard jobCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let executor = asUnownedTaskExecutor()
        for job in takeJobs() { job.runSynchronously(on: executor) }
        startDelegated()
    }

    /// Runs `jobs` on Dispatch's global queue, as this executor: after the engine thread stopped.
    func runElsewhere(_ jobs: [UnownedJob]) {
        guard !jobs.isEmpty else { return }
        let executor = asUnownedTaskExecutor()
        for job in jobs { DispatchQueue.global().async { job.runSynchronously(on: executor) } }
    }
}

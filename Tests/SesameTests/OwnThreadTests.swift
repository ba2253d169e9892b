import Dispatch
import Foundation
import Testing

@testable import Sesame

/// `onOwnThread` hands its result over: once the awaiting task has it, the thread holds no copy.
/// A `sesame` program that exited right after reading standard input had LeakSanitizer report
/// the `Data` the reader thread still held.
@Suite("onOwnThread hands its result over")
struct OwnThreadTests {
    /// Runs a job at once on the thread that enqueues it when that is the thread `onOwnThread`
    /// started (so the awaiting task goes on inside the thread's `resume`, before the thread
    /// returns from it), and on a queue otherwise.
    final class ResumingThreadExecutor: TaskExecutor {
        let workThread = Locked<pthread_t?>(nil)

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let onWorkThread = workThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } }
            if onWorkThread == true {
                job.runSynchronously(on: asUnownedTaskExecutor())
            } else {
                DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
            }
        }
    }

    final class Token: Sendable {}

    @Test("the task that awaits the result owns it alone, even while the thread is still resuming it")
    func resultHandedOver() async {
        // The thread may finish before the task has suspended, which then goes on where it was:
        // tried until the task went on inside the thread's resume.
        var tried = 0
        while tried < 200 {
            tried += 1
            let executor = ResumingThreadExecutor()
            let (uniquelyOwned, onWorkThread) = await withTaskExecutorPreference(executor) {
                var token = await onOwnThread {
                    executor.workThread.withLock { $0 = pthread_self() }
                    return Token()
                }
                let onWorkThread = executor.workThread.withLock { pthread_equal($0!, pthread_self()) != 0 }
                return (isKnownUniquelyReferenced(&token), onWorkThread)
            }
            guard onWorkThread else { continue }
            #expect(uniquelyOwned, "the thread that made the result still holds a copy of it")
            return
        }
        Issue.record("in \(tried) tries the awaiting task never went on inside the thread's resume")
    }
}

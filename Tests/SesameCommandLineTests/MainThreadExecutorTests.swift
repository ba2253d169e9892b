import Foundation
import Sesame
import Testing

@testable import SesameCommandLine

@Suite("The command line runs its task on the calling thread")
struct MainThreadExecutorTests {
    init() { TestProviders.bootstrap() }

    /// The calling thread's pthread identifier.
    static var thread: UInt { UInt(pthread_self()) }

    /// Counts calls; a default actor, which follows the task's executor preference.
    actor Counter {
        var calls = 0
        func increment() -> UInt {
            calls += 1
            return MainThreadExecutorTests.thread
        }
    }

    /// Runs `MainThreadExecutor.run(body)` on a thread of its own, as `main` does on the main
    /// thread, so that no thread of the test's cooperative pool blocks; returns the value and the
    /// thread it ran on.
    static func runOnThread<T: Sendable>(
        _ body: @escaping @Sendable () async -> T
    ) async -> (value: T, caller: UInt) {
        let (caller, value) = await onOwnThread { (Self.thread, MainThreadExecutor.run(body)) }
        return (value, caller)
    }

    @Test("every step, before and after awaiting another thread, runs on the calling thread")
    func stepsStayOnCaller() async {
        let (threads, caller) = await Self.runOnThread { () async -> [UInt] in
            var seen = [Self.thread]
            // Resumed from a thread of its own, as a keyring or network answer is.
            let answer = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                Thread.detachNewThread { continuation.resume(returning: 42) }
            }
            #expect(answer == 42)
            seen.append(Self.thread)
            // Not synchronisation: a suspension that the clock ends, from a thread of its own.
            try? await Task.sleep(for: .milliseconds(5))
            seen.append(Self.thread)
            return seen
        }
        #expect(threads == [caller, caller, caller], "a step ran elsewhere: \(threads) on \(caller)")
    }

    @Test("child tasks and actors the task calls run on the calling thread")
    func childrenAndActorsStayOnCaller() async {
        let (threads, caller) = await Self.runOnThread { () async -> [UInt] in
            let counter = Counter()
            async let first = counter.increment()
            async let second = counter.increment()
            var seen = await [first, second]
            seen += await withTaskGroup(of: UInt.self) { group in
                for _ in 0..<4 { group.addTask { Self.thread } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(await counter.calls == 2)
            return seen
        }
        #expect(threads.count == 6)
        #expect(threads.allSatisfy { $0 == caller }, "\(threads) on \(caller)")
    }

    @Test("an unstructured task still runs (on the global pool) and is awaited without a deadlock")
    func unstructuredTaskFinishes() async {
        let (value, caller) = await Self.runOnThread { () async -> (Int, UInt) in
            let task = Task.detached { (21 * 2, Self.thread) }
            return await task.value
        }
        #expect(value.0 == 42)
        #expect(value.1 != caller, "a detached task does not take the caller's preference")
    }

    @Test("the command line's own entry point returns the command's exit status")
    func entryPointReturnsStatus() async {
        #expect(await onOwnThread { SesameCLI.runOnMainThread(["--version"]) } == 0)
    }
}

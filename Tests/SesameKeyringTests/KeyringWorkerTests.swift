import Dispatch
import Foundation
import Sesame
import Testing

@testable import SesameKeyring

/// The dedicated queue that every libsecret call runs on, with its deadline. These tests need
/// no keyring: the bodies stand in for libsecret calls that block.
@Suite("KeyringWorker: blocking calls off the cooperative pool, each with a deadline")
struct KeyringWorkerTests {
    static func timeoutError(_ stage: KeyringStage) -> CredentialStoreError {
        KeyringMessages.timedOut(stage: stage, "testing", .milliseconds(200))
    }

    @Test("a call that never returns fails with a timeout, and later calls still run")
    func stuckCallTimesOut() async throws {
        let worker = KeyringWorker(label: "test.stuck")
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)

        let error = await #expect(throws: CredentialStoreError.self) {
            try await worker.run(timeout: .milliseconds(200), timeoutError: Self.timeoutError) { _ in
                started.signal()
                release.wait()  // a C call that ignores cancellation
                return 0
            }
        }
        #expect(error?.kind == .timedOut)
        // A body that started and never returned makes the worker move to a fresh queue.
        // (Under heavy load the deadline may pass before the body starts; it then never runs.)
        if started.wait(timeout: .now()) == .success {
            #expect(worker.abandonedQueues == 1)
        } else {
            print("KeyringWorkerTests: abandonedQueues not checked: the body had not started before the deadline")
        }

        let value = try await worker.run(timeout: .seconds(30), timeoutError: Self.timeoutError) { _ in 42 }
        #expect(value == 42)
        release.signal()
    }

    @Test("a timeout cancels the call and names the stage it had reached")
    func timeoutCancelsAndNamesStage() async throws {
        let worker = KeyringWorker(label: "test.stage")
        let returned = AsyncStream<Bool>.makeStream()

        let error = await #expect(throws: CredentialStoreError.self) {
            try await worker.run(timeout: .milliseconds(200), timeoutError: Self.timeoutError) { cancellation in
                cancellation.stage = .service
                while !cancellation.isCancelled { usleep(1000) }
                returned.continuation.yield(true)
                return 0
            }
        }
        #expect(error?.kind == .timedOut)
        #expect(error?.message.contains("Secret Service") == true)
        // The body sees the cancellation and returns (the caller did not wait for it).
        var sawCancellation = false
        for await value in returned.stream {
            sawCancellation = value
            break
        }
        #expect(sawCancellation)
    }

    @Test("cancelling the calling task cancels the call with CancellationError")
    func taskCancellation() async throws {
        let worker = KeyringWorker(label: "test.cancel")
        let started = AsyncStream<Void>.makeStream()
        let returned = AsyncStream<Bool>.makeStream()

        let task = Task {
            try await worker.run(timeout: .seconds(60), timeoutError: Self.timeoutError) { cancellation in
                started.continuation.yield()
                while !cancellation.isCancelled { usleep(1000) }
                returned.continuation.yield(true)
                return "finished"
            }
        }
        for await _ in started.stream { break }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        var sawCancellation = false
        for await value in returned.stream {
            sawCancellation = value
            break
        }
        #expect(sawCancellation)
    }

    struct BodyError: Error, Equatable {}

    @Test("a call's value and its errors come back to the caller")
    func resultsComeBack() async throws {
        let worker = KeyringWorker(label: "test.results")
        let value = try await worker.run(timeout: .seconds(30), timeoutError: Self.timeoutError) { _ in "value" }
        #expect(value == "value")
        await #expect(throws: BodyError()) {
            try await worker.run(timeout: .seconds(30), timeoutError: Self.timeoutError) { _ -> Int in
                throw BodyError()
            }
        }
        #expect(worker.abandonedQueues == 0)
    }

    @Test("a call runs on the worker's thread, not on the cooperative pool")
    func runsOnDedicatedQueue() async throws {
        let worker = KeyringWorker(label: "test.thread")
        let label = try await worker.run(timeout: .seconds(30), timeoutError: Self.timeoutError) { _ in
            KeyringWorker.currentQueueLabel
        }
        #expect(label?.hasPrefix("test.thread.") == true)
        #expect(KeyringWorker.currentQueueLabel == nil)
    }
}

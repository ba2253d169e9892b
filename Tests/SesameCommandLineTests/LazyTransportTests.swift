import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCommandLine

@Suite("The command line's lazy transport")
struct LazyTransportTests {
    init() { TestProviders.bootstrap() }

    /// Answers 204 to everything.
    final class NoContent: HTTPTransport {
        func send(_ request: HTTPRequest) async throws -> HTTPResponse { HTTPResponse(status: 204) }
    }

    /// A transport factory that counts how often it is asked.
    final class Factory: Sendable {
        let made = Locked(0)
        func make() -> any HTTPTransport {
            made.withLock { $0 += 1 }
            return NoContent()
        }
    }

    @Test("nothing is made until the first request, and then once")
    func madeOnFirstRequest() async throws {
        let factory = Factory()
        let transport = LazyTransport { factory.make() }
        #expect(factory.made.withLock { $0 } == 0)
        let request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:9/")!)
        for _ in 0..<3 { #expect(try await transport.send(request).status == 204) }
        #expect(factory.made.withLock { $0 } == 1)
    }

    @Test("prepare makes the transport on another task, before any request, and a request then reuses it")
    func prepareMakesItAhead() async throws {
        let factory = Factory()
        let transport = LazyTransport { factory.make() }
        transport.prepare()
        await transport.finishPreparing()
        #expect(factory.made.withLock { $0 } == 1, "prepare did not make the transport")
        transport.prepare()
        let request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:9/")!)
        #expect(try await transport.send(request).status == 204)
        // A second prepare and the request found it made (a preparation under way is waited for).
        await transport.finishPreparing()
        #expect(factory.made.withLock { $0 } == 1)
    }

    @Test("finishPreparing returns at once without a prepare, and after the transport is made with one")
    func finishPreparingWaits() async throws {
        let idle = LazyTransport { NoContent() }
        await idle.finishPreparing()

        let release = DispatchSemaphore(value: 0)
        let factory = Factory()
        let slow = LazyTransport {
            release.wait()
            return factory.make()
        }
        slow.prepare()
        let finished = Locked(false)
        // On one thread, in turn: `check` runs once `waiting` has returned or is waiting.
        let executor = SerialTaskExecutor()
        defer { executor.shutdown() }
        let waiting = Task(executorPreference: executor) {
            await slow.finishPreparing()
            finished.withLock { $0 = true }
        }
        let check = Task(executorPreference: executor) { finished.withLock { $0 } }
        #expect(await !check.value, "finishPreparing returned while the transport was still being made")
        release.signal()
        await waiting.value
        #expect(finished.withLock { $0 })
        #expect(factory.made.withLock { $0 } == 1)
        // Once made, it returns at once, and a second prepare starts nothing.
        slow.prepare()
        await slow.finishPreparing()
        #expect(factory.made.withLock { $0 } == 1)
    }
}

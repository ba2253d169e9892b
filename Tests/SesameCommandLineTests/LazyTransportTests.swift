import Foundation
import Sesame
import Testing

@testable import SesameCommandLine

@Suite("The command line's lazy transport")
struct LazyTransportTests {
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
        let deadline = ContinuousClock.now + .seconds(10)
        while factory.made.withLock({ $0 }) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(factory.made.withLock { $0 } == 1, "prepare did not make the transport")
        transport.prepare()
        let request = HTTPRequest(method: .get, url: URL(string: "http://127.0.0.1:9/")!)
        #expect(try await transport.send(request).status == 204)
        // A second prepare and the request found it made.
        try await Task.sleep(for: .milliseconds(50))
        #expect(factory.made.withLock { $0 } == 1)
    }
}

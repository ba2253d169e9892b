import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCurl

/// The lone-caller shortcut: a caller with nothing else in flight waits for a fast server's
/// answer on its own thread, and hands the wait to the engine thread when the budget runs out
/// or something else needs the transport. The budgets here are long, so that a loaded machine
/// cannot turn the path off; a slow answer is one the server holds until the test lets it go,
/// not one that merely takes longer than a budget; and the server answers from its own threads,
/// so that a caller waiting inline cannot starve it. The counters say which path each took.
///
/// Every request is sent through ``BlockingWaitExecutor``, so that an inline wait holds one of
/// its threads, never one of the cooperative pool that the rest of the suite needs.
@Suite("CurlTransport inline waits", .serialized)
struct CurlInlineWaitTests {
    /// Sends off the cooperative pool: an inline wait holds the thread it runs on.
    private func get(_ transport: CurlTransport, _ url: URL, timeout: Duration? = nil) async throws -> HTTPResponse {
        try await BlockingWaitExecutor.run { try await transport.send(HTTPRequest(url: url, timeout: timeout)) }
    }

    /// Waits until `condition` holds: polling the engine, not timing it; a minute's limit turns
    /// a hang into a failure.
    private func waitUntil(_ condition: () -> Bool) async throws {
        guard await SesameTestSupport.waitUntil(limit: .seconds(60), condition) else {
            Issue.record("waited a minute for the engine to get there")
            throw CancellationError()
        }
    }

    private func counts(_ transport: CurlTransport) -> (inline: Int, handedOver: Int) {
        (
            transport.engine.counters.finishedInline.load(ordering: .relaxed),
            transport.engine.counters.handedOver.load(ordering: .relaxed)
        )
    }

    @Test("after the first, a lone caller's requests are answered on its own thread, each with its own answer")
    func sequentialCallerWaitsInline() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport(inlineBudget: .seconds(5))
        for index in 0..<30 {
            let response = try await get(transport, server.url("/delay/0?i=\(index)"))
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == "/delay/0?i=\(index)")
        }
        // The first has no latency to go by, so the engine thread waits for it.
        #expect(counts(transport) == (29, 0))
        server.stop()
    }

    @Test("an inline wait that runs out of budget goes to the engine thread, and the answer still arrives")
    func budgetRunsOut() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        // The budget is long next to a loopback answer, so that a loaded machine does not make a
        // fast request look slow; the slow one is held by the server until the wait has run out.
        let transport = CurlTransport(inlineBudget: .seconds(1))
        _ = try await get(transport, server.url("/delay/0"))  // the engine thread's; now known to be fast
        async let slow = get(transport, server.url("/hold?slow"))
        try await waitUntil { counts(transport).handedOver == 1 }
        #expect(counts(transport) == (0, 1))
        server.releaseHeld()
        #expect(String(decoding: try await slow.body, as: UTF8.self) == "/hold?slow")
        // The last lone request took longer than the budget: the next is not waited for inline;
        _ = try await get(transport, server.url("/delay/0"))
        #expect(counts(transport) == (0, 1))
        // that one was fast, but one run-out costs one more turn with the engine thread;
        _ = try await get(transport, server.url("/delay/0"))
        #expect(counts(transport) == (0, 1))
        // then the caller waits inline again.
        _ = try await get(transport, server.url("/delay/0"))
        #expect(counts(transport) == (1, 1))
    }

    @Test("a server slower than the budget is never waited for inline")
    func slowServerStaysWithTheEngine() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport(inlineBudget: .milliseconds(100))
        for index in 0..<4 {
            let response = try await get(transport, server.url("/delay/300?i=\(index)"))
            #expect(String(decoding: response.body, as: UTF8.self) == "/delay/300?i=\(index)")
        }
        #expect(counts(transport) == (0, 0))
        server.stop()
    }

    @Test("a second request started during an inline wait takes the wait to the engine thread; both are answered")
    func secondRequestEndsTheInlineWait() async throws {
        let server = try RawListener(.keepAliveEcho)
        defer { server.stop() }
        let transport = CurlTransport(inlineBudget: .seconds(60))
        _ = try await get(transport, server.url("/delay/0"))
        // The first is held by the server; the second starts once the first is waiting inline.
        async let first = get(transport, server.url("/hold?first"))
        try await waitUntil { transport.engine.isWaitingInline }
        let second = try await get(transport, server.url("/delay/0?second"))
        #expect(String(decoding: second.body, as: UTF8.self) == "/delay/0?second")
        let clock = ContinuousClock()
        let released = clock.now
        server.releaseHeld()
        let firstResponse = try await first
        #expect(String(decoding: firstResponse.body, as: UTF8.self) == "/hold?first")
        #expect(clock.now - released < .seconds(30), "the first was held for its inline budget")
        #expect(counts(transport) == (0, 1))
    }

    @Test("cancelling a task waiting inline ends the wait at once with CancellationError")
    func cancellationEndsTheInlineWait() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport(inlineBudget: .seconds(20))
        _ = try await get(transport, server.url("/delay/0"))
        let clock = ContinuousClock()
        let started = clock.now
        let task = Task { try await get(transport, server.url("/stall")) }
        try await waitUntil { transport.engine.isWaitingInline }
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(clock.now - started < .seconds(5), "the inline wait outlived the cancellation")
        // The transport goes on, inline again once a fast request has shown the way.
        _ = try await get(transport, server.url("/delay/0"))
        _ = try await get(transport, server.url("/delay/0"))
        #expect(counts(transport).inline >= 1)
        server.stop()
    }

    @Test("a request timeout during an inline wait ends it with timedOut, not at the end of the budget")
    func timeoutEndsTheInlineWait() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport(inlineBudget: .seconds(20))
        _ = try await get(transport, server.url("/delay/0"))
        let clock = ContinuousClock()
        let started = clock.now
        let error = try await #require(throws: TransportError.self) {
            try await get(transport, server.url("/stall"), timeout: .milliseconds(300))
        }
        #expect(error.kind == .timedOut)
        #expect(clock.now - started < .seconds(5), "the inline wait outlived the request's timeout")
        #expect(counts(transport) == (1, 0))  // it ended with the transfer, which the timeout finished
        server.stop()
    }

    @Test("after many callers at once, a lone caller waits inline only once the transport has been quiet")
    func crowdsDelayInlineWaits() async throws {
        let server = try RawListener(.keepAliveEcho)
        // A quiet period no crowd of twenty outlasts, however loaded the machine; the test then
        // tells the engine that it has passed rather than sleeping through it.
        let transport = CurlTransport(inlineBudget: .seconds(5), quietPeriod: .seconds(60))
        _ = try await get(transport, server.url("/delay/0"))
        _ = try await get(transport, server.url("/delay/0"))
        #expect(counts(transport) == (1, 0))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask { _ = try await get(transport, server.url("/delay/5?c=\(index)")) }
            }
            try await group.waitForAll()
        }
        let afterCrowd = counts(transport)
        // Alone again, but right after a crowd: its callers may all be about to send again.
        _ = try await get(transport, server.url("/delay/0?after"))
        #expect(counts(transport) == afterCrowd)
        transport.engine.forgetCrowds()
        _ = try await get(transport, server.url("/delay/0?quiet"))
        #expect(counts(transport).inline == afterCrowd.inline + 1)
        server.stop()
    }

    @Test("a host name (localhost) rather than an address, for a lone caller and for a crowd of new transports")
    func hostNames() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport(inlineBudget: .seconds(5))
        let base = "http://localhost:\(server.port)"
        for index in 0..<5 {
            let response = try await get(transport, URL(string: "\(base)/delay/0?i=\(index)")!)
            #expect(String(decoding: response.body, as: UTF8.self) == "/delay/0?i=\(index)")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    let fresh = CurlTransport(inlineBudget: .seconds(5))  // a name lookup each, at once
                    let response = try await get(fresh, URL(string: "\(base)/delay/1?c=\(index)")!)
                    #expect(String(decoding: response.body, as: UTF8.self) == "/delay/1?c=\(index)")
                }
            }
            try await group.waitForAll()
        }
        server.stop()
    }

    @Test("connections the server closes are replaced, whichever thread waits, and no answer goes astray")
    func closedConnectionsAreReplaced() async throws {
        let server = try RawListener(.keepAliveEcho)
        for budget in [Duration.zero, .seconds(5)] {  // never inline, and inline after the first
            let transport = CurlTransport(inlineBudget: budget)
            for index in 0..<20 {
                // Every third answer closes its connection; the socket number is soon reused.
                let path = index % 3 == 2 ? "/close?i=\(index)" : "/delay/0?i=\(index)"
                let response = try await get(transport, server.url(path))
                #expect(String(decoding: response.body, as: UTF8.self) == path)
            }
            // Many at once over the same sockets too.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        let path = index % 4 == 0 ? "/close?c=\(index)" : "/delay/1?c=\(index)"
                        let response = try await get(transport, server.url(path))
                        #expect(String(decoding: response.body, as: UTF8.self) == path)
                    }
                }
                try await group.waitForAll()
            }
            if budget == .zero {
                #expect(counts(transport) == (0, 0))
            } else {
                #expect(counts(transport).inline >= 10)
            }
        }
        server.stop()
    }

    @Test(
        "lone callers, crowds, cancellations and timeouts mixed on one transport: every answer to its caller, no hang")
    func mixedTraffic() async throws {
        let server = try RawListener(.keepAliveEcho)
        let transport = CurlTransport()  // the real budget and quiet period
        let clock = ContinuousClock()
        let started = clock.now
        for round in 0..<6 {
            for index in 0..<15 {
                let path = "/delay/0?r=\(round)&s=\(index)"
                let response = try await get(transport, server.url(path))
                #expect(String(decoding: response.body, as: UTF8.self) == path)
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        switch index % 8 {
                        case 0:
                            // Cancelled while it waits for an answer that never comes.
                            let target = "/stall?r=\(round)&c=\(index)"
                            let task = Task { try await get(transport, server.url(target)) }
                            #expect(await server.requestSeen(target), "the listener never read \(target)")
                            task.cancel()
                            await #expect(throws: CancellationError.self) { try await task.value }
                        case 1:
                            let error = try await #require(throws: TransportError.self) {
                                try await get(
                                    transport, server.url("/stall?r=\(round)&t=\(index)"), timeout: .milliseconds(50))
                            }
                            #expect(error.kind == .timedOut)
                        default:
                            let path = "/delay/\(index % 3)?r=\(round)&c=\(index)"
                            let response = try await get(transport, server.url(path))
                            #expect(String(decoding: response.body, as: UTF8.self) == path)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        #expect(
            clock.now - started < .seconds(120), "mixed traffic took too long: something waited for a budget or a hang")
        server.stop()
    }
}

import Foundation
import Sesame
import SesameFacebook
import SesameFacebookEmulator
import SesameTesting
import Testing

/// Records how many calls each Graph batch request carried, around another transport.
final class BatchSizeRecorder: HTTPTransport {
    let base: any HTTPTransport
    private let recorded = Locked<[Int]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    /// The number of calls in each batch sent, in order.
    var sizes: [Int] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let form = FormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
        if let batch = form.first(where: { $0.0 == "batch" })?.1,
            let items = JSONValue(parsing: Data(batch.utf8))?.arrayValue
        {
            recorded.withLock { $0.append(items.count) }
        }
        return try await base.send(request)
    }
}

@Suite("Graph batch: passing failures of single calls are sent again", .serialized)
struct BatchRetryTests {
    static let policy = RecoveryPolicy(maxAttempts: 3, baseDelay: .milliseconds(500), jitter: .none)

    @Test("only the call that failed in passing is sent again, alone, until it succeeds; the others are kept")
    func transientItemRecovers() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["publish_actions", "user_posts"])
            let clock = ManualClock(autoAdvance: true)
            let recorder = BatchSizeRecorder(harness.transport)
            let session = harness.session(store: store, clock: clock, transport: recorder)
            try await session.openActiveSession(allowLoginUI: false)
            try await harness.emulator.activate(ScenarioSetting(.transient, count: 2, path: "me/feed"))

            let results = try await session.graph.batchRetryingFailedItems(
                [
                    GraphRequest(.get, "me", parameters: ["fields": "id"]),
                    GraphRequest(.post, "me/feed", parameters: ["message": "sent until it lands"]),
                    GraphRequest(.get, "me/permissions"),
                ], policy: Self.policy)

            #expect(results.count == 3)
            #expect(try results[0].get().json["id"]?.stringValue == harness.userID)
            #expect(try results[1].get().json["id"]?.stringValue != nil)
            #expect(try results[2].get().json["data"]?.arrayValue?.isEmpty == false)
            // The whole batch once, then the failed call alone twice.
            #expect(recorder.sizes == [3, 1, 1])
            // Facebook's temporary failure (code 2) is retried after back-off: 500 ms, then 1 s.
            #expect(clock.sleeps == [.milliseconds(500), .seconds(1)])
            var posts = 0
            for try await _ in session.graph.items("me/feed") { posts += 1 }
            #expect(posts == 1)
        }
    }

    @Test("a call that keeps failing gives up after the policy's attempts; other errors are never sent again")
    func boundedAttempts() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["publish_actions"])
            let recorder = BatchSizeRecorder(harness.transport)
            let session = harness.session(store: store, transport: recorder)
            try await session.openActiveSession(allowLoginUI: false)
            try await harness.emulator.activate(ScenarioSetting(.transient, count: 10, path: "me/feed"))

            let results = try await session.graph.batchRetryingFailedItems(
                [
                    GraphRequest(.get, "me", parameters: ["fields": "id"]),
                    GraphRequest(.post, "me/feed", parameters: ["message": "never lands"]),
                    GraphRequest(.get, "no-such-node-anywhere"),
                ], policy: Self.policy)

            #expect(try results[0].get().json["id"]?.stringValue == harness.userID)
            guard case .failure(let passing) = results[1], case .failure(let missing) = results[2] else {
                Issue.record("a failing call succeeded: \(results)")
                return
            }
            #expect(passing.code == 2)
            #expect(passing.recoveryTactic == .retryAfterBackoff)
            #expect(missing.recoveryTactic != .retry && missing.recoveryTactic != .retryAfterBackoff)
            #expect(recorder.sizes == [3, 1, 1])
            #expect(await session.state.isOpen)
        }
    }

    @Test("a batch with no passing failures is sent once")
    func nothingToRetry() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email"])
            let recorder = BatchSizeRecorder(harness.transport)
            let session = harness.session(store: store, transport: recorder)
            try await session.openActiveSession(allowLoginUI: false)
            let results = try await session.graph.batchRetryingFailedItems(
                [
                    GraphRequest(.get, "me", parameters: ["fields": "id"]),
                    GraphRequest(.post, "me/feed", parameters: ["message": "needs publish_actions"]),
                ], policy: Self.policy)
            guard case .failure(let permission) = results[1] else {
                Issue.record("the post without publish_actions succeeded")
                return
            }
            #expect(permission.category == .permissions)
            #expect(recorder.sizes == [2])
        }
    }
}

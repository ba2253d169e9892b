import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameEmulator
@testable import SesameFacebookEmulator
@testable import SesameGitHubEmulator
@testable import SesameOIDCEmulator

@Suite("Concurrent clients")
struct ConcurrencyTests {
    @Test("many clients at once each get their own correct answer, and every post is kept")
    func concurrentClients() async throws {
        try await Harness.with { h in
            var tokens: [String] = []
            for index in 0..<8 {
                let id = "20000000000000\(index)"
                await h.emulator.addUser(EmulatedUser(id: id, name: "Person \(index)"))
                tokens.append(try await h.token(["publish_actions"], user: id))
            }
            let snapshot = tokens
            let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                for request in 0..<240 {
                    group.addTask {
                        let person = request % snapshot.count
                        if request % 3 == 0 {
                            let reply = try await h.post(
                                "/me/feed", token: snapshot[person], [("message", "post \(request)")])
                            return (
                                person, reply.json?["id"]?.stringValue?.hasPrefix("20000000000000\(person)_") == true
                            )
                        }
                        let reply = try await h.get("/v19.0/me", token: snapshot[person])
                        return (person, reply.json?["id"] == .string("20000000000000\(person)"))
                    }
                }
                var all: [(Int, Bool)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 240)
            #expect(results.allSatisfy { $0.1 })
            var total = 0
            for token in tokens {
                total +=
                    try await h.get("/me/feed", token: token, [("limit", "100")]).json?["data"]?.arrayValue?.count ?? 0
            }
            #expect(total == 80)
        }
    }

    @Test("reads answered side by side are all counted, and a scenario among them is used up exactly as often as asked")
    func sharedReads() async throws {
        let emulator = try Emulator()
        let token = try await emulator.issueToken(permissions: ["email"])
        let me = EmulatorRequest(
            method: .get, path: "/v19.0/me", query: [("access_token", token), ("fields", "id,name,email")])
        func statuses(_ count: Int) async -> [Int] {
            await withTaskGroup(of: Int.self) { group in
                for _ in 0..<count { group.addTask { await emulator.respond(to: me).response?.status ?? 0 } }
                var all: [Int] = []
                for await status in group { all.append(status) }
                return all
            }
        }
        // No scenario: every read is answered (under the read lock), side by side.
        #expect(await statuses(200).allSatisfy { $0 == 200 })
        // Three transient errors among 100 concurrent reads: exactly three, though the others
        // would read side by side (a scenario sends every call through the write lock).
        try await emulator.activate(ScenarioSetting(.transient, count: 3))
        let mixed = await statuses(100)
        #expect(mixed.filter { $0 == 200 }.count == 97, "\(mixed.filter { $0 != 200 })")
        #expect(await statuses(20).allSatisfy { $0 == 200 })
        // Every one of the 320 calls was counted, shared or not.
        let usage = try #require(await emulator.respond(to: me).response?.headers["X-App-Usage"])
        // The share of the app's hourly allowance: 200 calls for its one installed person.
        #expect(JSONValue(parsing: Data(usage.utf8))?["call_count"] == .int(321 * 100 / 200), "\(usage)")
    }

    @Test("a huge answer being encoded does not hold up another client's small request")
    func hugeAnswerDoesNotBlockOthers() async throws {
        let emulator = try Emulator()
        // A name of quotes is escaped twice in a batch (in each answer, then in the batch's JSON),
        // so fifty of them take long to encode and almost no time to build.
        let id = "200000000000099"
        await emulator.addUser(EmulatedUser(id: id, name: String(repeating: "\"", count: 20_000)))
        let token = try await emulator.issueToken(user: id)
        let operations = JSONValue.array(
            Array(repeating: .object(["method": .string("GET"), "relative_url": .string("me?fields=name")]), count: 50))
        let big = EmulatorRequest(
            method: .post, path: "/", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(FormEncoding.encode([("access_token", token), ("batch", operations.jsonText)]).utf8))
        let small = EmulatorRequest(method: .get, path: "/me", query: [("access_token", token), ("fields", "id")])

        let clock = ContinuousClock()
        let bigStarted = clock.now
        // On a thread of its own, so that the slow encoding holds none of the threads the other
        // tests' servers run on.
        let engine = emulator.engine
        let bigDone = Locked(false)
        let (bigBegun, beginning) = AsyncStream.makeStream(of: Void.self)
        let bigTask = Task {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<(ContinuousClock.Instant, Int), Never>) in
                Thread {
                    beginning.yield()
                    let outcome = engine.handle(big)
                    bigDone.withLock { $0 = true }
                    continuation.resume(returning: (ContinuousClock().now, outcome.response?.body.count ?? 0))
                }.start()
            }
        }
        for await _ in bigBegun { break }
        // Small requests one after another, from the moment the huge answer is begun until it is
        // done, so that some arrive while it is built and some while it is encoded.
        var smallStatuses: Set<Int> = []
        var smallCount = 0
        var slowestSmall = Duration.zero
        repeat {
            let smallStarted = clock.now
            let smallOutcome = await emulator.respond(to: small)
            slowestSmall = max(slowestSmall, clock.now - smallStarted)
            smallStatuses.insert(smallOutcome.response?.status ?? 0)
            smallCount += 1
        } while !bigDone.withLock { $0 }
        let (bigFinished, bigSize) = await bigTask.value

        #expect(smallStatuses == [200])
        #expect(bigSize > 2_000_000)
        let bigDuration = bigFinished - bigStarted
        guard smallCount > 1 else {
            Issue.record(
                "The huge answer took \(bigDuration), too little to overlap the small requests; make it larger.")
            return
        }
        // Had a small request waited for the lock while the huge answer was encoded, it would
        // have ended with it, taking nearly all of the huge answer's time (building it takes
        // almost none); the others take a fraction of a millisecond.
        #expect(
            slowestSmall * 2 < bigDuration,
            "slowest of \(smallCount) small requests \(slowestSmall), huge answer \(bigDuration)")
    }
}

@Suite("The OIDC emulator signs outside its lock")
struct OIDCSigningOutsideLockTests {
    @Test("a token answer built under the lock carries its ID token unsigned; it is signed when encoded")
    func idTokenSignedAfterLock() async throws {
        let engine = OIDCEngine(algorithm: .rs256, clients: [:], accessTokenLifetime: 3600)
        try await engine.prepareKeys()
        let grant = engine.newGrant(
            clientID: OIDCEmulator.defaultClientID, sub: "248289761001", scope: "openid email", authTime: Date())
        let reply = engine.locked { state in engine.issue(grant, nonce: "n-1", &state) }
        let pending = try #require(reply.deferredField, "the ID token was signed under the lock")
        #expect(pending.name == "id_token")
        guard case .json(.object(let built)) = reply.body else {
            Issue.record("the token answer is not a JSON object")
            return
        }
        #expect(built["id_token"] == nil)
        #expect(built["access_token"] != nil)

        let sent = try #require(JSONValue(parsing: reply.response.body))
        guard case .object(let fields) = sent, case .string(let idToken) = fields["id_token"] else {
            Issue.record("the encoded answer has no id_token: \(sent)")
            return
        }
        let parts = idToken.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts.allSatisfy { !$0.isEmpty })
        let header = try #require(Base64URL.decode(parts[0]).flatMap { JSONValue(parsing: $0) })
        #expect(header["kid"] == .string("key-1"))
        let claims = try #require(Base64URL.decode(parts[1]).flatMap { JSONValue(parsing: $0) })
        #expect(claims["nonce"] == .string("n-1"))
    }

    @Test("a scope without openid gets no ID token to sign")
    func noOpenID() async throws {
        let engine = OIDCEngine(algorithm: .es256, clients: [:], accessTokenLifetime: 3600)
        try await engine.prepareKeys()
        let grant = engine.newGrant(
            clientID: OIDCEmulator.defaultClientID, sub: "248289761001", scope: "email", authTime: Date())
        let reply = engine.locked { state in engine.issue(grant, nonce: nil, &state) }
        #expect(reply.deferredField == nil)
    }
}

/// Making an RS256 key takes 0.1 to 1 s of CPU (several seconds on a loaded machine). Made on a
/// thread of Swift's cooperative pool, it held that thread, and with two such threads on a
/// two-core machine a few emulators starting at once stalled every task of the process: CI's
/// ThreadSanitizer run saw eight emulators in the same test process answer nothing for 30 s.
@Suite("The OIDC emulator makes its keys off the cooperative pool")
struct OIDCKeysOffPoolTests {
    /// Whether `work`, run on a one-thread executor, suspends (true) or holds the thread until
    /// it is done (false): a task enqueued behind it runs before it ends only if it suspends.
    static func suspends(_ work: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        let executor = SerialTaskExecutor()
        defer { executor.shutdown() }
        let finished = Locked(false)
        let first = Task(executorPreference: executor) {
            try await work()
            finished.withLock { $0 = true }
        }
        let second = Task(executorPreference: executor) { !finished.withLock { $0 } }
        let ranFirst = await second.value
        try await first.value
        return ranFirst
    }

    @Test("creating an emulator makes no key; starting it makes key-1 without holding its thread")
    func startSuspends() async throws {
        let emulator = try OIDCEmulator()  // RS256: the slow kind
        #expect(emulator.engine.locked { $0.keys.isEmpty })
        #expect(try await Self.suspends { try await emulator.start() })
        #expect(emulator.engine.locked { $0.keys.map(\.kid) } == ["key-1"])
        await emulator.stop()
    }

    @Test("a key rotation and the unknown-key scenario make their keys without holding a thread")
    func scenariosSuspend() async throws {
        let emulator = try OIDCEmulator()
        try await emulator.start()
        #expect(try await Self.suspends { try await emulator.activate(OIDCScenarioSetting(.keyRotated)) })
        #expect(emulator.engine.locked { $0.keys.map(\.kid) } == ["key-2", "key-1"])
        #expect(try await Self.suspends { try await emulator.activate(OIDCScenarioSetting(.unknownKey)) })
        let unpublished = try #require(emulator.engine.locked { $0.unpublishedKey })
        #expect(emulator.engine.locked { state in state.keys.allSatisfy { $0.key !== unpublished } })
        await emulator.stop()
    }

    @Test("through the admin API too: a rotation is made before the engine's lock is taken")
    func adminRotationSuspends() async throws {
        let engine = OIDCEngine(algorithm: .rs256, clients: [:], accessTokenLifetime: 3600)
        try await engine.prepareKeys()
        let request = LoopbackRequest(
            method: .post, path: "/__sesame/scenarios", query: [], headers: ["Content-Type": "application/json"],
            body: Data(#"{"scenario": "key-rotated"}"#.utf8))
        #expect(try await Self.suspends { _ = await engine.reply(to: request) })
        #expect(engine.locked { $0.keys.map(\.kid) } == ["key-2", "key-1"])
    }
}

@Suite("The emulators write their pages after the engine's lock")
struct PagesOutsideLockTests {
    /// The page `reply` carries unwritten, written as `response` will send it; nil when the reply
    /// was built with its page already written (under the lock).
    static func unwrittenPage(_ reply: SesameEmulator.Reply?) -> String? {
        guard let reply, case .page = reply.body else { return nil }
        return String(decoding: reply.response.body, as: UTF8.self)
    }

    static func request(_ method: HTTPMethod, _ path: String, query: [(String, String)] = []) -> LoopbackRequest {
        LoopbackRequest(method: method, path: path, query: query, headers: [:], body: Data())
    }

    @Test("OIDC: the device page, the consent page and an error page")
    func oidc() async throws {
        let engine = OIDCEngine(algorithm: .es256, clients: [:], accessTokenLifetime: 3600)
        let device = engine.locked { state in engine.route(Self.request(.get, "/device"), &state) }
        #expect(Self.unwrittenPage(device)?.contains("Enter the code shown by the app") == true)
        let consent = engine.locked { state in
            engine.route(
                Self.request(
                    .get, "/authorize",
                    query: [
                        ("client_id", OIDCEmulator.defaultClientID), ("redirect_uri", "http://127.0.0.1:5/cb"),
                        ("response_type", "code"), ("scope", "openid email"), ("code_challenge", "x"),
                        ("code_challenge_method", "S256"),
                    ]), &state)
        }
        let page = try #require(Self.unwrittenPage(consent), "the consent page was written under the lock")
        #expect(page.contains("<code>email</code>") && page.contains("Continue as"))
        let unknown = engine.locked { state in
            engine.route(Self.request(.get, "/authorize", query: [("client_id", "nobody")]), &state)
        }
        #expect(Self.unwrittenPage(unknown)?.contains("The client_id is not registered") == true)
    }

    @Test("GitHub: the device activation page")
    func github() {
        let engine = GitHubEngine(clients: [], expiringTokens: false, accessTokenLifetime: 3600, repositoryCount: 1)
        let page = engine.locked { state in engine.route(Self.request(.get, "/login/device"), &state) }
        #expect(Self.unwrittenPage(page)?.contains("Enter the code displayed on your device") == true)
    }

    @Test("Facebook: the device page, a dialog error page and the page for a dialog that does not exist")
    func facebook() throws {
        let engine = try EmulatorEngine(configuration: EmulatorConfiguration())
        let device = engine.locked { $0.handle(EmulatorRequest(method: .get, path: "/device")) }
        #expect(Self.unwrittenPage(device.reply)?.contains("Enter the code shown on your device") == true)
        let dialog = engine.locked { $0.handle(EmulatorRequest(method: .get, path: "/v19.0/dialog/oauth")) }
        #expect(Self.unwrittenPage(dialog.reply)?.contains("Invalid App ID") == true)
        let missing = engine.locked { $0.handle(EmulatorRequest(method: .get, path: "/dialog/nothing")) }
        #expect(Self.unwrittenPage(missing.reply)?.contains("The emulator has no dialog at this address") == true)
    }
}

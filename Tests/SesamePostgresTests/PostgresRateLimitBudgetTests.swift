import Foundation
import Sesame
import SesameCurl
import SesameFacebook
import SesameFacebookEmulator
import SesamePostgres
import SesameTestSupport
import SesameTesting
import Testing

/// The fleet's Graph budget: workers with a `PostgresRateLimitBudget` each, on connections of
/// their own to a real PostgreSQL, calling the Facebook emulator over HTTP.
@Suite("the fleet's rate-limit budget in PostgreSQL", .serialized)
struct PostgresRateLimitBudgetTests {
    /// A started emulator and a provider pointed at it.
    struct Graph: Sendable {
        let emulator: Emulator
        let provider: FacebookProvider

        func client(budget: any RateLimitBudget, token: String, clock: any Clock<Duration>) -> GraphClient {
            GraphClient(
                provider: provider, transport: CurlTransport(), accessToken: token,
                governor: GraphUsageGovernor(budget: budget), clock: clock)
        }
    }

    static func withGraph<T: Sendable>(
        _ configure: (inout EmulatorConfiguration) -> Void = { _ in }, _ body: (Graph) async throws -> T
    ) async throws -> T {
        var configuration = EmulatorConfiguration()
        configure(&configuration)
        let emulator = try Emulator(configuration: configuration)
        return try await withStarted(
            {
                let endpoints = try await emulator.start()
                let app = configuration.defaultApp
                return Graph(
                    emulator: emulator,
                    provider: FacebookProvider(
                        appID: app.id, graphVersion: configuration.graphVersion, clientToken: app.clientToken,
                        dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL))
            }, stop: { await $0.emulator.stop() }, body)
    }

    /// The warnings a budget gave.
    final class Warnings: Sendable {
        private let lines = Locked<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func add(_ line: String) { lines.withLock { $0.append(line) } }
    }

    /// How many throttled answers the emulator gave for the scenario `id` activated with `count`
    /// answers: each one uses one up.
    static func throttledAnswers(_ emulator: Emulator, id: String, count: Int) async -> Int {
        let remaining = await emulator.activeScenarios().first { $0.id == id }?.remaining ?? 0
        return count - remaining
    }

    @Test("eight workers against app-throttled make one throttled call per regain window, then all resume")
    func eightWorkersOneThrottledCallPerWindow() async throws {
        try await withPostgres { server in
            try await Self.withGraph { graph in
                // Every worker's waits, and the row's times, on one clock the test moves.
                let clock = ManualClock()
                let start = Date()
                let now: @Sendable () -> Date = { start.addingTimeInterval(clock.elapsed.inSeconds) }
                let warnings = Warnings()
                let budgets = (0..<8).map { _ in
                    PostgresRateLimitBudget(
                        configuration: server.configuration, provider: .facebook, appID: graph.provider.appID,
                        now: now, warning: { warnings.add($0) })
                }
                try await budgets[0].migrate()
                let token = try await graph.emulator.issueToken(longLived: true)
                let workers = budgets.map { graph.client(budget: $0, token: token, clock: clock) }
                let budgetCount = 10_000
                let scenario = try await graph.emulator.activate(
                    ScenarioSetting(.appThrottled, count: budgetCount, regainAccessMinutes: 1))

                // The first refusal, which nothing could foresee, starts the first window.
                let first = await #expect(throws: AuthError.self) { try await workers[0].get("me") }
                #expect(first?.category == .throttling)

                // Each worker makes three calls that succeed, calling again after a refusal.
                let callsEach = 3
                let run = Task {
                    try await withThrowingTaskGroup(of: (successes: Int, refusals: Int).self) { group in
                        for worker in workers {
                            group.addTask {
                                var successes = 0
                                var refusals = 0
                                while successes < callsEach {
                                    do {
                                        _ = try await worker.get("me", parameters: ["fields": "id"])
                                        successes += 1
                                    } catch let error as AuthError where error.category == .throttling {
                                        refusals += 1
                                    }
                                }
                                return (successes, refusals)
                            }
                        }
                        var total = (successes: 0, refusals: 0)
                        for try await result in group {
                            total.successes += result.successes
                            total.refusals += result.refusals
                        }
                        return total
                    }
                }
                let windows = 3
                for window in 1...windows {
                    // All eight wait out the window: none calls.
                    #expect(await clock.waitForSleepers(8))
                    let refused = await Self.throttledAnswers(graph.emulator, id: scenario.id, count: budgetCount)
                    #expect(refused == window, "throttled answers after window \(window) began")
                    if window == windows { await graph.emulator.clearScenarios() }
                    // A second past the window's end: the row's times are kept to the microsecond.
                    clock.advance(by: .seconds(61))
                }
                let total = try await run.value
                #expect(total.successes == workers.count * callsEach)
                // Two refusals (one probe in each of windows 2 and 3) reached the workers.
                #expect(total.refusals == windows - 1)
                #expect(warnings.all.isEmpty)
            }
        }
    }

    @Test("usage one worker sees makes another worker pace before its first call")
    func usageFromOneWorkerPacesAnother() async throws {
        try await withPostgres { server in
            try await Self.withGraph({ $0.hourlyCallsPerUser = 10 }) { graph in
                let pacing = RateLimitPacing(threshold: 50, maxDelay: .seconds(10))
                func budget() -> PostgresRateLimitBudget {
                    PostgresRateLimitBudget(
                        configuration: server.configuration, provider: .facebook, appID: graph.provider.appID,
                        pacing: pacing, warning: { Issue.record("unexpected warning: \($0)") })
                }
                let first = budget()
                try await first.migrate()
                let token = try await graph.emulator.issueToken(longLived: true)
                let busyClock = ManualClock(autoAdvance: true)
                let busy = graph.client(budget: first, token: token, clock: busyClock)
                // Each call uses a tenth of the hour's allowance or less: call until past the threshold.
                var calls = 0
                while (busy.governor.lastUsage?.highestPercentage ?? 0) <= pacing.threshold, calls < 40 {
                    _ = try await busy.get("me", parameters: ["fields": "id"])
                    calls += 1
                }
                let used = try #require(busy.governor.lastUsage?.highestPercentage)
                #expect(used > pacing.threshold && used < 100)

                // Another worker, which has made no call yet, waits as the fleet's usage says.
                let otherClock = ManualClock(autoAdvance: true)
                let other = graph.client(budget: budget(), token: token, clock: otherClock)
                _ = try await other.get("me", parameters: ["fields": "id"])
                let expected = pacing.delay(forPercent: used)
                #expect(expected > .zero)
                #expect(otherClock.sleeps.first.map { abs(($0 - expected).inSeconds) < 0.001 } == true)

                // A worker on a budget of its own does not know and calls at once.
                let aloneClock = ManualClock(autoAdvance: true)
                let alone = graph.client(budget: LocalRateLimitBudget(pacing: pacing), token: token, clock: aloneClock)
                _ = try await alone.get("me", parameters: ["fields": "id"])
                #expect(aloneClock.sleeps.isEmpty)
            }
        }
    }

    @Test("when the probe's worker dies (its connection ends), another worker probes; one answer ends the window")
    func probeHolderDies() async throws {
        try await withPostgres { server in
            let clock = ManualClock()
            let start = Date()
            let now: @Sendable () -> Date = { start.addingTimeInterval(clock.elapsed.inSeconds) }
            func budget() -> PostgresRateLimitBudget {
                PostgresRateLimitBudget(
                    configuration: server.configuration, provider: .facebook, appID: "1", now: now,
                    warning: { Issue.record("unexpected warning: \($0)") })
            }
            let (first, second) = (budget(), budget())
            try await first.migrate()
            let refused = try await first.waitForTurn(on: clock)
            await first.finish(
                refused, .throttled(RateLimitUsage(percentages: ["app": 100], regainAccessAfter: .seconds(60))))
            clock.advance(by: .seconds(61))

            let probe = try await first.waitForTurn(on: clock)
            #expect(probe.isProbe)
            // The other worker waits for the probe's answer, on the probe's advisory lock.
            let waiting = Task { try await second.waitForTurn(on: clock) }
            let admin = PostgresConnection(configuration: server.configuration)
            func advisoryLocks(granted: Bool) async throws -> [String] {
                try await admin.withSession { session throws(PostgresError) in
                    try session.execute(
                        "SELECT pid::text FROM pg_locks WHERE locktype = 'advisory' AND granted = $1",
                        [.text(granted ? "true" : "false")])
                }.rows.compactMap { $0.first ?? nil }
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while try await advisoryLocks(granted: false).isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let holder = try #require(try await advisoryLocks(granted: true).first)
            // The first worker dies in the middle of its call: the server ends its connection.
            _ = try await admin.withSession { session throws(PostgresError) in
                try session.execute("SELECT pg_terminate_backend($1::int)", [.text(holder)])
            }
            let next = try await waiting.value
            #expect(next.isProbe)
            await second.finish(next, .answered(RateLimitUsage(percentages: ["app": 20])))
            let after = try await first.waitForTurn(on: clock)
            #expect(!after.isProbe)
            #expect(clock.sleeps.isEmpty)
            await first.finish(after, .answered(nil))
        }
    }

    @Test("with PostgreSQL unreachable, calls go on, paced by the process alone, after one warning")
    func unreachableDatabaseFailsOpen() async throws {
        try await Self.withGraph { graph in
            let port = try Sockets.unusedPort()
            let warnings = Warnings()
            let budget = PostgresRateLimitBudget(
                configuration: PostgresConfiguration(
                    connectionString: "host=127.0.0.1 port=\(port) user=postgres dbname=postgres",
                    connectTimeout: .seconds(2), statementTimeout: .seconds(2)),
                provider: .facebook, appID: graph.provider.appID, retryInterval: .seconds(3600),
                warning: { warnings.add($0) })
            let token = try await graph.emulator.issueToken(longLived: true)
            let clock = ManualClock(autoAdvance: true)
            let worker = graph.client(budget: budget, token: token, clock: clock)
            let started = ContinuousClock.now
            let me = try await worker.get("me", parameters: ["fields": "id"])
            #expect(me["id"]?.stringValue != nil)
            #expect(warnings.all.count == 1)
            #expect(warnings.all.first?.contains("could not be read or written in PostgreSQL") == true)
            #expect(warnings.all.first?.contains(token) == false)

            // This process's own budget still stops calls for a refusal's regain time.
            try await graph.emulator.activate(ScenarioSetting(.appThrottled, count: 1, regainAccessMinutes: 2))
            await #expect(throws: AuthError.self) { try await worker.get("me") }
            _ = try await worker.get("me", parameters: ["fields": "id"])
            #expect(clock.sleeps == [.seconds(120)])
            #expect(warnings.all.count == 1)
            #expect(started.duration(to: .now) < .seconds(30))
        }
    }

    @Test("a database at the first schema version gains the budget's table, its logins kept")
    func olderSchemaMigrates() async throws {
        try await withPostgres { server in
            let admin = PostgresConnection(configuration: server.configuration)
            // The tables as the first version of SesamePostgres made them, with a row.
            try await admin.withSession { session throws(PostgresError) in
                _ = try session.execute(
                    "CREATE TABLE sesame_schema_version (component text PRIMARY KEY, version integer NOT NULL)")
                _ = try session.execute(
                    """
                    CREATE TABLE sesame_credentials (
                        provider text NOT NULL, issuer text NOT NULL, app_id text NOT NULL, account text NOT NULL,
                        key_id text NOT NULL, sealed bytea NOT NULL, saved_at timestamptz NOT NULL,
                        needs_login boolean NOT NULL, PRIMARY KEY (provider, issuer, app_id, account))
                    """)
                _ = try session.execute("INSERT INTO sesame_schema_version VALUES ('credentials', 1)")
                _ = try session.execute(
                    "INSERT INTO sesame_credentials VALUES ('facebook', '', '1', 'a', 'k', '\\x00', now(), false)")
            }
            let budget = PostgresRateLimitBudget(
                configuration: server.configuration, provider: .facebook, appID: "1",
                warning: { Issue.record("unexpected warning: \($0)") })
            try await budget.migrate()
            try await budget.migrate()
            let rows = try await admin.withSession { session throws(PostgresError) in
                try session.execute(
                    """
                    SELECT (SELECT version FROM sesame_schema_version WHERE component = 'credentials'),
                        (SELECT count(*) FROM sesame_credentials),
                        to_regclass('sesame_rate_limit_budget') IS NOT NULL
                    """)
            }
            #expect(rows.rows.first == ["\(PostgresCredentialStore.schemaVersion)", "1", "t"])
            #expect(PostgresCredentialStore.schemaVersion == 3)

            // The budget writes its row there.
            let clock = ManualClock(autoAdvance: true)
            let turn = try await budget.waitForTurn(on: clock)
            await budget.finish(turn, .throttled(RateLimitUsage(percentages: ["app": 100])))
            let stored = try await admin.withSession { session throws(PostgresError) in
                try session.execute(
                    "SELECT usage->'app'->>0, throttled_until > now() FROM sesame_rate_limit_budget WHERE app_id = '1'")
            }
            #expect(stored.rows.first == ["100", "t"])
        }
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameFacebook
import SesameFacebookEmulator
import SesamePostgres

// sesame-bench fleet-budget: Graph calls a second from eight workers against the emulator, each
// worker with a budget of its own (the shared budget off) beside each with a
// PostgresRateLimitBudget on one row (on), and on with no cache (a read of the row before
// every call), in the same run. See Benchmarks/README.md.

let fleetBudgetBenchmark = Benchmark(
    name: "fleet-budget",
    summary: "Graph calls/s, 8 workers: shared PostgreSQL rate-limit budget on vs off (needs a PostgreSQL)"
) { arguments in
    var connection = ""
    var seconds = 3.0
    var rounds = 3
    var workers = 8
    var slices = 6
    var json = false
    var budgetOnly = false
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--connection": connection = rest.popFirst() ?? ""
        case "--seconds": seconds = Double(rest.popFirst() ?? "") ?? seconds
        case "--rounds": rounds = max(1, Int(rest.popFirst() ?? "") ?? rounds)
        case "--workers": workers = max(1, Int(rest.popFirst() ?? "") ?? workers)
        case "--slices": slices = max(1, Int(rest.popFirst() ?? "") ?? slices)
        case "--json": json = true
        case "--budget-only": budgetOnly = true
        default:
            throw BenchmarkError(
                "unknown option \(argument); options: --connection LIBPQ-STRING --seconds N --rounds N --slices N --workers N "
                    + "--json --budget-only (the connection's password from ~/.pgpass or PGPASSWORD)")
        }
    }
    if budgetOnly {
        print(
            try await FleetBudgetBenchmark.budgetCost(
                configuration: PostgresConfiguration(connectionString: connection), seconds: seconds))
        return
    }
    let figures = try await FleetBudgetBenchmark.measure(
        configuration: PostgresConfiguration(connectionString: connection), seconds: seconds, rounds: rounds,
        slices: slices, workers: workers
    ) { StandardStreams.err(Data("fleet-budget: \($0)\n".utf8)) }
    print(json ? figures.json.jsonText : figures.table)
}

/// Graph calls a second with the fleet's shared rate-limit budget on and off.
///
/// `sesame-bench fleet` can call ``measure(configuration:seconds:rounds:slices:workers:progress:)`` with
/// its own server's configuration and print ``Figures/table`` (or fold ``Figures/json`` into its
/// own JSON).
struct FleetBudgetBenchmark {
    /// Calls a second in each round, per mode, and what they mean.
    struct Figures {
        var workers: Int
        /// Each worker its own `LocalRateLimitBudget`.
        var off: [Double] = []
        /// Each worker its own `PostgresRateLimitBudget` on one row, with its default cache.
        var on: [Double] = []
        /// The same with no cache: the row read before every call.
        var onUncached: [Double] = []

        static func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return 0 }
            return sorted.count % 2 == 1
                ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }

        /// Median calls a second with the budget on, over off (the goal: ≥ 0.9).
        var ratio: Double { Self.median(on) / max(Self.median(off), 1e-9) }
        var uncachedRatio: Double { Self.median(onUncached) / max(Self.median(off), 1e-9) }

        var table: String {
            func row(_ name: String, _ values: [Double]) -> String {
                let each = values.map { String(format: "%.0f", $0) }.joined(separator: ", ")
                return "  \(name.padding(toLength: 34, withPad: " ", startingAt: 0))"
                    + String(format: "%8.0f", Self.median(values)) + "   (rounds: \(each))"
            }
            let met = ratio >= 0.9 ? "met" : "NOT met"
            return """
                Graph GET /me, \(workers) workers, calls a second (median of the rounds):
                \(row("shared budget off (each its own)", off))
                \(row("shared budget on (PostgreSQL)", on))
                \(row("shared budget on, no cache", onUncached))
                  ratio on / off: \(String(format: "%.2f", ratio))× (goal ≥ 0.90×: \(met)); \
                no cache / off: \(String(format: "%.2f", uncachedRatio))×
                """
        }

        var json: JSONValue {
            .object([
                "workers": .int(workers), "off": .array(off.map { .number($0) }),
                "on": .array(on.map { .number($0) }), "onUncached": .array(onUncached.map { .number($0) }),
                "ratio": .number(ratio), "uncachedRatio": .number(uncachedRatio), "goal": .number(0.9),
            ])
        }
    }

    /// Runs the three loops in turn, `rounds` times, `seconds` each, against an emulator this
    /// starts, with the budget's row in the database `configuration` names (its tables are made
    /// when missing).
    ///
    /// - Throws: when the emulator or PostgreSQL cannot be started or reached, or a call fails.
    static func measure(
        configuration: PostgresConfiguration, seconds: Double, rounds: Int, slices: Int = 6, workers: Int,
        progress: (String) -> Void = { _ in }
    ) async throws -> Figures {
        var emulatorConfiguration = EmulatorConfiguration()
        emulatorConfiguration.hourlyCallsPerUser = 1_000_000_000
        let emulator = try Emulator(configuration: emulatorConfiguration)
        let endpoints = try await emulator.start()
        do {
            let figures = try await measure(
                emulator: emulator, endpoints: endpoints, configuration: configuration, seconds: seconds,
                rounds: rounds, slices: slices, workers: workers, progress: progress)
            await emulator.stop()
            return figures
        } catch {
            await emulator.stop()
            throw error
        }
    }

    private static func measure(
        emulator: Emulator, endpoints: EmulatorEndpoints, configuration: PostgresConfiguration, seconds: Double,
        rounds: Int, slices: Int, workers: Int, progress: (String) -> Void
    ) async throws -> Figures {
        let app = emulator.configuration.defaultApp
        let provider = FacebookProvider(
            appID: app.id, graphVersion: emulator.configuration.graphVersion, clientToken: app.clientToken,
            dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL)
        let token = try await emulator.issueToken(longLived: true)
        let transport = CurlTransport()
        let problems = Locked<[String]>([])
        func budgets(cacheLifetime: Duration) -> [any RateLimitBudget] {
            (0..<workers).map { _ in
                PostgresRateLimitBudget(
                    configuration: configuration, provider: .facebook, appID: app.id, cacheLifetime: cacheLifetime,
                    warning: { line in problems.withLock { $0.append(line) } })
            }
        }
        let on = budgets(cacheLifetime: .milliseconds(250))
        try await (on[0] as? PostgresRateLimitBudget)?.migrate()
        let modes: [(name: String, budgets: [any RateLimitBudget])] = [
            ("off", (0..<workers).map { _ in LocalRateLimitBudget() }), ("on", on),
            ("on, no cache", budgets(cacheLifetime: .zero)),
        ]
        let clients = modes.map { mode in
            mode.budgets.map {
                GraphClient(
                    provider: provider, transport: transport, accessToken: token,
                    governor: GraphUsageGovernor(budget: $0))
            }
        }
        var figures = Figures(workers: workers)
        for round in 1...rounds {
            // The modes take turns in slices, so that all of them see the host in the same seconds:
            // a shared machine's speed drifts within a minute.
            var tallies = Array(repeating: (calls: 0, nanoseconds: UInt64(0)), count: modes.count)
            for _ in 0..<slices {
                for index in modes.indices {
                    let tally = try await calls(clients[index], seconds: seconds / Double(slices))
                    tallies[index].calls += tally.calls
                    tallies[index].nanoseconds += tally.nanoseconds
                }
            }
            guard problems.withLock({ $0.isEmpty }) else {
                throw BenchmarkError(
                    "the shared budget fell back to this process's own: "
                        + problems.withLock { $0.joined(separator: " ") })
            }
            let rates = tallies.map { Double($0.calls) * 1e9 / Double(max($0.nanoseconds, 1)) }
            progress(
                "round \(round): "
                    + zip(modes, rates).map { "budget \($0.name) \(Int($1)) calls/s" }.joined(separator: ", "))
            figures.off.append(rates[0])
            figures.on.append(rates[1])
            figures.onUncached.append(rates[2])
        }
        return figures
    }

    /// A turn taken and finished with the same usage, in a loop for `seconds`, from a local
    /// budget and from a shared one whose row is cached: the budget's own cost a call.
    static func budgetCost(configuration: PostgresConfiguration, seconds: Double) async throws -> String {
        let shared = PostgresRateLimitBudget(configuration: configuration, provider: .facebook, appID: "bench")
        try await shared.migrate()
        let usage = RateLimitUsage(percentages: ["app": 3])
        let clock = ContinuousClock()
        var lines: [String] = []
        for (name, budget) in [("local", LocalRateLimitBudget() as any RateLimitBudget), ("shared", shared)] {
            var calls = 0
            let start = monotonicNanoseconds()
            let deadline = start + UInt64(seconds * 1e9)
            while monotonicNanoseconds() < deadline {
                let turn = try await budget.waitForTurn(on: clock)
                await budget.finish(turn, .answered(usage))
                calls += 1
            }
            let microseconds = Double(monotonicNanoseconds() - start) / 1e3 / Double(calls)
            lines.append("\(name): \(String(format: "%.2f", microseconds)) µs a turn")
        }
        return lines.joined(separator: "\n")
    }

    /// Each client calls `GET /me` in a loop of its own for `seconds`; the calls of all, and the
    /// time they took.
    private static func calls(
        _ clients: [GraphClient], seconds: Double
    ) async throws -> (calls: Int, nanoseconds: UInt64) {
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let calls = try await withThrowingTaskGroup(of: Int.self) { group in
            for client in clients {
                group.addTask {
                    var calls = 0
                    while monotonicNanoseconds() < deadline {
                        let me = try await client.get("me", parameters: ["fields": "id"])
                        guard me["id"] != nil else { throw BenchmarkError("GET /me had no id") }
                        calls += 1
                    }
                    return calls
                }
            }
            return try await group.reduce(0, +)
        }
        return (calls, monotonicNanoseconds() - start)
    }
}

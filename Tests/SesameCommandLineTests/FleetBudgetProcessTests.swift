import Foundation
import Sesame
import SesameFacebookEmulator
import SesameTestSupport
import Testing

/// Issue 48 item 8: `fleet-worker` processes share the app's Graph budget in PostgreSQL, so that
/// when Facebook throttles the app every worker holds back until the window is over.
@Suite("fleet-worker processes share the app's Graph budget in PostgreSQL", .serialized)
struct FleetBudgetProcessTests {
    @Test(
        "two fleet-worker processes against app-throttled: one throttled call per window; the second worker sends nothing in the first worker's window"
    )
    func twoWorkersOneThrottledCallPerWindow() async throws {
        try await Self.withSeededFleet(logins: 4) { server, emulator, cli in
            // Two refusals of the app's calls, then none; Facebook's regain time 0, so the
            // window is the pacing's shortest, `maxDelay` (10 s).
            let refusals = 2
            let scenario = try await emulator.activate(
                ScenarioSetting(.appThrottled, count: refusals, regainAccessMinutes: 0, path: "me/feed"))
            let window = RateLimitPacing().maxDelay.inSeconds

            // The first worker meets the first refusal; the second starts once it is in the
            // fleet's row, as a worker on another machine would.
            let first = try await cli.start("fleet-worker", ["--share", "1/2"])
            let firstWindowEnd = try await Self.throttledUntil(server, otherThan: nil)
            let second = try await cli.start("fleet-worker", ["--share", "2/2"])
            // The second refusal starts a window of its own, which the row records until its end
            // (on the database's clock, as the first).
            let secondWindowEnd = try await Self.throttledUntil(server, otherThan: firstWindowEnd)
            let results = [await first.finish(), await second.finish()]
            for (index, result) in results.enumerated() { cli.record("fleet-worker \(index + 1)/2", result) }

            let output = results.map(\.standardOutput).joined()
            let remaining = await emulator.activeScenarios().first { $0.id == scenario.id }?.remaining ?? 0
            #expect(remaining == 0, "throttled calls answered: \(refusals - remaining) of \(refusals)\n\(output)")
            #expect(firstWindowEnd != nil, "the first worker's refusal never reached the fleet's row")
            if let firstWindowEnd, let secondWindowEnd {
                // One refused call per window: the second was made when the first window was over.
                let secondRefusal = secondWindowEnd - window
                #expect(secondRefusal >= firstWindowEnd, "second refusal \(firstWindowEnd - secondRefusal) s early")
            } else {
                Issue.record("no second window was recorded\n\(output)")
            }
            // Each refusal cost one post; every other post went through after the windows.
            let posted = output.components(separatedBy: "\n").filter { $0.contains(": posted ") }.count
            let failed = output.components(separatedBy: "\n").filter { $0.contains("FAILED") }
            #expect(posted == 4 - refusals, "\(output)")
            #expect(failed.count == refusals && failed.allSatisfy { $0.contains("throttling") }, "\(output)")
            for result in results { #expect(!result.standardError.contains("rate-limit budget"), "\(result)") }
        }
    }

    @Test(
        "sesame --storage postgres status meets app-throttled: the refusal goes into the fleet's budget, and another sesame's status waits the window out instead of calling"
    )
    func sesameStatusSharesTheBudget() async throws {
        try await Self.withSeededFleet(logins: 1) { server, emulator, cli in
            let refusals = 2
            let scenario = try await emulator.activate(
                ScenarioSetting(.appThrottled, count: refusals, regainAccessMinutes: 0, path: "me"))
            func refused() async -> Int {
                refusals - (await emulator.activeScenarios().first { $0.id == scenario.id }?.remaining ?? 0)
            }

            let first = try await cli.run("sesame", ["status"])
            #expect(await refused() == 1, "\(first.standardOutput)\(first.standardError)")
            let recorded = try await Self.throttledUntil(server, otherThan: nil)
            #expect(recorded != nil, "sesame did not write the refusal to the budget")
            // The window (10 s) is longer than this status waits: it makes no call.
            let second = try await cli.run("sesame", ["status", "--timeout", "2"])
            #expect(await refused() == 1, "\(second.standardOutput)\(second.standardError)")
            #expect(second.standardOutput.contains("could not verify"), "\(second.standardOutput)")
        }
    }

    /// A real PostgreSQL, the Facebook emulator in this process, and `logins` of its test users
    /// stored by `fleet-worker --seed`; `body` gets a harness whose programs reach both
    /// (`SESAME_STORAGE=postgres`).
    static func withSeededFleet(
        logins: Int, _ body: (PostgresServer, Emulator, CLIHarness) async throws -> Void
    ) async throws {
        try await withPostgres { server in
            let configuration = EmulatorConfiguration()
            let emulator = try Emulator(configuration: configuration)
            try await withStarted({ try await emulator.start() }, stop: { _ in await emulator.stop() }) { endpoints in
                let key = "fleet:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
                let environment = FleetProcessTests.Fleet.environment(server, key: key).merging([
                    "SESAME_FACEBOOK_APP_ID": configuration.defaultApp.id,
                    "SESAME_FACEBOOK_GRAPH_URL": endpoints.graphURL.absoluteString,
                ]) { $1 }
                let cli = try CLIHarness(storage: "postgres", environment: environment)
                let seeded = try await cli.run("fleet-worker", ["--seed", String(logins)])
                try #require(seeded.status == 0, "\(seeded.standardError)")
                try await body(server, emulator, cli)
            }
        }
    }

    /// The end of the throttled window the app's row in `sesame_rate_limit_budget` records, in
    /// seconds since 1970 on the database's clock, once it is there and not `previous`; `nil`
    /// when that did not happen within a minute.
    static func throttledUntil(_ server: PostgresServer, otherThan previous: Double?) async throws -> Double? {
        let query = "SELECT extract(epoch FROM throttled_until)::float8 FROM sesame_rate_limit_budget"
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let text = try await FleetProcessTests.sql(server, query).trimmingCharacters(in: .whitespacesAndNewlines)
            if let until = Double(text), until != previous { return until }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}

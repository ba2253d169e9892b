import Foundation
import Sesame
import SesameOIDCEmulator
import SesamePostgres
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sesame --storage postgres` processes on four machines waiting behind one that renews a login
/// at a hung issuer: as behind a lock file (``RenewalWaitProcessTests``), they wait one request
/// timeout and a margin at most, and the holder's failure is shared with them through PostgreSQL.
@Suite("fleet: renewal waiters behind a hung holder in PostgreSQL", .serialized)
struct FleetRenewalWaitProcessTests {
    /// How much slower processes run: 2 under a sanitizer (`scripts/sanitize` sets its options in
    /// the environment), else 1; for the wall-time bounds only.
    static let slowdown: Double =
        ["TSAN_OPTIONS", "ASAN_OPTIONS"].contains { ProcessInfo.processInfo.environment[$0] != nil } ? 2 : 1

    typealias Fleet = FleetProcessTests.Fleet
    typealias Travel = TimeTravelProcessTests

    @Test(
        "4 machines behind a stopped issuer with --timeout 3: done within about one timeout, all report the holder's failure, the login intact"
    )
    func sharedFailure() async throws {
        try await withPostgres { server in
            try await withEmulatorChild(["oidc"]) { banner, emulator in
                let issuer = try #require(
                    banner.firstMatch(of: #/Issuer:\s+(http://127\.0\.0\.1:\d+)\n/#).map { String($0.1) })
                var provider = Travel.RotatingProvider(
                    kind: .oidc, base: issuer, accessTokenLifetime: 3600,
                    refreshTokenLifetime: OIDCEmulator.defaultRefreshTokenLifetime, environment: [:],
                    loginArguments: ["--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID])
                let fleet = try Fleet(server)
                try await Travel.logIn(fleet.machines[0], to: provider)
                provider.environment["SESAME_OIDC_ISSUER"] = issuer
                provider.environment["SESAME_OIDC_CLIENT_ID"] = OIDCEmulator.defaultClientID
                // Every machine uses the login once, so that it knows the issuer's endpoints without asking.
                let warm = try await fleet.runAtOnce(1, ["token", provider.name], environment: provider.environment)
                try #require(warm.allSatisfy { $0.status == 0 }, "\(Travel.failures(warm))")
                let login = try await Travel.storedLogin(fleet.machines[0])
                try await Travel.advance(
                    fleet.machines[0], provider, by: try #require(login.token.expirationDate).timeIntervalSinceNow + 2)
                let aged = try await Travel.storedLogin(fleet.machines[0])
                // The request the holder gives up on is answered once the issuer resumes: it fails,
                // so that no refresh token is rotated into an answer nobody reads.
                _ = try await Travel.admin(
                    provider, .post, "scenarios", ["scenario": .string("server-error"), "count": .number(1)])
                let timeout = 3.0

                emulator.terminate(signal: SIGSTOP)
                let clock = ContinuousClock()
                let started = clock.now
                let results: [ProcessResult]
                do {
                    results = try await fleet.runAtOnce(
                        1, ["token", provider.name, "--timeout", "\(Int(timeout))"], environment: provider.environment)
                } catch {
                    emulator.terminate(signal: SIGCONT)
                    throw error
                }
                let wallTime = started.duration(to: clock.now)
                emulator.terminate(signal: SIGCONT)
                print("fleet renewal waiters: \(results.count) machines behind a stopped issuer in \(wallTime)")

                #expect(results.allSatisfy { $0.status == 75 }, "exit statuses: \(results.map(\.status))")
                // One process met the timeout; the others were told of it instead of meeting it again.
                let shared = results.filter { $0.standardError.contains("Another process's renewal of this login met") }
                #expect(shared.count == results.count - 1, "\(results.map(\.standardError))")
                let holder = try #require(results.first { !shared.map(\.standardError).contains($0.standardError) })
                let sentence = try #require(holder.standardError.split(separator: ".").first.map(String.init))
                #expect(results.allSatisfy { $0.standardError.contains(sentence) }, "\(results.map(\.standardError))")
                // In turn, each would have waited a timeout of its own: four of them. (Under a
                // sanitizer every process runs several times slower; the shared failure above is what
                // tells the two apart there.)
                #expect(wallTime < .seconds(timeout * 3 * Self.slowdown), "\(wallTime)")
                let after = try await Travel.storedLogin(fleet.machines[0])
                #expect(after.token == aged.token && !after.needsLogin)
            }
        }
    }

    @Test(
        "4 machines behind a holder that does not finish, with --timeout 2: each gives up after the timeout and 5 s, not PostgreSQL's lock wait"
    )
    func waitLimit() async throws {
        try await FleetProcessTests.withFleet { fleet, provider in
            let login = try await Travel.storedLogin(fleet.machines[0])
            let expiry = try #require(login.token.expirationDate)
            try await Travel.advance(fleet.machines[0], provider, by: expiry.timeIntervalSinceNow + 2)
            let aged = try await Travel.storedLogin(fleet.machines[0])
            let before = try await Travel.stats(provider)

            // A holder that hangs: psql holding the login's advisory lock, idle until it is killed.
            let lockID = PostgresRefreshLock.lockID(for: login.key)
            let holder = try await FleetProcessTests.holdLock(lockID, fleet)
            let timeout = 2.0
            let outcome: Result<(results: [ProcessResult], wallTime: Duration), any Error>
            do {
                try await FleetProcessTests.waitForLock(lockID, granted: 1, waiting: 0, fleet)
                let clock = ContinuousClock()
                let started = clock.now
                let results = try await fleet.runAtOnce(
                    1, ["token", provider.name, "--timeout", "\(Int(timeout))"], environment: provider.environment)
                outcome = .success((results, started.duration(to: clock.now)))
            } catch {
                outcome = .failure(error)
            }
            holder.kill()
            _ = await holder.finish()
            let (results, wallTime) = try outcome.get()
            print("fleet renewal waiters: \(results.count) machines behind a hung holder gave up in \(wallTime)")

            #expect(results.allSatisfy { $0.status == 75 }, "exit statuses: \(results.map(\.status))")
            #expect(
                results.allSatisfy { $0.standardError.contains("renewing this login for over \(Int(timeout) + 5) s") },
                "\(results.map(\.standardError))")
            // The wait limit, plus the processes' start on a loaded machine; PostgreSQL's own is 60 s.
            #expect(wallTime < .seconds((timeout + 5 + 10) * Self.slowdown), "\(wallTime)")
            #expect(try await Travel.stats(provider).grants == before.grants, "renewed under a held lock")
            let after = try await Travel.storedLogin(fleet.machines[0])
            #expect(after.token == aged.token && !after.needsLogin)
        }
    }
}

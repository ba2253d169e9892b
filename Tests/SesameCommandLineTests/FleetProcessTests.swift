import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesamePostgres
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 41: `sesame` processes on four "machines" (four homes, nothing shared but a real
/// PostgreSQL they reach over TCP) share one login: one refresh per expiry however many run at
/// once, a holder that dies releases the lock, a restarted server costs clear errors and nothing
/// else.
@Suite("fleet: sesame processes on four machines sharing a login in PostgreSQL", .serialized)
struct FleetProcessTests {
    typealias Provider = TimeTravelProcessTests.RotatingProvider

    /// Four homes (`HOME`, XDG directories, lock files: nothing shared) using one database.
    struct Fleet {
        var machines: [CLIHarness]
        var store: PostgresCredentialStore
        var server: PostgresServer
        var key: String
        var provider: Provider?

        /// What a program needs to reach the database with `key`.
        static func environment(_ server: PostgresServer, key: String) -> [String: String] {
            [
                "PGHOST": "127.0.0.1", "PGPORT": String(server.port), "PGUSER": "postgres", "PGDATABASE": "postgres",
                "PGCONNECT_TIMEOUT": "5", "SESAME_POSTGRES_KEY": key,
            ]
        }

        init(_ server: PostgresServer, machines count: Int = 4) throws {
            let key = "fleet:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let store = PostgresCredentialStore(
                configuration: server.configuration, keys: try CredentialEncryptionKeys(text: key, source: "the test"))
            machines = try (0..<count).map { _ in
                try CLIHarness(storage: "postgres", environment: Self.environment(server, key: key), store: store)
            }
            self.store = store
            self.server = server
            self.key = key
        }

        /// `perMachine` `sesame ARGUMENTS` processes on every machine, all started at once.
        func runAtOnce(
            _ perMachine: Int, _ arguments: [String], environment: [String: String]
        ) async throws -> [ProcessResult] {
            try await withThrowingTaskGroup(of: ProcessResult.self) { group in
                for machine in machines {
                    for _ in 0..<perMachine {
                        group.addTask { try await machine.run("sesame", arguments, environment: environment) }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
    }

    /// An OpenID emulator with rotating refresh tokens, a PostgreSQL server, a fleet, and a login
    /// made on its first machine.
    static func withFleet(_ body: (Fleet, Provider) async throws -> Void) async throws {
        try await withPostgres { server in
            try await TimeTravelProcessTests.withProvider(.oidc) { provider in
                var fleet = try Fleet(server)
                try await TimeTravelProcessTests.logIn(fleet.machines[0], to: provider)
                // The other machines are told the issuer as a fleet's would be: by its settings.
                var provider = provider
                provider.environment["SESAME_OIDC_ISSUER"] = provider.base
                provider.environment["SESAME_OIDC_CLIENT_ID"] = OIDCEmulator.defaultClientID
                fleet.provider = provider
                try await body(fleet, provider)
            }
        }
    }

    @Test(
        "4 machines × 10 sesame token processes, 3 expiries: exactly one refresh grant each, every process prints the stored token, no family revoked"
    )
    func fourMachineStorm() async throws {
        try await Self.withFleet { fleet, provider in
            let first = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
            var secrets = TimeTravelProcessTests.secrets(of: first)
            for round in 1...3 {
                let login = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
                let expiry = try #require(login.token.expirationDate)
                let before = try await TimeTravelProcessTests.stats(provider)
                try await TimeTravelProcessTests.advance(
                    fleet.machines[0], provider, by: expiry.timeIntervalSinceNow + 2)
                let clock = ContinuousClock()
                let started = clock.now
                let results = try await fleet.runAtOnce(
                    10, ["token", provider.name], environment: provider.environment)
                print("fleet: round \(round), 40 processes on 4 machines in \(started.duration(to: clock.now))")

                let after = try await TimeTravelProcessTests.stats(provider)
                #expect(after.grants - before.grants == 1, "round \(round): \(after)")
                #expect(after.refused == 0 && after.revokedFamilies == 0, "round \(round): \(after)")
                #expect(
                    results.allSatisfy { $0.status == 0 }, "round \(round): \(TimeTravelProcessTests.failures(results))"
                )
                let stored = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
                #expect(!stored.needsLogin)
                #expect(stored.token.refreshToken != login.token.refreshToken, "round \(round): not rotated")
                let printedStored = TimeTravelProcessTests.allPrinted(stored.token.tokenString, results)
                #expect(printedStored, "round \(round): \(Set(results.map(\.standardOutput)).count) different outputs")
                secrets += TimeTravelProcessTests.secrets(of: stored)
                TimeTravelProcessTests.expectQuietErrors(results, secrets)
            }
            for machine in fleet.machines { machine.expectNoTokenLeaks(secrets) }
        }
    }

    /// How a lock holder goes away in ``holderDies(_:)``.
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case killed = "kill -9 of the holding process"
        case terminated = "pg_terminate_backend of its connection"
        var testDescription: String { rawValue }
    }

    @Test(
        "a holder of the login's lock goes away while 20 processes wait on it: one of them renews, all print the token, nothing is lost",
        arguments: Ending.allCases)
    func holderDies(_ ending: Ending) async throws {
        try await Self.withFleet { fleet, provider in
            let login = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
            let expiry = try #require(login.token.expirationDate)
            try await TimeTravelProcessTests.advance(fleet.machines[0], provider, by: expiry.timeIntervalSinceNow + 2)
            let before = try await TimeTravelProcessTests.stats(provider)

            // A worker that took the lock and then hangs (or dies) while its connection is idle, as
            // a renewing worker's lock connection is: psql holding the same advisory lock, then
            // waiting in \watch (no statement running) until it is killed or its connection ended.
            let lockID = PostgresRefreshLock.lockID(for: login.key)
            let holder = try await Self.holdLock(lockID, fleet)
            try await Self.waitForLock(lockID, granted: 1, waiting: 0, fleet)

            async let storm = fleet.runAtOnce(5, ["token", provider.name], environment: provider.environment)
            try await Self.waitForLock(lockID, granted: 1, waiting: 20, fleet)
            #expect(
                try await TimeTravelProcessTests.stats(provider).grants == before.grants, "renewed under a held lock")
            let clock = ContinuousClock()
            let released = clock.now
            switch ending {
            case .killed:
                holder.kill()
            case .terminated:
                try await Self.sql(
                    fleet,
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        + "AND ((classid::bigint << 32) | objid::bigint) = \(lockID)")
            }
            let results = try await storm
            let waited = released.duration(to: clock.now)
            print("fleet: \(ending.rawValue): 20 waiting processes done \(waited) later")
            holder.kill()  // a psql whose connection was ended would wait out its \watch
            _ = await holder.finish()

            let after = try await TimeTravelProcessTests.stats(provider)
            #expect(after.grants - before.grants == 1, "\(after)")
            #expect(after.refused == 0 && after.revokedFamilies == 0, "\(after)")
            #expect(results.allSatisfy { $0.status == 0 }, "\(TimeTravelProcessTests.failures(results))")
            let stored = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
            #expect(TimeTravelProcessTests.allPrinted(stored.token.tokenString, results))
            #expect(waited < .seconds(30))
        }
    }

    @Test(
        "PostgreSQL restarted while the lock's holder waits on a stopped issuer: the second machine waits for that renewal instead of sending the same refresh token; no family revoked, the renewed login saved and working"
    )
    func restartWhileRenewing() async throws {
        try await withPostgres { server in
            try await withEmulatorChild(["oidc"]) { banner, emulator in
                let issuer = try #require(
                    banner.firstMatch(of: #/Issuer:\s+(http://127\.0\.0\.1:\d+)\n/#).map { String($0.1) })
                var provider = Provider(
                    kind: .oidc, base: issuer, accessTokenLifetime: 3600,
                    refreshTokenLifetime: OIDCEmulator.defaultRefreshTokenLifetime, environment: [:],
                    loginArguments: ["--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID])
                let fleet = try Fleet(server, machines: 2)
                try await TimeTravelProcessTests.logIn(fleet.machines[0], to: provider)
                provider.environment["SESAME_OIDC_ISSUER"] = issuer
                provider.environment["SESAME_OIDC_CLIENT_ID"] = OIDCEmulator.defaultClientID
                // Machine 2 uses the login once, so that it knows the issuer's endpoints without asking.
                let warm = try await fleet.machines[1].run(
                    "sesame", ["token", provider.name], environment: provider.environment)
                try #require(warm.status == 0, "\(warm.standardError)")
                let login = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
                let expiry = try #require(login.token.expirationDate)
                try await TimeTravelProcessTests.advance(
                    fleet.machines[0], provider, by: expiry.timeIntervalSinceNow + 2)
                let before = try await TimeTravelProcessTests.stats(provider)
                let lockID = PostgresRefreshLock.lockID(for: login.key)

                // The issuer stops answering; machine 1 takes the lock and waits on it.
                emulator.terminate(signal: SIGSTOP)
                let first = try await fleet.machines[0].start(
                    "sesame", ["token", provider.name], environment: provider.environment)
                var second: LiveProcess?
                let results: [ProcessResult]
                do {
                    try await Self.waitForLock(lockID, granted: 1, waiting: 0, fleet)
                    print("fleet: machine 1 holds the lock and waits on the stopped issuer")
                    // The restart drops machine 1's lock while it still waits on the issuer.
                    try await fleet.server.stopServer()
                    try await fleet.server.startServer()
                    second = try await fleet.machines[1].start(
                        "sesame", ["token", provider.name], environment: provider.environment)
                    // Machine 2 holds the lock on the restarted server and has read the row since.
                    try await Self.waitForLock(lockID, granted: 1, waiting: 0, fleet)
                    try await Self.waitForReadUnderLock(lockID, fleet)
                    emulator.terminate(signal: SIGCONT)
                    results = [await first.finish(), await second!.finish()]
                } catch {
                    emulator.terminate(signal: SIGCONT)
                    first.terminate()
                    second?.terminate()
                    let ended = [await first.finish(), await second?.finish()].compactMap { $0 }
                    Issue.record("the processes said: \(ended.map { "exit \($0.status): \($0.standardError)" })")
                    throw error
                }
                let after = try await TimeTravelProcessTests.stats(provider)
                #expect(after.revokedFamilies == 0 && after.refused == 0, "\(after)")
                #expect(after.grants - before.grants == 1, "\(after)")
                #expect(results.allSatisfy { $0.status == 0 }, "\(TimeTravelProcessTests.failures(results))")
                let stored = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
                #expect(!stored.needsLogin)
                #expect(stored.token.refreshToken != login.token.refreshToken, "not rotated")
                #expect(TimeTravelProcessTests.allPrinted(stored.token.tokenString, results))

                // The later use prints the stored token, and the issuer takes it.
                let later = try await fleet.machines[1].run(
                    "sesame", ["token", provider.name], environment: provider.environment)
                #expect(later.status == 0, "\(later.standardError)")
                #expect(later.standardOutput == stored.token.tokenString + "\n")
                let userinfo = try await CurlTransport().send(
                    HTTPRequest(
                        method: .get, url: try #require(URL(string: issuer + "/userinfo")),
                        headers: ["Authorization": "Bearer " + stored.token.tokenString]))
                #expect(userinfo.status == 200, "userinfo refused the stored token: \(userinfo.status)")
                TimeTravelProcessTests.expectQuietErrors(
                    results + [later],
                    TimeTravelProcessTests.secrets(of: login) + TimeTravelProcessTests.secrets(of: stored))
            }
        }
    }

    @Test(
        "PostgreSQL restarted during a storm of reads: clear errors (69) while it is down, every process done in bounded time, all well after, nothing lost"
    )
    func restartDuringStorm() async throws {
        try await Self.withFleet { fleet, provider in
            let login = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
            async let storm = fleet.runAtOnce(10, ["token", provider.name], environment: provider.environment)
            try await fleet.server.stopServer()
            let down = try await fleet.runAtOnce(1, ["token", provider.name], environment: provider.environment)
            try await fleet.server.startServer()
            let during = try await storm
            for result in down + during where result.status != 0 {
                #expect(result.status == 69, "exit \(result.status): \(result.standardError)")
                #expect(result.standardError.contains("PostgreSQL"), "\(result.standardError)")
            }
            #expect(down.allSatisfy { $0.status == 69 }, "\(TimeTravelProcessTests.failures(down))")
            let after = try await fleet.runAtOnce(5, ["token", provider.name], environment: provider.environment)
            #expect(after.allSatisfy { $0.status == 0 }, "\(TimeTravelProcessTests.failures(after))")
            #expect(TimeTravelProcessTests.allPrinted(login.token.tokenString, after))
            let stored = try await TimeTravelProcessTests.storedLogin(fleet.machines[0])
            #expect(stored.token.tokenString == login.token.tokenString && !stored.needsLogin)
            TimeTravelProcessTests.expectQuietErrors(down + during + after, TimeTravelProcessTests.secrets(of: login))
        }
    }

    @Test(
        "wrong key, no key, wrong password, unreachable server, newer tables: a clear error each, with the table's exit status, nothing changed"
    )
    func faults() async throws {
        try await withPostgres(password: "right-password") { server in
            let key = "k1:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let other = "k1:" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            var environment = Fleet.environment(server, key: key)
            environment["PGPASSWORD"] = "right-password"
            let store = PostgresCredentialStore(
                configuration: PostgresConfiguration(
                    connectionString: server.connectionString + " password=right-password"),
                keys: try CredentialEncryptionKeys(text: key, source: "the test"))
            try await store.migrate()
            let login = StoredCredential(
                key: CredentialKey(provider: "github", appID: "github-emulator.localhost", account: "default"),
                token: AccessToken(
                    tokenString: "gho_fleet_secret_token", provider: "github", appID: "github-emulator.localhost"))
            try await store.save(login)
            let cli = try CLIHarness(storage: "postgres", environment: environment, store: store)

            func expect(
                _ status: Int32, _ saying: String, _ change: [String: String],
                _ arguments: [String] = ["token", "github"]
            ) async throws {
                let result = try await cli.run("sesame", arguments, environment: change)
                #expect(
                    result.status == status, "\(change.keys.sorted()): exit \(result.status): \(result.standardError)")
                #expect(result.standardError.contains(saying), "\(change.keys.sorted()): \(result.standardError)")
                #expect(result.standardOutput.isEmpty)
                #expect(!result.standardError.contains("gho_fleet_secret_token"))
                #expect(
                    !result.standardError.contains("right-password") && !result.standardError.contains("wrong-password")
                )
            }
            try await expect(78, "does not decrypt with the key \"k1\"", ["SESAME_POSTGRES_KEY": other])
            try await expect(78, "SESAME_POSTGRES_KEY_FILE", ["SESAME_POSTGRES_KEY": ""])
            try await expect(78, "is not Base64", ["SESAME_POSTGRES_KEY": "k1:not-base64!"])
            try await expect(78, "refused the login", ["PGPASSWORD": "wrong-password"])
            try await expect(69, "could not connect to PostgreSQL", ["PGPORT": String(try Sockets.unusedPort())])
            let status = try await cli.run("sesame", ["status"], environment: ["SESAME_POSTGRES_KEY": other])
            #expect(status.status == 77, "\(status.standardError)")
            #expect(status.standardOutput.contains("an unreadable stored entry (account 'default')"))
            #expect(status.standardOutput.contains("does not decrypt with the key \"k1\""))

            let ok = try await cli.run("sesame", ["token", "github"])
            #expect(ok.status == 0 && ok.standardOutput == "gho_fleet_secret_token\n", "\(ok.standardError)")

            try await Self.sql(
                server, password: "right-password",
                "UPDATE sesame_schema_version SET version = 99 WHERE component = 'credentials'")
            try await expect(69, "made by a newer Sesame", [:])
            try await Self.sql(
                server, password: "right-password",
                "UPDATE sesame_schema_version SET version = 1 WHERE component = 'credentials'")
            #expect(try await store.load(login.key)?.token.tokenString == "gho_fleet_secret_token")
        }
    }

    @Test("doctor names the one altered row of three under a key, and does not blame the key")
    func doctorAlteredRow() async throws {
        try await withPostgres { server in
            let fleet = try Fleet(server, machines: 1)
            try await fleet.store.migrate()
            for account in ["alice", "bob", "carol"] {
                try await fleet.store.save(
                    StoredCredential(
                        key: CredentialKey(provider: "github", appID: "github-emulator.localhost", account: account),
                        token: AccessToken(
                            tokenString: "gho_\(account)_secret", provider: "github", appID: "github-emulator.localhost"
                        )))
            }
            try await Self.sql(
                fleet,
                "UPDATE sesame_credentials SET sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1) "
                    + "WHERE account = 'bob'")
            let doctor = try await fleet.machines[0].run("sesame", ["doctor"])
            let keyID = String(fleet.key.prefix { $0 != ":" })
            #expect(
                doctor.standardOutput.contains("1 of 3 logins encrypted with \"\(keyID)\" does not decrypt with it"),
                "\(doctor.standardOutput)")
            #expect(doctor.standardOutput.contains("— bob"), "\(doctor.standardOutput)")
            #expect(!doctor.standardOutput.contains("— alice") && !doctor.standardOutput.contains("— carol"))
            #expect(!doctor.standardOutput.contains("not decrypt with the key of that id"), "\(doctor.standardOutput)")
            #expect(!(doctor.standardOutput + doctor.standardError).contains("_secret"))
        }
    }

    // MARK: Helpers

    /// Runs `sql` with psql; its output.
    @discardableResult
    static func sql(_ server: PostgresServer, password: String? = nil, _ sql: String) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["PGPASSWORD"] = password
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/psql"),
            ["-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", server.connectionString, "-c", sql], environment: environment)
        try #require(result.status == 0, "psql: \(result.standardError)")
        return result.standardOutput
    }

    /// psql taking the advisory lock `id`, then idle in `\watch` (no statement running, as a
    /// renewing worker's lock connection is) until it is killed or its connection ended.
    static func holdLock(_ id: Int64, _ fleet: Fleet) async throws -> LiveProcess {
        let script = fleet.machines[0].root.appending(path: "hold.sql")
        try Data("SELECT pg_advisory_lock(\(id));\nSELECT 'holding' \\watch 600\n".utf8).write(to: script)
        return try await LiveProcess(
            URL(fileURLWithPath: "/usr/bin/psql"), ["-X", "-v", "ON_ERROR_STOP=1", "-f", script.path],
            environment: Fleet.environment(fleet.server, key: fleet.key), input: Data())
    }

    @discardableResult
    static func sql(_ fleet: Fleet, _ sql: String) async throws -> String {
        try await Self.sql(fleet.server, sql)
    }

    /// Waits until a connection other than the one holding the advisory lock `id` has read a
    /// login's row (the store's read, or its read for a renewal) since the lock was granted.
    static func waitForReadUnderLock(_ id: Int64, _ fleet: Fleet) async throws {
        let query = """
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity holder ON holder.pid = l.pid,
                pg_stat_activity reader
            WHERE l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = \(id)
                AND reader.pid <> holder.pid AND reader.query LIKE 'SELECT key_id, sealed%'
                AND reader.query_start > holder.state_change
            """
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if try await sql(fleet, query).trimmingCharacters(in: .whitespacesAndNewlines) != "0" { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no connection read the login's row while the lock \(id) was held")
        throw CancellationError()
    }

    /// Waits until the advisory lock `id` has `granted` holders and `waiting` waiters.
    static func waitForLock(_ id: Int64, granted: Int, waiting: Int, _ fleet: Fleet) async throws {
        let query =
            "SELECT count(*) FILTER (WHERE granted) || ' ' || count(*) FILTER (WHERE NOT granted) FROM pg_locks "
            + "WHERE locktype = 'advisory' AND ((classid::bigint << 32) | objid::bigint) = \(id)"
        let wanted = "\(granted) \(waiting)"
        var seen = ""
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            seen = try await sql(fleet, query).trimmingCharacters(in: .whitespacesAndNewlines)
            if seen == wanted { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the lock never had \(wanted) (granted, waiting); last seen: \(seen)")
        throw CancellationError()
    }
}

import Foundation
import Sesame
import SesamePostgres
import SesameTestSupport
import Testing

/// A provider's token endpoint as the fleet sees it: it counts the renewals and rotates the
/// refresh token, refusing one that was already used.
private actor CountingProvider {
    private(set) var renewals = 0
    private(set) var refused = 0
    private var current = "refresh-0"

    func renew(_ token: AccessToken) throws -> AccessToken {
        guard token.refreshToken == current else {
            refused += 1
            throw AuthError(
                category: .authenticationReopenSession, message: "invalid_grant: used before", code: 400,
                provider: token.provider)
        }
        renewals += 1
        current = "refresh-\(renewals)"
        var renewed = token
        renewed.tokenString = "access-\(renewals)"
        renewed.refreshToken = current
        renewed.expirationDate = Date().addingTimeInterval(3600)
        return renewed
    }
}

/// `PostgresRefreshLock` against a real PostgreSQL that each test starts and stops.
@Suite("PostgresRefreshLock: one renewal across a fleet")
struct PostgresRefreshLockTests {
    static let key = CredentialKey(provider: "example", appID: "app-1", account: "default")

    /// A holder of `key`'s lock on its own connection, its body waiting at `gate`; returns once
    /// it holds the lock. Open the gate and await the task to end it.
    static func holding(_ server: PostgresServer, until gate: Gate) async -> Task<Void, any Error> {
        let ended = Locked(false)
        let holding = Task {
            defer { ended.withLock { $0 = true } }
            try await PostgresRefreshLock(configuration: server.configuration).withRefreshLock(for: key) {
                await gate.wait()
            }
        }
        // A holder that fails before the gate (no server) ends the wait too; the test then fails
        // on what it checks next.
        while gate.waitingCount == 0, !ended.withLock({ $0 }) { await Task.yield() }
        return holding
    }

    @Test("twenty sessions on four machines' locks and stores renew an expired login once, and all use it")
    func fleetRenewsOnce() async throws {
        try await withPostgres { server in
            let seeded = try await PostgresCredentialStoreTests.store(server)
            let expired = AccessToken(
                tokenString: "access-0", provider: "example", appID: "app-1", userID: "user-1",
                expirationDate: Date().addingTimeInterval(-60), refreshToken: "refresh-0")
            try await seeded.save(StoredCredential(key: Self.key, token: expired))
            let provider = CountingProvider()
            // A "machine": a lock and a store of its own, sharing nothing but the server.
            let machines = (0..<4).map { _ in
                (
                    PostgresRefreshLock(configuration: server.configuration),
                    PostgresCredentialStore(configuration: server.configuration, key: PostgresCredentialStoreTests.key)
                )
            }
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<20 {
                    let (lock, store) = machines[index % 4]
                    group.addTask {
                        let session = Session(
                            provider: "example", appID: "app-1", store: store, refreshLocking: .service(lock),
                            renewer: .refreshToken { try await provider.renew($0) })
                        _ = try await session.open(allowLoginUI: false)
                        return try await session.validToken().tokenString
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(await provider.renewals == 1)
            #expect(await provider.refused == 0)
            #expect(tokens == Array(repeating: "access-1", count: 20))
            #expect(try await seeded.load(Self.key)?.token.tokenString == "access-1")
        }
    }

    @Test("one holder at a time for a key; another key's lock is had meanwhile")
    func oneHolderPerKey() async throws {
        try await withPostgres { server in
            let lock = PostgresRefreshLock(configuration: server.configuration)
            let holders = Locked((now: 0, most: 0))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await lock.withRefreshLock(for: Self.key) {
                            holders.withLock {
                                $0.now += 1; $0.most = max($0.most, $0.now)
                            }
                            for _ in 0..<20 { await Task.yield() }
                            holders.withLock { $0.now -= 1 }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(holders.withLock { $0.most } == 1)

            let gate = Gate()
            let holding = Task { try await lock.withRefreshLock(for: Self.key) { await gate.wait() } }
            while gate.waitingCount == 0 { await Task.yield() }
            let other = Self.key.with(account: "other")
            let ran = try await lock.withRefreshLock(for: other) { true }
            #expect(ran)
            gate.open()
            try await holding.value
        }
    }

    @Test("a wait longer than the store's statement timeout is bounded by the wait limit, not cut short")
    func waitOutlastsStatementTimeout() async throws {
        try await withPostgres { server in
            var configuration = server.configuration
            configuration.statementTimeout = .milliseconds(300)
            let lock = PostgresRefreshLock(configuration: configuration, waitLimit: .seconds(60))
            let gate = Gate()
            let holding = Task { try await lock.withRefreshLock(for: Self.key) { await gate.wait() } }
            while gate.waitingCount == 0 { await Task.yield() }
            let waiter = Task {
                try await PostgresRefreshLock(configuration: configuration).withRefreshLock(for: Self.key) { 1 }
            }
            // The waiter is queued on the server; it must still be waiting after the statement
            // timeout has passed three times over.
            let admin = PostgresConnection(configuration: server.configuration)
            var waiting = false
            while !waiting {
                let rows = try await admin.withSession { session throws(PostgresError) in
                    try session.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                }
                waiting = rows.rows.first?.first == "1"
                if !waiting { await Task.yield() }
            }
            try await Task.sleep(for: .milliseconds(900))
            gate.open()
            try await holding.value
            #expect(try await waiter.value == 1)
        }
    }

    @Test("a holder whose connection the server ends has released the lock; the next holder goes on")
    func holderThatDiesReleases() async throws {
        try await withPostgres { server in
            let gate = Gate()
            let holding = await Self.holding(server, until: gate)
            let admin = PostgresConnection(configuration: server.configuration)
            let ended = try await admin.withSession { session throws(PostgresError) in
                try session.execute(
                    "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_locks "
                        + "WHERE locktype = 'advisory' AND granted")
            }
            #expect(ended.rows.first?.first == "1")
            // The first holder's body is still at the gate: only its lost connection let this in.
            let next = try await PostgresRefreshLock(configuration: server.configuration).withRefreshLock(
                for: Self.key
            ) { gate.waitingCount }
            #expect(next == 1)
            gate.open()
            try await holding.value
        }
    }

    @Test("a wait past the limit fails as timed out, saying so, and runs nothing")
    func waitLimit() async throws {
        try await withPostgres { server in
            let gate = Gate()
            let holding = await Self.holding(server, until: gate)
            let impatient = PostgresRefreshLock(configuration: server.configuration, waitLimit: .milliseconds(200))
            let ran = Locked(false)
            let error = await #expect(throws: CredentialStoreError.self) {
                try await impatient.withRefreshLock(for: Self.key) { ran.withLock { $0 = true } }
            }
            #expect(error?.kind == .timedOut)
            #expect(error?.message.contains("longer than") == true, "\(String(describing: error))")
            #expect(!ran.withLock { $0 })
            gate.open()
            try await holding.value
        }
    }

    @Test("an unreachable server is a store error, and nothing runs")
    func unreachable() async throws {
        let port = try Sockets.unusedPort()
        let lock = PostgresRefreshLock(
            configuration: PostgresConfiguration(
                connectionString: "host=127.0.0.1 port=\(port) user=postgres dbname=postgres",
                connectTimeout: .seconds(2)))
        let ran = Locked(false)
        await #expect(throws: CredentialStoreError.self) {
            try await lock.withRefreshLock(for: Self.key) { ran.withLock { $0 = true } }
        }
        #expect(!ran.withLock { $0 })
    }

    @Test("lock numbers differ by every part of the login's key")
    func lockNumbers() {
        let base = Self.key
        let variants = [
            base, base.with(account: "b"), CredentialKey(provider: "other", appID: "app-1", account: "default"),
            CredentialKey(provider: "example", appID: "app-2", account: "default"),
            CredentialKey(provider: "example", issuer: "https://id.example.com", appID: "app-1", account: "default"),
        ]
        #expect(Set(variants.map(PostgresRefreshLock.lockID(for:))).count == variants.count)
        #expect(PostgresRefreshLock.lockID(for: base) == PostgresRefreshLock.lockID(for: base))
    }
}

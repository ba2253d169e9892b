import Foundation
import Sesame
import SesamePostgres
import SesameTestSupport
import Testing

/// `PostgresCredentialStore` against a real PostgreSQL that each test starts and stops.
@Suite("PostgresCredentialStore")
struct PostgresCredentialStoreTests {
    static let key = try! CredentialEncryptionKey(id: "primary", bytes: [UInt8](repeating: 7, count: 32))

    static func credential(
        provider: ProviderID = "facebook", issuer: String? = nil, appID: String = "1234", account: String = "alice",
        token: String = "EAAB-secret-access-token", savedAt: Date = Date(timeIntervalSince1970: 1_800_000_000.25)
    ) -> StoredCredential {
        let accessToken = AccessToken(
            tokenString: token, provider: provider, appID: appID, userID: "10\(account.count)",
            permissions: PermissionSet(granted: ["public_profile", "email"], declined: ["user_posts"]),
            expirationDate: Date(timeIntervalSince1970: 1_800_003_600.5), refreshDate: savedAt,
            refreshToken: "refresh-secret-\(account)", idToken: "id-token-secret")
        return StoredCredential(
            key: CredentialKey(provider: provider, issuer: issuer, appID: appID, account: account), token: accessToken,
            savedAt: savedAt)
    }

    /// A migrated store on `server`.
    static func store(
        _ server: PostgresServer, key: CredentialEncryptionKey = key, previousKeys: [CredentialEncryptionKey] = []
    ) async throws -> PostgresCredentialStore {
        let store = PostgresCredentialStore(configuration: server.configuration, key: key, previousKeys: previousKeys)
        try await store.migrate()
        return store
    }

    @Test("a saved credential loads back equal, and a missing one loads as nil")
    func roundTrip() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            let saved = Self.credential(issuer: "https://id.example.com")
            try await store.save(saved)
            #expect(try await store.load(saved.key) == saved)
            #expect(try await store.load(saved.key.with(account: "bob")) == nil)
        }
    }

    @Test("saving under the same key replaces the credential")
    func upsertReplaces() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            try await store.save(Self.credential(token: "first"))
            var second = Self.credential(token: "second")
            second.needsLogin = true
            try await store.save(second)
            #expect(try await store.load(second.key) == second)
            #expect(try await store.list().count == 1)
        }
    }

    @Test("list returns one provider's credentials, sorted by key, or all of them")
    func listByProvider() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            let credentials = [
                Self.credential(provider: "github", appID: "github.com", account: "zed"),
                Self.credential(account: "carol"),
                Self.credential(account: "alice"),
                Self.credential(provider: "oidc", issuer: "https://id.example.com", appID: "cli", account: "dave"),
            ]
            for credential in credentials { try await store.save(credential) }
            #expect(try await store.list(provider: "facebook").map(\.key.account) == ["alice", "carol"])
            #expect(try await store.list(provider: "github") == [credentials[0]])
            #expect(try await store.list(provider: "nobody").isEmpty)
            #expect(try await store.list() == credentials.sorted { $0.key < $1.key })
        }
    }

    @Test("delete removes the credential and says whether there was one")
    func delete() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            let saved = Self.credential()
            try await store.save(saved)
            #expect(try await store.delete(saved.key))
            #expect(try await store.load(saved.key) == nil)
            #expect(try await store.delete(saved.key) == false)
        }
    }

    @Test("the migration runs again harmlessly, from a second store too, and keeps what was saved")
    func migrationTwice() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            let saved = Self.credential()
            try await store.save(saved)
            try await store.migrate()
            let other = try await Self.store(server)
            #expect(try await other.load(saved.key) == saved)
            #expect(PostgresCredentialStore.migrationSQL.contains("CREATE TABLE IF NOT EXISTS sesame_credentials"))
        }
    }

    @Test("two stores, on two connections, see each other's writes")
    func twoStores() async throws {
        try await withPostgres { server in
            let first = try await Self.store(server)
            let second = try await Self.store(server)
            let saved = Self.credential()
            try await first.save(saved)
            #expect(try await second.load(saved.key) == saved)
            let renewed = Self.credential(token: "renewed")
            try await second.save(renewed)
            #expect(try await first.load(saved.key) == renewed)
            try await first.delete(saved.key)
            #expect(try await second.load(saved.key) == nil)
        }
    }

    @Test("a store on a server nobody listens on fails quickly with a clear unavailable error")
    func unreachable() async throws {
        let configuration = PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=\(try Sockets.unusedPort()) user=postgres dbname=postgres",
            connectTimeout: .seconds(2))
        let store = PostgresCredentialStore(configuration: configuration, key: Self.key)
        let started = ContinuousClock.now
        let error = await #expect(throws: CredentialStoreError.self) {
            try await store.load(Self.credential().key)
        }
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(error?.kind == .unavailable)
        #expect(error?.isUnavailable == true)
        #expect(error?.message.contains("Check that the server is running") == true)
    }

    @Test("a wrong password is a clear authenticationFailed error that does not show the password")
    func wrongPassword() async throws {
        try await withPostgres(password: "right-horse-battery") { server in
            let wrong = PostgresConfiguration(connectionString: server.connectionString + " password=wrong-staple-99")
            let store = PostgresCredentialStore(configuration: wrong, key: Self.key)
            let error = await #expect(throws: CredentialStoreError.self) { try await store.migrate() }
            #expect(error?.kind == .authenticationFailed)
            #expect(error?.message.contains("refused the login") == true)
            #expect(error?.message.contains("~/.pgpass") == true)
            #expect(error?.message.contains("wrong-staple-99") == false)
            #expect(error?.message.contains("right-horse-battery") == false)
            let right = server.connectionString + " password=right-horse-battery"
            let good = PostgresCredentialStore(
                configuration: PostgresConfiguration(connectionString: right), key: Self.key)
            try await good.migrate()
            #expect(try await good.list().isEmpty)
        }
    }

    @Test("concurrent calls on one store and on a second one each take their turn, and none is lost")
    func concurrentCalls() async throws {
        try await withPostgres { server in
            let first = try await Self.store(server)
            let second = try await Self.store(server)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let store = index.isMultiple(of: 2) ? first : second
                        let credential = Self.credential(account: "user\(index)", token: "token-\(index)")
                        try await store.save(credential)
                        #expect(try await store.load(credential.key) == credential)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await first.list().count == 40)
        }
    }

    @Test("before the migration, a call says to run it")
    func notMigrated() async throws {
        try await withPostgres { server in
            let store = PostgresCredentialStore(configuration: server.configuration, key: Self.key)
            let error = await #expect(throws: CredentialStoreError.self) {
                try await store.load(Self.credential().key)
            }
            #expect(error?.kind == .incompatibleSchema)
            #expect(error?.message.contains("migrate()") == true)
        }
    }

    @Test("tables from a newer Sesame are refused, by the migration and by a new store")
    func newerSchema() async throws {
        try await withPostgres { server in
            _ = try await Self.store(server)
            let raw = PostgresConnection(configuration: server.configuration)
            _ = try await raw.withSession { session throws(PostgresError) in
                try session.execute("UPDATE sesame_schema_version SET version = 99 WHERE component = 'credentials'")
            }
            let store = PostgresCredentialStore(configuration: server.configuration, key: Self.key)
            let migrateError = await #expect(throws: CredentialStoreError.self) { try await store.migrate() }
            #expect(migrateError?.kind == .incompatibleSchema)
            #expect(migrateError?.message.contains("version 99") == true)
            let loadError = await #expect(throws: CredentialStoreError.self) {
                try await store.load(Self.credential().key)
            }
            #expect(loadError?.kind == .incompatibleSchema)
        }
    }

    @Test("the stored row holds no token, refresh token or ID token, in any column")
    func encryptedAtRest() async throws {
        try await withPostgres { server in
            let store = try await Self.store(server)
            let saved = Self.credential()
            try await store.save(saved)
            let raw = PostgresConnection(configuration: server.configuration)
            let rows = try await raw.withSession { session throws(PostgresError) in
                try session.execute(
                    "SELECT provider, issuer, app_id, account, key_id, encode(sealed, 'escape'), sealed::text, "
                        + "saved_at::text, needs_login::text FROM sesame_credentials")
            }
            let sealed = try #require(rows.bytes(row: 0, column: 6))
            #expect(rows.rows.count == 1)
            #expect(rows.rows[0][4] == "primary")
            for secret in [saved.token.tokenString, saved.token.refreshToken!, saved.token.idToken!, "public_profile"] {
                #expect(!rows.rows[0].contains { $0?.contains(secret) == true })
                #expect(String(decoding: sealed, as: UTF8.self).contains(secret) == false)
            }
        }
    }

    @Test("a credential sealed under another key is a wrongKey error that shows no key")
    func wrongKey() async throws {
        try await withPostgres { server in
            let saved = Self.credential()
            try await Self.store(server).save(saved)
            let otherBytes = [UInt8](repeating: 9, count: 32)
            for other in [
                try CredentialEncryptionKey(id: "primary", bytes: otherBytes),
                try CredentialEncryptionKey(id: "next", bytes: otherBytes),
            ] {
                let store = PostgresCredentialStore(configuration: server.configuration, key: other)
                let error = await #expect(throws: CredentialStoreError.self) { try await store.load(saved.key) }
                #expect(error?.kind == .wrongKey)
                #expect(error?.message.contains("\"primary\"") == true)
                let listing = try await store.listing(provider: nil)
                #expect(listing.credentials.isEmpty)
                #expect(listing.unreadable.map(\.key) == [saved.key])
                for text in [error?.message ?? "", "\(other)", listing.unreadable.first?.problem ?? ""] {
                    #expect(!text.contains(saved.token.tokenString))
                    #expect(!text.contains(Data(otherBytes).base64EncodedString()))
                }
            }
        }
    }

    @Test("with the old key given as a previous one, a rotated store reads old rows and re-seals on save")
    func keyRotation() async throws {
        try await withPostgres { server in
            let saved = Self.credential()
            try await Self.store(server).save(saved)
            let next = try CredentialEncryptionKey(id: "next", bytes: [UInt8](repeating: 9, count: 32))
            let rotated = try await Self.store(server, key: next, previousKeys: [Self.key])
            #expect(try await rotated.load(saved.key) == saved)
            try await rotated.save(saved)
            let nextOnly = try await Self.store(server, key: next)
            #expect(try await nextOnly.load(saved.key) == saved)
        }
    }

    @Test("a key must be 32 bytes of Base64, and its description shows only its id")
    func keyValidation() throws {
        let short = #expect(throws: CredentialStoreError.self) {
            try CredentialEncryptionKey(id: "k", bytes: [UInt8](repeating: 1, count: 16))
        }
        #expect(short?.kind == .invalidKey)
        #expect(short?.message.contains("openssl rand -base64 32") == true)
        #expect(throws: CredentialStoreError.self) { try CredentialEncryptionKey(id: "k", base64: "not base64!") }
        let text = Data(repeating: 5, count: 32).base64EncodedString()
        let key = try CredentialEncryptionKey(id: "k", base64: text + "\n")
        #expect("\(key)" == "CredentialEncryptionKey(id: k)")
    }
}

/// The connection's timeouts and its recovery from a server that went away.
@Suite("PostgresCredentialStore's connection")
struct PostgresConnectionTests {
    @Test("a statement that runs past the statement timeout is a timedOut error")
    func statementTimeout() async throws {
        try await withPostgres { server in
            var configuration = server.configuration
            configuration.statementTimeout = .milliseconds(100)
            let connection = PostgresConnection(configuration: configuration)
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) {
                try await connection.withSession { session throws(PostgresError) in
                    _ = try session.execute("SELECT pg_sleep(30)")
                }
            }
            #expect(ContinuousClock.now - started < .seconds(20))
            #expect(error?.kind == .timedOut)
            #expect(error?.sqlState == "57014")
            #expect(error?.storeError("Could not read").message.contains("statement timeout") == true)
        }
    }

    @Test("while the server is down a call fails at once as unavailable; once it is back the same store works")
    func serverRestart() async throws {
        try await withPostgres { server in
            let store = try await PostgresCredentialStoreTests.store(server)
            let saved = PostgresCredentialStoreTests.credential()
            try await store.save(saved)
            try await server.stopServer()
            let started = ContinuousClock.now
            let error = await #expect(throws: CredentialStoreError.self) { try await store.load(saved.key) }
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(error?.kind == .unavailable)
            try await server.startServer()
            #expect(try await store.load(saved.key) == saved)
        }
    }

    @Test(
        "a renewal's save is fenced: a login saved after its claim wins, a claim saves once, and the renewal mark is cleared"
    )
    func fencedSave() async throws {
        try await withPostgres { server in
            let store = try await PostgresCredentialStoreTests.store(server)
            let first = PostgresCredentialStoreTests.credential(token: "first-token")
            let newer = PostgresCredentialStoreTests.credential(token: "newer-login-token")
            let renewed = PostgresCredentialStoreTests.credential(token: "renewed-token")
            try await store.save(first)
            let admin = PostgresConnection(configuration: server.configuration)
            @Sendable func marked() async throws -> Bool {
                try await admin.withSession { session throws(PostgresError) in
                    try session.execute("SELECT renewal_heartbeat IS NOT NULL FROM sesame_credentials")
                }.rows.first?.first == "t"
            }
            // A new login lands while the renewal waits on the issuer: the renewal saves nothing.
            let lost = try await store.withRenewalClaim(for: first.key) { claim in
                #expect(claim.stored == first && claim.generation != nil)
                #expect(try await marked())
                try await store.save(newer)
                return try await store.save(renewed, fencedBy: claim)
            }
            #expect(!lost)
            #expect(try await store.load(first.key) == newer)
            #expect(try await !marked())
            // Nothing came between: the save lands, once.
            let saves = try await store.withRenewalClaim(for: first.key) { claim in
                #expect(claim.stored == newer)
                return [
                    try await store.save(renewed, fencedBy: claim), try await store.save(first, fencedBy: claim),
                ]
            }
            #expect(saves == [true, false])
            #expect(try await store.load(first.key) == renewed)
            #expect(try await !marked())
        }
    }

    @Test("a connection the server ended is replaced within the same call")
    func terminatedBackend() async throws {
        try await withPostgres { server in
            let store = try await PostgresCredentialStoreTests.store(server)
            let saved = PostgresCredentialStoreTests.credential()
            try await store.save(saved)
            let admin = PostgresConnection(configuration: server.configuration)
            let ended = try await admin.withSession { session throws(PostgresError) in
                try session.execute(
                    "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                        + "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")
            }
            #expect(ended.rows.first?.first == "1")
            #expect(try await store.load(saved.key) == saved)
        }
    }
}

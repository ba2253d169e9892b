import Foundation
import Sesame
import SesamePostgres
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What an operator gives a fleet's store and gets from it: keys from a file or a variable, a
/// paged listing, a pool of connections, TLS verified against the server's CA, and reports.
@Suite("PostgresCredentialStore for operators")
struct PostgresOperatorTests {
    static func base64Key() -> String { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }

    @Test("keys are read as ID:BASE64 lines, the first one current, comments and blank lines skipped")
    func keyText() throws {
        let keys = try CredentialEncryptionKeys(
            text: "# rotated 2026-12\n\n2026-12:\(Self.base64Key())\n2026-06:\(Self.base64Key())\n", source: "test")
        #expect(keys.current.id == "2026-12")
        #expect(keys.previous.map(\.id) == ["2026-06"])
        #expect(try CredentialEncryptionKeys(text: Self.base64Key(), source: "test").current.id == "default")
        #expect("\(keys)" == "CredentialEncryptionKeys(current: 2026-12, previous: [\"2026-06\"])")
    }

    @Test(
        "bad key text names the line and what to do, and never shows a key",
        arguments: [
            ("a:\(String(repeating: "A", count: 8))", "line 1", "32"),
            ("\n\nk:not base64!", "line 3", "not Base64"),
            (
                "k:\(Data(repeating: 1, count: 32).base64EncodedString())\nk:\(Data(repeating: 2, count: 32).base64EncodedString())",
                "line 2", "a second key"
            ),
            ("# only a comment\n", "holds no key", "openssl rand -base64 32"),
        ])
    func badKeyText(_ text: String, _ place: String, _ advice: String) {
        let error = #expect(throws: CredentialStoreError.self) { try CredentialEncryptionKeys(text: text, source: "K") }
        #expect(error?.kind == .invalidKey)
        #expect(error?.message.contains(place) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(advice) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(Data(repeating: 2, count: 32).base64EncodedString()) == false)
    }

    @Test("the key file wins over the variable; a file others may write is refused; a missing one is named")
    func keyFile() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appending(path: "postgres.key")
        try Data("file-key:\(Self.base64Key())\n".utf8).write(to: file)
        chmod(file.path, 0o600)
        let environment = ["SESAME_POSTGRES_KEY_FILE": file.path, "SESAME_POSTGRES_KEY": "env-key:\(Self.base64Key())"]
        #expect(try CredentialEncryptionKeys.fromEnvironment(environment).current.id == "file-key")
        #expect(
            try CredentialEncryptionKeys.fromEnvironment(["SESAME_POSTGRES_KEY": environment["SESAME_POSTGRES_KEY"]!])
                .current.id == "env-key")

        chmod(file.path, 0o620)
        let writable = #expect(throws: CredentialStoreError.self) {
            try CredentialEncryptionKeys.fromEnvironment(environment)
        }
        #expect(writable?.message.contains("chmod 600") == true, "\(writable?.message ?? "")")

        let missing = #expect(throws: CredentialStoreError.self) {
            try CredentialEncryptionKeys.fromEnvironment([
                "SESAME_POSTGRES_KEY_FILE": directory.appending(path: "nope").path
            ])
        }
        #expect(missing?.message.contains("cannot be read") == true)
        let none = #expect(throws: CredentialStoreError.self) { try CredentialEncryptionKeys.fromEnvironment([:]) }
        #expect(none?.message.contains("SESAME_POSTGRES_KEY_FILE") == true)
    }

    /// A key file as an attacker or a careless operator leaves it.
    enum KeyFileCase: String, CaseIterable, CustomTestStringConvertible {
        case everyoneReads = "a file of mine every user may read (0644)"
        case groupReads = "a file of mine my group may read (0640)"
        case othersFile = "a file another user owns (0600)"
        case linkToOthersFile = "a symbolic link to a file another user owns"
        case fifo = "a FIFO"
        case linkToMine = "a symbolic link to a file of mine (0600)"

        var testDescription: String { rawValue }
    }

    @Test(
        "a key file is used only by libpq's rule for private keys: another user's or one others may read is refused, naming the fix",
        arguments: KeyFileCase.allCases)
    func keyFileOwnerAndMode(_ kind: KeyFileCase) throws {
        try #require(geteuid() == 0, "the test makes files of another user (nobody), which needs root")
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = directory.appending(path: "target.key")
        let named = directory.appending(path: "postgres.key")
        let secret = Self.base64Key()
        try Data("k:\(secret)\n".utf8).write(to: target)
        chmod(target.path, 0o600)
        let nobody: uid_t = 65534
        switch kind {
        case .everyoneReads: chmod(target.path, 0o644)
        case .groupReads: chmod(target.path, 0o640)
        case .othersFile, .linkToOthersFile: try #require(chown(target.path, nobody, gid_t(nobody)) == 0)
        case .fifo:
            try FileManager.default.removeItem(at: target)
            try #require(mkfifo(target.path, 0o600) == 0)
        case .linkToMine: break
        }
        if [.linkToOthersFile, .linkToMine].contains(kind) {
            try FileManager.default.createSymbolicLink(at: named, withDestinationURL: target)
        } else {
            try FileManager.default.moveItem(at: target, to: named)
        }
        let environment = ["SESAME_POSTGRES_KEY_FILE": named.path]
        if kind == .linkToMine {
            #expect(try CredentialEncryptionKeys.fromEnvironment(environment).current.id == "k")
            return
        }
        let error = #expect(throws: CredentialStoreError.self) {
            try CredentialEncryptionKeys.fromEnvironment(environment)
        }
        let message = error?.message ?? ""
        #expect(error?.kind == .invalidKey)
        #expect(message.contains(named.path), "\(message)")
        #expect(!message.contains(secret))
        switch kind {
        case .everyoneReads, .groupReads:
            #expect(message.contains("chmod 600 \(named.path)"), "\(message)")
        case .othersFile, .linkToOthersFile:
            #expect(message.contains("belongs to another user (uid 65534)") && message.contains("chown"), "\(message)")
        case .fifo:
            #expect(message.contains("not a regular file"), "\(message)")
        case .linkToMine: break
        }
    }

    @Test("250 logins are listed a page at a time: each once, in key order, by provider and app")
    func paging() async throws {
        try await withPostgres { server in
            let store = PostgresCredentialStore(
                configuration: server.configuration,
                keys: CredentialEncryptionKeys(current: PostgresCredentialStoreTests.key))
            try await store.migrate()
            for index in 0..<250 {
                let app = index.isMultiple(of: 5) ? "other-app" : "1234"
                try await store.save(
                    PostgresCredentialStoreTests.credential(appID: app, account: String(format: "user%03d", index)))
            }
            try await store.save(PostgresCredentialStoreTests.credential(provider: "github", account: "someone"))
            var seen: [CredentialKey] = []
            var pages = 0
            var after: CredentialKey?
            repeat {
                let page = try await store.page(provider: "facebook", appID: "1234", after: after, limit: 60)
                seen += page.listing.credentials.map(\.key)
                pages += 1
                after = page.next
            } while after != nil
            #expect(seen.count == 200 && Set(seen).count == 200)
            #expect(seen == seen.sorted())
            #expect(seen.allSatisfy { $0.provider == "facebook" && $0.appID == "1234" })
            #expect(pages == 4)
            let all = try await store.page(provider: "facebook", limit: 1000)
            #expect(all.listing.credentials.count == 250 && all.next == nil)
        }
    }

    @Test("calls at the same time run on several of the pool's connections, never more than its size")
    func pool() async throws {
        try await withPostgres { server in
            var configuration = server.configuration
            configuration.poolSize = 3
            configuration.connectionString += " application_name=sesame-pool-test"
            let store = PostgresCredentialStore(
                configuration: configuration, keys: CredentialEncryptionKeys(current: PostgresCredentialStoreTests.key))
            try await store.migrate()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        let credential = PostgresCredentialStoreTests.credential(account: "user\(index)")
                        try await store.save(credential)
                        #expect(try await store.load(credential.key) == credential)
                    }
                }
                try await group.waitForAll()
            }
            let counted = try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/psql"),
                [
                    "-X", "-At", "-d", server.connectionString, "-c",
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sesame-pool-test'",
                ])
            let connections = Int(counted.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            #expect((2...3).contains(connections), "\(connections) connections: \(counted.standardError)")
        }
    }

    @Test(
        "TLS: verify-full against the server's CA connects over TLS; another CA, or a name the certificate lacks, is refused clearly"
    )
    func tls() async throws {
        try await withPostgres(tls: true) { server in
            let keys = CredentialEncryptionKeys(current: PostgresCredentialStoreTests.key)
            func store(_ extra: String, host: String = "127.0.0.1") -> PostgresCredentialStore {
                PostgresCredentialStore(
                    configuration: PostgresConfiguration(
                        connectionString: "host=\(host) port=\(server.port) user=postgres dbname=postgres \(extra)",
                        connectTimeout: .seconds(5)),
                    keys: keys)
            }
            let verified = store("sslmode=verify-full sslrootcert=\(server.caFile.path)", host: "localhost")
            let report = try await verified.serverReport()
            #expect(report.tls?.hasPrefix("TLSv1.") == true, "\(report)")

            let other = server.directory.appending(path: "other-ca.crt")
            try await PostgresServer.openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                server.directory.appending(path: "other-ca.key").path, "-out", other.path, "-days", "2", "-subj",
                "/CN=Other",
            ])
            let wrongCA = await #expect(throws: CredentialStoreError.self) {
                try await store("sslmode=verify-full sslrootcert=\(other.path)", host: "localhost").serverReport()
            }
            #expect(wrongCA?.message.contains("certificate") == true, "\(wrongCA?.message ?? "")")
            #expect(wrongCA?.message.contains("TLS") == true, "\(wrongCA?.message ?? "")")

            let wrongName = await #expect(throws: CredentialStoreError.self) {
                try await store(
                    "sslmode=verify-full sslrootcert=\(server.caFile.path) hostaddr=127.0.0.1", host: "db.example"
                )
                .serverReport()
            }
            #expect(wrongName?.message.contains("db.example") == true, "\(wrongName?.message ?? "")")
            let plain = try await store("sslmode=disable").serverReport()
            #expect(plain.tls == nil)
        }
    }

    @Test("the key report counts rows per key id and tells a key that opens them from one that does not")
    func keyReport() async throws {
        try await withPostgres { server in
            let old = try CredentialEncryptionKey(id: "old", bytes: [UInt8](repeating: 1, count: 32))
            let new = try CredentialEncryptionKey(id: "new", bytes: [UInt8](repeating: 2, count: 32))
            let first = PostgresCredentialStore(
                configuration: server.configuration, keys: CredentialEncryptionKeys(current: old))
            try await first.migrate()
            for account in ["a", "b"] {
                try await first.save(PostgresCredentialStoreTests.credential(account: account))
            }
            let rotated = PostgresCredentialStore(
                configuration: server.configuration, keys: CredentialEncryptionKeys(current: new, previous: [old]))
            try await rotated.save(PostgresCredentialStoreTests.credential(account: "c"))
            let report = try await rotated.keyReport().sorted { $0.id < $1.id }
            #expect(report.map(\.id) == ["new", "old"] && report.map(\.rows) == [1, 2])
            #expect(report.map(\.known) == [true, true] && report.map(\.opens) == [true, true])
            #expect(report.map(\.isCurrent) == [true, false])
            let impostor = try CredentialEncryptionKey(id: "old", bytes: [UInt8](repeating: 3, count: 32))
            let wrong = PostgresCredentialStore(
                configuration: server.configuration, keys: CredentialEncryptionKeys(current: impostor))
            let seen = try await wrong.keyReport().sorted { $0.id < $1.id }
            #expect(seen.map(\.known) == [false, true] && seen.map(\.opens) == [false, false])
            #expect(seen.map(\.failing.count) == [1, 2])
            #expect(try await wrong.schemaVersion() == PostgresCredentialStore.schemaVersion)
        }
    }

    @Test("the key report names the one altered row of a key's several, and counts the rows that still open")
    func keyReportAlteredRow() async throws {
        try await withPostgres { server in
            let key = try CredentialEncryptionKey(id: "k", bytes: [UInt8](repeating: 4, count: 32))
            let store = PostgresCredentialStore(
                configuration: server.configuration, keys: CredentialEncryptionKeys(current: key))
            try await store.migrate()
            for account in ["a", "b", "c", "d"] {
                try await store.save(PostgresCredentialStoreTests.credential(account: account))
            }
            // One bit of one row's sealed bytes flipped; "d" is saved again afterwards, so the newest
            // row is a good one.
            let admin = PostgresConnection(configuration: server.configuration)
            _ = try await admin.withSession { session throws(PostgresError) in
                try session.execute(
                    "UPDATE sesame_credentials SET sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1) "
                        + "WHERE account = 'b'")
            }
            try await store.save(PostgresCredentialStoreTests.credential(account: "d", savedAt: Date()))
            let report = try await store.keyReport()
            #expect(report.count == 1)
            #expect(report.first?.rows == 4 && report.first?.known == true && report.first?.opens == false)
            #expect(report.first?.failing.map(\.account) == ["b"])
        }
    }

    @Test(
        "a save made while the server restarts waits for it and lands; a read fails at once; past the limit a save fails"
    )
    func saveThroughRestart() async throws {
        try await withPostgres { server in
            var configuration = server.configuration
            configuration.saveRetryLimit = .seconds(60)
            let keys = CredentialEncryptionKeys(current: PostgresCredentialStoreTests.key)
            let store = PostgresCredentialStore(configuration: configuration, keys: keys)
            try await store.migrate()
            let credential = PostgresCredentialStoreTests.credential(account: "rotated")
            try await server.stopServer()
            await #expect(throws: CredentialStoreError.self) { try await store.load(credential.key) }
            async let saved: Void = store.save(credential)
            try await server.startServer()
            try await saved
            #expect(try await store.load(credential.key) == credential)

            configuration.saveRetryLimit = .milliseconds(300)
            let impatient = PostgresCredentialStore(configuration: configuration, keys: keys)
            try await server.stopServer()
            let clock = ContinuousClock()
            let started = clock.now
            let error = await #expect(throws: CredentialStoreError.self) { try await impatient.save(credential) }
            #expect(error?.kind == .unavailable)
            #expect(started.duration(to: clock.now) < .seconds(5))
            try await server.startServer()
        }
    }
}

import Foundation
import Sesame

/// Credentials in a PostgreSQL table, encrypted at rest, shared by every process and machine
/// that connects to the same database: the store for a fleet of workers.
///
/// Each row is one login, keyed by its identity (provider, issuer — empty when the login has
/// none —, app and account). The whole stored credential is sealed with AES-256-GCM through
/// libcrypto under the operator's ``CredentialEncryptionKey``, with the row's key as associated
/// data, so that a sealed credential copied to another row does not open there. The row also
/// records the id of the key that sealed it: give the store the new key and the old ones to
/// rotate, and each save re-seals under the new key. When it was saved and whether it needs a
/// login are kept in plain columns too, for an operator's queries; no token is.
///
/// The table is made by ``migrate()``, which is idempotent, or by a DBA running
/// ``migrationSQL``. A database whose tables a newer Sesame made is refused with an error
/// rather than written to.
///
/// Every call runs on one of the store's connections (up to ``PostgresConfiguration/poolSize``;
/// see ``PostgresConfiguration`` for how the server is reached, over TLS too, and for the
/// timeouts); a connection is made on first use, and a call that finds it broken (the server
/// restarted) connects again and runs once more, which every statement of the store is safe
/// to do. Failures are `CredentialStoreError`s whose messages say
/// what to do, and hold no token, password or key.
public final class PostgresCredentialStore: CredentialStore {
    /// The version of the tables this Sesame reads and writes: 1 the credentials, 2 also the
    /// fleet's rate-limit budget (``PostgresRateLimitBudget``), 3 also each login's generation
    /// and the heartbeat of a renewal in flight, which fence renewals
    /// (``withRenewalClaim(for:_:)``).
    public static let schemaVersion = 3

    /// How long a renewal in flight elsewhere may show no sign of life, as a waiting process
    /// sees it, before that process takes the renewal over: its holder beats every
    /// ``renewalHeartbeat`` while it waits on the issuer, through a database restart too.
    static let renewalLease = Duration.seconds(15)
    /// How often the holder of a renewal shows it is alive.
    static let renewalHeartbeat = Duration.seconds(3)
    /// How often a process waiting for a renewal in flight elsewhere looks at the login's row.
    static let renewalPoll = Duration.milliseconds(200)

    /// The statements ``migrate()`` runs, in order; each is harmless to run again.
    static let migrationStatements = [
        """
        CREATE TABLE IF NOT EXISTS sesame_schema_version (
            component text PRIMARY KEY,
            version integer NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS sesame_credentials (
            provider text NOT NULL,
            issuer text NOT NULL,
            app_id text NOT NULL,
            account text NOT NULL,
            key_id text NOT NULL,
            sealed bytea NOT NULL,
            saved_at timestamptz NOT NULL,
            needs_login boolean NOT NULL,
            PRIMARY KEY (provider, issuer, app_id, account)
        )
        """,
        "ALTER TABLE sesame_credentials ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 0",
        "ALTER TABLE sesame_credentials ADD COLUMN IF NOT EXISTS renewal_heartbeat timestamptz",
        """
        CREATE TABLE IF NOT EXISTS sesame_rate_limit_budget (
            provider text NOT NULL,
            app_id text NOT NULL,
            usage jsonb NOT NULL DEFAULT '{}',
            throttled_until timestamptz,
            updated_at timestamptz NOT NULL,
            PRIMARY KEY (provider, app_id)
        )
        """,
        """
        INSERT INTO sesame_schema_version (component, version) VALUES ('credentials', 3)
            ON CONFLICT (component) DO UPDATE SET version = 3 WHERE sesame_schema_version.version < 3
        """,
    ]

    /// The SQL that ``migrate()`` runs, for a DBA who creates the tables by hand. Running it
    /// again changes nothing.
    public static var migrationSQL: String { migrationStatements.map { $0 + ";\n" }.joined() }

    private let connection: PostgresConnectionPool
    private let saveRetryLimit: Duration
    private let sealingKey: CredentialEncryptionKey
    private let openingKeys: [String: CredentialEncryptionKey]

    /// Creates a store on the database `configuration` names, sealing with `key` and opening
    /// rows sealed with it or with any of `previousKeys` (the keys being rotated out). Nothing is
    /// sent until the first call.
    public init(
        configuration: PostgresConfiguration = PostgresConfiguration(), key: CredentialEncryptionKey,
        previousKeys: [CredentialEncryptionKey] = []
    ) {
        self.sealingKey = key
        var openingKeys: [String: CredentialEncryptionKey] = [:]
        for previous in previousKeys { openingKeys[previous.id] = previous }
        openingKeys[key.id] = key
        self.openingKeys = openingKeys
        self.saveRetryLimit = configuration.saveRetryLimit
        self.connection = PostgresConnectionPool(
            configuration: configuration, size: configuration.poolSize, onConnect: Self.checkSchema)
    }

    /// Creates a store sealing with `keys`' current key and opening rows sealed with any of them.
    public convenience init(
        configuration: PostgresConfiguration = PostgresConfiguration(), keys: CredentialEncryptionKeys
    ) {
        self.init(configuration: configuration, key: keys.current, previousKeys: keys.previous)
    }

    public var backendDescription: String { "postgres" }

    /// Creates the tables if they are missing; harmless to run again and from many processes at
    /// once (they take turns on an advisory lock).
    ///
    /// - Throws: `CredentialStoreError` of kind `CredentialStoreError/Kind/incompatibleSchema`
    ///   when a newer Sesame made the tables, or the kind of any other failure.
    public func migrate() async throws {
        try await Self.migrate(connection)
    }

    /// Runs the migration on `connection`; ``migrate()`` and the rate-limit budget's.
    static func migrate(_ connection: PostgresConnectionPool) async throws {
        do throws(PostgresError) {
            try await connection.withSession { session throws(PostgresError) in
                try Self.transaction(session) { session throws(PostgresError) in
                    // Any constant will do; it keeps two migrations from racing on CREATE TABLE.
                    _ = try session.execute("SELECT pg_advisory_xact_lock(hashtext('sesame.migration'))")
                    _ = try session.execute(Self.migrationStatements[0])
                    try Self.checkVersion(session)
                    for statement in Self.migrationStatements.dropFirst() { _ = try session.execute(statement) }
                }
            }
        } catch {
            throw error.storeError("Could not create Sesame's tables in PostgreSQL")
        }
    }

    /// Saves `credential`, replacing the row's login whatever it holds (a new login): a renewal
    /// in flight for the row's former login finds, when it saves, that it was replaced.
    public func save(_ credential: StoredCredential) async throws {
        try await SesameLogging.storeOperation("save", self, credential.key) {
            _ = try await write(credential, fence: nil)
        }
    }

    /// Saves `credential` only when its row still holds the generation `claim` took (no login was
    /// saved, and no other process took the renewal over, since): the save of a renewal whose
    /// lock was lost (a database restart, a failover) cannot overwrite a newer login. Clears the
    /// row's renewal in flight. A claim on a login that was not stored saves as ``save(_:)``.
    ///
    /// - Returns: whether it was saved.
    /// - Throws: `CredentialStoreError` when the server cannot be reached (after trying for the
    ///   configuration's `saveRetryLimit`) or refuses.
    public func save(_ credential: StoredCredential, fencedBy claim: RenewalClaim) async throws -> Bool {
        try await SesameLogging.storeOperation("fenced save", self, credential.key) {
            try await write(credential, fence: claim.generation)
        }
    }

    /// Reads the login's row for a renewal and marks the renewal in flight there, under a new
    /// generation of the row, then runs `body`; the mark is cleared when `body` ends, and a
    /// fenced save (``save(_:fencedBy:)``) clears it too.
    ///
    /// The refresh lock (``PostgresRefreshLock``) keeps renewals apart while the server runs,
    /// but a restart or failover drops it while its holder still waits on the issuer. So a
    /// process that finds a renewal in flight waits for it: until its holder saves (and the
    /// login it saved is read here) or clears its mark, or until its holder, which beats every
    /// few seconds while it waits on the issuer, has shown no sign of life for 15 seconds
    /// of watching. Only then does this process take the renewal over, and the
    /// former holder's save finds the row's generation moved on and saves nothing.
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached or the row cannot be
    ///   read; whatever `body` throws.
    public func withRenewalClaim<T: Sendable>(
        for key: CredentialKey, _ body: @Sendable (RenewalClaim) async throws -> T
    ) async throws -> T {
        let claim = try await claimRenewal(of: key)
        guard let generation = claim.generation else { return try await body(claim) }
        let parameters = Self.keyParameters(key) + [.text(String(generation))]
        let connection = self.connection
        let heartbeat = Task {
            while true {
                try await Task.sleep(for: Self.renewalHeartbeat)
                // A beat that fails (the server restarting) is made up by the next.
                _ = try? await connection.withSession { session throws(PostgresError) in
                    try session.execute(
                        """
                        UPDATE sesame_credentials SET renewal_heartbeat = clock_timestamp()
                        WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
                            AND generation = $5::bigint AND renewal_heartbeat IS NOT NULL
                        """, parameters)
                }
            }
        }
        func end() async {
            heartbeat.cancel()
            _ = await heartbeat.result
            // A fenced save cleared the mark already; a renewal that saved nothing clears it here
            // (or, when the server cannot be reached, a waiting process takes over after the lease).
            _ = try? await connection.withSession { session throws(PostgresError) in
                try session.execute(
                    """
                    UPDATE sesame_credentials SET renewal_heartbeat = NULL
                    WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4 AND generation = $5::bigint
                    """, parameters)
            }
        }
        do {
            let value = try await body(claim)
            await end()
            return value
        } catch {
            await end()
            throw error
        }
    }

    /// Waits for a renewal in flight elsewhere (see ``withRenewalClaim(for:_:)``), then reads the
    /// row and claims it under a new generation; no generation when there is no row.
    private func claimRenewal(of key: CredentialKey) async throws -> RenewalClaim {
        let clock = ContinuousClock()
        var watched: [String?] = []
        var watchedSince = clock.now
        while true {
            let result = try await execute(
                """
                SELECT key_id, sealed, generation, renewal_heartbeat::text FROM sesame_credentials
                WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
                """, Self.keyParameters(key), failing: "Could not read the credential for \(key) from PostgreSQL")
            guard let row = result.rows.first else { return RenewalClaim(stored: nil) }
            let stored = try unseal(result.bytes(row: 0, column: 1), keyID: row[0] ?? "", key: key)
            let seen = [row[2], row[3]]
            if seen != watched {
                watched = seen
                watchedSince = clock.now
            }
            if row[3] == nil || watchedSince.duration(to: clock.now) >= Self.renewalLease {
                let taken = try await execute(
                    """
                    UPDATE sesame_credentials
                    SET generation = generation + 1, renewal_heartbeat = clock_timestamp()
                    WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
                        AND generation = $5::bigint
                    RETURNING generation
                    """, Self.keyParameters(key) + [.text(row[2] ?? "")],
                    failing: "Could not mark the renewal of \(key) in PostgreSQL")
                // Another process came first: look again.
                if let generation = (taken.rows.first?.first ?? nil).flatMap({ Int64($0) }) {
                    return RenewalClaim(stored: stored, generation: generation)
                }
                continue
            }
            try await Task.sleep(for: Self.renewalPoll)
        }
    }

    /// Seals and saves `credential`, replacing the row whatever it holds when `fence` is `nil`,
    /// else only when the row's generation is still `fence`; whether it was saved.
    private func write(_ credential: StoredCredential, fence: Int64?) async throws -> Bool {
        let key = credential.key
        let sealed: [UInt8]
        do {
            let plaintext = [UInt8](try JSONEncoder().encode(credential))
            sealed = try AESGCM.seal(plaintext, key: sealingKey.bytes, associatedData: Self.associatedData(key))
        } catch {
            throw CredentialStoreError(
                kind: .ioFailure,
                message: "Could not encrypt the credential for \(key): \(error). Check that OpenSSL's libcrypto "
                    + "is installed and working.")
        }
        let parameters =
            Self.keyParameters(key) + [
                .text(sealingKey.id), .bytes(sealed), .text(String(credential.savedAt.timeIntervalSince1970)),
                .text(credential.needsLogin ? "true" : "false"),
            ]
        let clock = ContinuousClock()
        let deadline = clock.now + saveRetryLimit
        var pause = Duration.milliseconds(100)
        while true {
            do {
                guard let fence else {
                    try await upsert(parameters, key: key)
                    return true
                }
                return try await update(parameters + [.text(String(fence))], key: key)
            } catch let error as CredentialStoreError where error.kind == .unavailable && clock.now + pause < deadline {
                // The server cannot be reached: it may be restarting; what is being saved may be
                // a refresh token the provider has already rotated, so it is worth the wait.
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(2))
            }
        }
    }

    /// Inserts or replaces the row of `key`; one try.
    private func upsert(_ parameters: [PostgresParameter], key: CredentialKey) async throws {
        _ = try await execute(
            """
            INSERT INTO sesame_credentials
                (provider, issuer, app_id, account, key_id, sealed, saved_at, needs_login)
            VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7::double precision), $8::boolean)
            ON CONFLICT (provider, issuer, app_id, account) DO UPDATE SET
                key_id = EXCLUDED.key_id, sealed = EXCLUDED.sealed,
                saved_at = EXCLUDED.saved_at, needs_login = EXCLUDED.needs_login,
                generation = sesame_credentials.generation + 1, renewal_heartbeat = NULL
            """, parameters, failing: "Could not save the credential for \(key) in PostgreSQL")
    }

    /// Replaces the row of `key` when its generation is still `$9`; one try. A try whose answer
    /// was lost and that runs again finds the generation moved on by itself, and says not saved:
    /// the caller then reads the row, which holds what it saved.
    private func update(_ parameters: [PostgresParameter], key: CredentialKey) async throws -> Bool {
        try await execute(
            """
            UPDATE sesame_credentials SET key_id = $5, sealed = $6,
                saved_at = to_timestamp($7::double precision), needs_login = $8::boolean,
                generation = generation + 1, renewal_heartbeat = NULL
            WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4 AND generation = $9::bigint
            RETURNING generation
            """, parameters, failing: "Could not save the credential for \(key) in PostgreSQL"
        ).rows.count == 1
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        try await SesameLogging.storeOperation("load", self, key) {
            let result = try await execute(
                """
                SELECT key_id, sealed FROM sesame_credentials
                WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
                """, Self.keyParameters(key), failing: "Could not read the credential for \(key) from PostgreSQL")
            guard !result.rows.isEmpty else { return nil }
            var credential = try unseal(result.bytes(row: 0, column: 1), keyID: result.rows[0][0] ?? "", key: key)
            // The row's key is the one asked for; a login saved with an empty issuer and one saved
            // with none are the same row, and the caller gets back the key it asked with.
            credential.key = key
            return credential
        }
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        try await SesameLogging.storeOperation("delete", self, key) {
            let result = try await execute(
                """
                DELETE FROM sesame_credentials
                WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
                RETURNING 1
                """, Self.keyParameters(key), failing: "Could not remove the credential for \(key) from PostgreSQL")
            return !result.rows.isEmpty
        }
    }

    /// Every credential the store's keys open, optionally for one provider, sorted by key. Rows
    /// that cannot be read (sealed with a key the store was not given) are left out;
    /// ``listing(provider:)`` reports them; ``page(provider:appID:after:limit:)`` reads them a page at a time.
    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        try await listing(provider: provider).credentials
    }

    public func listing(provider: ProviderID?) async throws -> CredentialListing {
        try await rows(provider: provider, appID: nil, after: nil, limit: nil).listing
    }

    /// One page of the credentials of `provider` (and `appID`, when given), in key order: at
    /// most `limit` rows after the key `after` (from the start when `nil`). Ask again with the
    /// page's ``CredentialPage/next`` until it is `nil`; a fleet's thousands of logins are then
    /// never read at once.
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached or refuses.
    public func page(
        provider: ProviderID, appID: String? = nil, after: CredentialKey? = nil, limit: Int = 100
    ) async throws -> CredentialPage {
        let limit = max(1, limit)
        let found = try await rows(provider: provider, appID: appID, after: after, limit: limit)
        return CredentialPage(listing: found.listing, next: found.count == limit ? found.last : nil)
    }

    /// The rows `provider`, `appID`, `after` and `limit` select (each `nil` selects all), read,
    /// with their count and the last row's key.
    private func rows(
        provider: ProviderID?, appID: String?, after: CredentialKey?, limit: Int?
    ) async throws -> (listing: CredentialListing, count: Int, last: CredentialKey?) {
        let providerParameter: PostgresParameter = provider.map { .text($0.rawValue) } ?? .null
        let appParameter: PostgresParameter = appID.map { .text($0) } ?? .null
        let afterParameters: [PostgresParameter] = after.map { Self.keyParameters($0) } ?? [.null, .null, .null, .null]
        let limitParameter: PostgresParameter = limit.map { .text(String($0)) } ?? .null
        let parameters = [providerParameter, appParameter] + afterParameters + [limitParameter]
        let result = try await execute(
            """
            SELECT provider, issuer, app_id, account, key_id, sealed FROM sesame_credentials
            WHERE ($1::text IS NULL OR provider = $1) AND ($2::text IS NULL OR app_id = $2)
                AND ($3::text IS NULL OR (provider, issuer, app_id, account) > ($3, $4, $5, $6))
            ORDER BY provider, issuer, app_id, account
            LIMIT $7::bigint
            """, parameters, failing: "Could not list the credentials in PostgreSQL")
        var credentials: [StoredCredential] = []
        var unreadable: [UnreadableCredential] = []
        var last: CredentialKey?
        for (index, row) in result.rows.enumerated() {
            let issuer = row[1] ?? ""
            let key = CredentialKey(
                provider: ProviderID(rawValue: row[0] ?? ""), issuer: issuer.isEmpty ? nil : issuer,
                appID: row[2] ?? "", account: row[3] ?? "")
            last = key
            do {
                credentials.append(try unseal(result.bytes(row: index, column: 5), keyID: row[4] ?? "", key: key))
            } catch let error as CredentialStoreError {
                unreadable.append(UnreadableCredential(key: key, problem: error.message))
            }
        }
        let listing = CredentialListing(credentials: credentials.sorted { $0.key < $1.key }, unreadable: unreadable)
        return (listing, result.rows.count, last)
    }

    /// Makes the tables first when they are missing (a login is the first write a fleet's
    /// operator makes), then checks as every store does.
    public func checkWritable(for key: CredentialKey) async throws {
        if try await schemaVersion() != Self.schemaVersion { try await migrate() }
        let probe = key.with(account: "\(key.account).sesame-write-check")
        do {
            try await save(
                StoredCredential(
                    key: probe, token: AccessToken(tokenString: "", provider: key.provider, appID: key.appID)))
            try await delete(probe)
        } catch var error as CredentialStoreError {
            error.message = error.message.replacingOccurrences(of: "\(probe)", with: "\(key)")
            throw error
        }
    }

    /// The version of the tables in the database, or `nil` when they have not been made.
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached, or its tables are
    ///   newer than this Sesame.
    public func schemaVersion() async throws -> Int? {
        do throws(PostgresError) {
            return try await connection.withSession { session throws(PostgresError) -> Int? in
                let exists = try session.execute("SELECT to_regclass('sesame_schema_version') IS NOT NULL")
                guard exists.rows.first?.first == "t" else { return nil }
                let result = try session.execute(
                    "SELECT version FROM sesame_schema_version WHERE component = $1", [.text("credentials")])
                return (result.rows.first?.first ?? nil).flatMap { Int($0) }
            }
        } catch {
            throw error.storeError("Could not read the version of Sesame's tables in PostgreSQL")
        }
    }

    /// Which server the store reaches and how: for an operator's checks (`sesame doctor`).
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached.
    public func serverReport() async throws -> PostgresServerReport {
        do throws(PostgresError) {
            let result = try await connection.withSession { session throws(PostgresError) in
                try session.execute(
                    """
                    SELECT current_setting('server_version'), current_user, current_database(),
                        coalesce(host(inet_server_addr()), 'a local socket'), inet_server_port(),
                        (SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl)
                    """)
            }
            let row = result.rows.first ?? []
            func field(_ index: Int) -> String? { index < row.count ? row[index] : nil }
            return PostgresServerReport(
                version: field(0) ?? "?", user: field(1) ?? "?", database: field(2) ?? "?",
                address: [field(3), field(4)].compactMap { $0 }.joined(separator: " port "), tls: field(5))
        } catch {
            throw error.storeError("Could not reach PostgreSQL")
        }
    }

    /// What the operator's keys make of the table: how many rows each key id sealed, and which of
    /// them do not open (every one, for a key the store was not given or a key replaced under the
    /// same id; only some, for rows altered since they were saved).
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached or the table is missing.
    public func keyReport() async throws -> [KeyUse] {
        let result = try await execute(
            """
            SELECT key_id, provider, issuer, app_id, account, sealed FROM sesame_credentials
            ORDER BY key_id, provider, issuer, app_id, account
            """, failing: "Could not read the credentials' keys in PostgreSQL")
        var uses: [KeyUse] = []
        for (index, row) in result.rows.enumerated() {
            let id = row[0] ?? ""
            let issuer = row[2] ?? ""
            let key = CredentialKey(
                provider: ProviderID(rawValue: row[1] ?? ""), issuer: issuer.isEmpty ? nil : issuer,
                appID: row[3] ?? "", account: row[4] ?? "")
            if uses.last?.id != id {
                uses.append(
                    KeyUse(id: id, rows: 0, known: openingKeys[id] != nil, failing: [], isCurrent: id == sealingKey.id))
            }
            uses[uses.count - 1].rows += 1
            if (try? unseal(result.bytes(row: index, column: 5), keyID: id, key: key)) == nil {
                uses[uses.count - 1].failing.append(key)
            }
        }
        return uses
    }

    // MARK: - Rows

    /// The row key as statement parameters `$1`…`$4`.
    private static func keyParameters(_ key: CredentialKey) -> [PostgresParameter] {
        [.text(key.provider.rawValue), .text(key.issuer ?? ""), .text(key.appID), .text(key.account)]
    }

    /// The row key as the associated data of its sealed credential: a label and each field's
    /// UTF-8 length (4 bytes, big-endian) and bytes, so that no two keys give the same bytes.
    static func associatedData(_ key: CredentialKey) -> [UInt8] {
        var data = Array("sesame.credential.v1".utf8)
        for field in [key.provider.rawValue, key.issuer ?? "", key.appID, key.account] {
            let bytes = Array(field.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: bytes)
        }
        return data
    }

    /// The credential in `key`'s row, sealed by the key named `keyID`.
    ///
    /// - Throws: `CredentialStoreError` (only) when no key of the store opens it, or it opens to
    ///   something that is not a credential.
    private func unseal(_ sealed: [UInt8]?, keyID: String, key: CredentialKey) throws -> StoredCredential {
        guard let openingKey = openingKeys[keyID] else {
            throw CredentialStoreError(
                kind: .wrongKey,
                message: "The credential for \(key) in PostgreSQL was encrypted with the key \"\(keyID)\", which "
                    + "this store was not given. Give the store that key (as a previous key while rotating); "
                    + "the row is left as it is.")
        }
        guard let sealed,
            let plaintext = AESGCM.open(sealed, key: openingKey.bytes, associatedData: Self.associatedData(key))
        else {
            throw CredentialStoreError(
                kind: .wrongKey,
                message: "The credential for \(key) in PostgreSQL does not decrypt with the key \"\(keyID)\": "
                    + "that id names a different key than the one it was encrypted with, or the row was altered. "
                    + "Give the store the key it was saved with; the row is left as it is.")
        }
        do {
            return try JSONDecoder().decode(StoredCredential.self, from: Data(plaintext))
        } catch {
            throw CredentialStoreError(
                kind: .corrupt,
                message: "The credential for \(key) in PostgreSQL decrypts but is not a credential this Sesame "
                    + "reads. It is left in place; log in again to replace it.")
        }
    }

    // MARK: - Schema

    /// Refuses a database whose tables a newer Sesame made; runs on each new connection. A
    /// database without the tables passes: ``migrate()`` may be about to make them, and any
    /// other statement says they are missing.
    static func checkSchema(_ session: borrowing PostgresSession) throws(PostgresError) {
        let exists = try session.execute("SELECT to_regclass('sesame_schema_version') IS NOT NULL")
        guard exists.rows.first?.first == "t" else { return }
        try checkVersion(session)
    }

    private static func checkVersion(_ session: borrowing PostgresSession) throws(PostgresError) {
        let result = try session.execute(
            "SELECT version FROM sesame_schema_version WHERE component = $1", [.text("credentials")])
        guard let text = result.rows.first?.first ?? nil, let version = Int(text), version > schemaVersion else {
            return
        }
        throw PostgresError(
            kind: .incompatibleSchema, sqlState: nil,
            message: "the database's credential tables are at version \(version), made by a newer Sesame than "
                + "this one (which knows version \(schemaVersion)). Upgrade this program to the Sesame that "
                + "the rest of the fleet runs.")
    }

    /// Runs `body` between BEGIN and COMMIT, and rolls back when it throws.
    private static func transaction(
        _ session: borrowing PostgresSession, _ body: (borrowing PostgresSession) throws(PostgresError) -> Void
    ) throws(PostgresError) {
        _ = try session.execute("BEGIN")
        do {
            try body(session)
            _ = try session.execute("COMMIT")
        } catch {
            _ = try? session.execute("ROLLBACK")
            throw error
        }
    }

    /// `error` as a store error after `action`; a missing table says how to make it.
    /// Runs one statement; a failure is the `CredentialStoreError` that says `action` failed.
    private func execute(
        _ sql: String, _ parameters: [PostgresParameter] = [], failing action: @autoclosure () -> String
    ) async throws -> PostgresRows {
        do throws(PostgresError) {
            return try await connection.withSession { session throws(PostgresError) in
                try session.execute(sql, parameters)
            }
        } catch {
            throw Self.explain(error, action())
        }
    }

    private static func explain(_ error: PostgresError, _ action: String) -> CredentialStoreError {
        if error.sqlState == "42703" {
            // An undefined column: tables an older Sesame made.
            return CredentialStoreError(
                kind: .incompatibleSchema,
                message: "\(action): Sesame's tables in this database were made by an older Sesame. Call the "
                    + "store's migrate() once (a `sesame login` with the postgres storage does), or have a DBA run "
                    + "its migrationSQL (which `sesame doctor --storage postgres` prints).")
        }
        guard error.sqlState == "42P01" else { return error.storeError(action) }
        return CredentialStoreError(
            kind: .incompatibleSchema,
            message: "\(action): Sesame's tables are not in this database yet. Call the store's migrate() once "
                + "(a `sesame login` with the postgres storage does), or have a DBA run its migrationSQL (which "
                + "`sesame doctor --storage postgres` prints).")
    }
}

/// A page of ``PostgresCredentialStore/page(provider:appID:after:limit:)``.
public struct CredentialPage: Sendable {
    /// The page's credentials, and the rows on it that the store's keys do not open.
    public var listing: CredentialListing
    /// The key to ask the next page after, or `nil` when this page is the last.
    public var next: CredentialKey?
}

/// How the rows sealed by one key id fare (``PostgresCredentialStore/keyReport()``).
public struct KeyUse: Sendable, Hashable {
    /// The key id the rows record.
    public var id: String
    /// How many rows it sealed.
    public var rows: Int
    /// Whether the store was given a key of that id.
    public var known: Bool
    /// The logins of the rows that do not open with it (all of them when the store has no key of
    /// that id), in key order.
    public var failing: [CredentialKey]
    /// Whether every one of those rows opens with it.
    public var opens: Bool { failing.isEmpty }
    /// Whether it is the key the store seals with now.
    public var isCurrent: Bool
}

/// Which server a ``PostgresCredentialStore`` reaches, and how (``PostgresCredentialStore/serverReport()``).
public struct PostgresServerReport: Sendable, Hashable {
    /// The server's version (`15.10`).
    public var version: String
    /// The database user the store connects as.
    public var user: String
    /// The database.
    public var database: String
    /// The server's address and port as the server sees them, or `a local socket`.
    public var address: String
    /// The TLS version of the connection (`TLSv1.3`), or `nil` when it is not encrypted.
    public var tls: String?
}

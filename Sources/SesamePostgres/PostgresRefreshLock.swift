import Foundation
import Sesame

/// The renewal lock of a fleet that shares a ``PostgresCredentialStore``: a PostgreSQL
/// session-level advisory lock on the login's key, so that however many processes on however
/// many machines find a login due at once, exactly one renews it and the others adopt what it
/// saved.
///
/// Give it to each `Session` as `refreshLocking: .service(lock)`. The session renews inside
/// ``withRefreshLock(for:_:)``: the lock is taken with `pg_advisory_lock` on a connection of its
/// own (kept for this process's next holder once released), the session reads the store again,
/// renews only when the stored login is still due, saves, and the lock is released. Its holder is the connection, not a lease: a worker
/// that is slow keeps it as long as it needs, and one that dies (or whose connection the server
/// ends) releases it at once, with nothing to expire. A restart or failover of the server drops
/// it too, while its holder may still wait on the issuer: the store's fenced renewal
/// (``PostgresCredentialStore/withRenewalClaim(for:_:)``) keeps the next holder from sending the
/// same refresh token.
///
/// ```swift
/// let lock = PostgresRefreshLock(configuration: configuration)
/// let session = Session(
///     provider: "oidc", issuer: issuer, appID: clientID, account: "alice", store: store,
///     refreshLocking: .service(lock), renewer: renewer)
/// ```
public final class PostgresRefreshLock: RefreshLockService {
    /// Where the server is; every lock has a connection of its own to it.
    public let configuration: PostgresConfiguration
    /// How long a process waits for another holder before giving up (PostgreSQL's
    /// `lock_timeout` on the lock's connection); the renewal then fails with
    /// `CredentialStoreError.Kind.timedOut` and the stored login stays as it was. A shorter
    /// `RefreshLock.waitLimit` set for the renewal (the `sesame` command sets its request
    /// timeout and 5 s) bounds the wait instead, which then fails as a lock file's does.
    public let waitLimit: Duration

    /// Connections no holder uses now, kept for the next: opening one costs a round trip to the
    /// server and its authentication, many times the lock itself.
    private let idle = Locked<[PostgresConnection]>([])
    /// The locks this process holds, by lock number: the holder's connection, and the server's
    /// time when it began to wait (a failure recorded since then is one it waited behind).
    private let held = Locked<[Int64: (connection: PostgresConnection, waitStart: String)]>([:])

    /// A lock on the server `configuration` names, waiting at most `waitLimit` for another holder.
    public init(configuration: PostgresConfiguration, waitLimit: Duration = .seconds(60)) {
        self.configuration = configuration
        self.waitLimit = waitLimit
    }

    /// Runs `body` while this process holds the fleet's lock for `key`, waiting for another
    /// holder (on this machine or another) first.
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached or the wait
    ///   passes ``waitLimit``; `AuthError` (`retry`) when it passes a shorter `RefreshLock.waitLimit`;
    ///   whatever `body` throws.
    public func withRefreshLock<T: Sendable>(
        for key: CredentialKey, _ body: () async throws -> T
    ) async throws -> T {
        // A connection of this lock's that no holder uses now, or a new one: a session-level
        // advisory lock belongs to its connection, so a connection serves one holder at a time.
        let connection = idle.withLock { $0.popLast() } ?? PostgresConnection(configuration: configuration)
        let lockID = Self.lockID(for: key)
        let id = String(lockID)
        let limit = RefreshLock.waitLimit.map { min($0, waitLimit) } ?? waitLimit
        let (seconds, attoseconds) = limit.components
        let milliseconds = max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        let waitStart: String
        do {
            waitStart = try await connection.withSession { session throws(PostgresError) in
                // The wait is bounded by lock_timeout, not by the statement timeout meant for
                // the store's short statements.
                // A setting made by a statement applies from the next one: the wait needs its own.
                let started = try session.execute(
                    "SELECT set_config('statement_timeout', '0', false), set_config('lock_timeout', $1, false), "
                        + "clock_timestamp()::text",
                    [.text("\(milliseconds)ms")])
                _ = try session.execute("SELECT pg_advisory_lock($1::bigint)", [.text(id)])
                return started.rows.first?[2] ?? "infinity"
            }
        } catch {
            if error.sqlState == "55P03" {
                idle.withLock { $0.append(connection) }
                if limit < waitLimit { throw RefreshLock.waitedTooLong(limit) }
                throw CredentialStoreError(
                    kind: .timedOut,
                    message: "Another process has been renewing this login for longer than \(waitLimit); it was "
                        + "not renewed here. Try again, or look for a stuck worker with pg_locks.")
            }
            throw error.storeError("Could not take the token refresh lock")
        }
        held.withLock { $0[lockID] = (connection, waitStart) }
        // Released by pg_advisory_unlock, or by the server when this connection closes, whichever
        // comes first: a lost connection has released it already. Only a connection whose unlock
        // was answered is used again; any other is closed, which releases whatever it held.
        func release() async {
            held.withLock { _ = $0.removeValue(forKey: lockID) }
            let unlocked = try? await connection.withSession { session throws(PostgresError) in
                try session.execute("SELECT pg_advisory_unlock($1::bigint)", [.text(id)])
            }
            if unlocked?.rows.first?.first == "t" { idle.withLock { $0.append(connection) } }
        }
        do {
            let value = try await body()
            await release()
            return value
        } catch {
            await release()
            throw error
        }
    }

    /// Keeps `error` in a row of `sesame_renewal_failures` (made when first needed) beside the
    /// advisory lock this process holds for `key`, for the holders waiting behind it. Best
    /// effort: a row that cannot be written only means that they try again themselves.
    public func recordFailure(_ error: AuthError, for key: CredentialKey) async {
        let lockID = Self.lockID(for: key)
        guard let connection = held.withLock({ $0[lockID]?.connection }) else { return }
        let record = String(decoding: RefreshLock.failureRecord(error, at: Date()), as: UTF8.self)
        _ = try? await connection.withSession { session throws(PostgresError) in
            _ = try session.execute(
                "CREATE UNLOGGED TABLE IF NOT EXISTS sesame_renewal_failures (lock_id bigint PRIMARY KEY, "
                    + "record text NOT NULL, recorded_at timestamptz NOT NULL)")
            _ = try session.execute(
                "INSERT INTO sesame_renewal_failures VALUES ($1::bigint, $2, clock_timestamp()) ON CONFLICT (lock_id) "
                    + "DO UPDATE SET record = excluded.record, recorded_at = excluded.recorded_at",
                [.text(String(lockID)), .text(record)])
        }
    }

    /// The failure recorded for `key` (``recordFailure(_:for:)``) since this process began to
    /// wait for the lock it holds now, by the server's clock; `nil` when there is none.
    public func recordedFailure(for key: CredentialKey) async -> AuthError? {
        let lockID = Self.lockID(for: key)
        guard let holder = held.withLock({ $0[lockID] }) else { return nil }
        // No table yet means that no failure was ever recorded; asked first, so that the server
        // logs no error for each renewal until then.
        let rows = try? await holder.connection.withSession { session throws(PostgresError) -> PostgresRows? in
            let exists = try session.execute("SELECT to_regclass('sesame_renewal_failures') IS NOT NULL")
            guard exists.rows.first?.first == "t" else { return nil }
            return try session.execute(
                "SELECT record FROM sesame_renewal_failures WHERE lock_id = $1::bigint AND recorded_at >= $2::timestamptz",
                [.text(String(lockID)), .text(holder.waitStart)])
        }
        guard let record = rows?.rows.first?.first ?? nil else { return nil }
        return RefreshLock.failure(fromRecord: Data(record.utf8), since: .distantPast, provider: key.provider)
    }

    /// The advisory lock's number for `key`: the first eight bytes of a SHA-256 of the login's
    /// whole identity, so that two logins share a lock only by a 1-in-2⁶⁴ chance (which would
    /// only make one wait for the other).
    package static func lockID(for key: CredentialKey) -> Int64 {
        let identity = [
            "sesame-refresh", key.provider.rawValue, key.issuer ?? "", key.appID, key.account,
        ].joined(separator: "\u{0}")
        let digest = Crypto.sha256(Data(identity.utf8))
        return digest.prefix(8).reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }
}

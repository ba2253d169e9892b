import Foundation
import Sesame

/// An app's rate-limit budget shared by every worker of a fleet, in one PostgreSQL row.
///
/// Give each worker's API client one (for Facebook: `GraphUsageGovernor(budget:)`). The usage
/// every answer reports is written to the app's row of `sesame_rate_limit_budget` (per scope,
/// the latest figure), and each call first reads the row: calls slow down, by ``pacing``, when
/// the fleet's highest usage nears the limit, not when one process's does. When the provider
/// refuses a call because the app's limit is reached, the row records until when (the
/// provider's regain time, on the database's clock), and no worker makes a call before then.
/// When that time has come, exactly one worker of the fleet makes the next call — the probe,
/// which holds a PostgreSQL advisory lock while it is under way — and the others wait for its
/// answer: a refusal starts a new window, any other answer ends the throttling for all.
///
/// So from the first refusal on, the fleet makes at most one refused call per regain window.
/// Calls already under way when that first refusal arrives, or made at full speed within the
/// row's ``cacheLifetime``, cannot know of it; near the limit (usage above the pacing
/// threshold) and while throttled, every call reads the row afresh.
///
/// When PostgreSQL cannot be reached, calls are not held up: the budget says so once through
/// its warning handler and paces on this process's own usage (a `LocalRateLimitBudget`) for
/// ``retryInterval`` before trying the database again. Each attempt is bounded by the
/// configuration's connect and statement timeouts.
///
/// ```swift
/// let budget = PostgresRateLimitBudget(configuration: configuration, provider: "facebook", appID: appID)
/// try await budget.migrate()
/// let graph = GraphClient(provider: provider, transport: transport, accessToken: token,
///     governor: GraphUsageGovernor(budget: budget))
/// ```
public final class PostgresRateLimitBudget: RateLimitBudget {
    /// Where the server is.
    public let configuration: PostgresConfiguration
    /// The provider whose app this is.
    public let provider: ProviderID
    /// The app whose budget this is: the row's key, with ``provider``.
    public let appID: String
    public let pacing: RateLimitPacing
    /// How long a row read at low usage serves the next calls without reading it again.
    public let cacheLifetime: Duration
    /// How long a scope's figure counts after it was written; an older one is left out of the
    /// fleet's highest usage (it is written again when an answer still reports it).
    public let usageLifetime: Duration
    /// How long, after PostgreSQL could not be reached, calls pace on this process's usage
    /// alone before the database is tried again.
    public let retryInterval: Duration

    private let now: (@Sendable () -> Date)?
    private let warn: @Sendable (String) -> Void
    /// Reads and writes the row: one connection (a pool of one, as the store's migration takes).
    private let connection: PostgresConnectionPool
    /// Takes the probe's advisory lock, and waits on it for another worker's probe.
    private let probeConnection: PostgresConnection
    private let fallback: LocalRateLimitBudget
    private let lockID: String
    private let state = Locked<State>(State())

    /// The app's row as last read.
    struct Row: Sendable {
        /// The database's (or the injected) time when it was read, in seconds since 1970.
        var now: Double
        /// Each scope's percentage and when it was written.
        var usage: [String: (percent: Double, at: Double)]
        /// Until when calls are refused; `nil` when they are not.
        var throttledUntil: Double?

        func highest(lifetime: Double) -> Double? {
            usage.values.filter { $0.at > now - lifetime }.map(\.percent).max()
        }
    }

    private struct State {
        var row: Row?
        /// Until when ``row`` serves calls without a read; `nil` when it may not.
        var cachedUntil: ContinuousClock.Instant?
        /// Whether a task of this process holds, or is taking, the probe.
        var probing = false
        var probeWaiters: [CheckedContinuation<Void, Never>] = []
        /// When PostgreSQL last failed; `nil` while it answers.
        var failedAt: ContinuousClock.Instant?
    }

    /// A budget for `appID` of `provider` in the database `configuration` names.
    ///
    /// - Parameters:
    ///   - configuration: where the server is; each budget has two connections to it (the row's,
    ///     and the probe lock's).
    ///   - provider: the provider whose app it is.
    ///   - appID: the app; with `provider`, the row's key.
    ///   - pacing: how calls slow down near the limit, and the longest throttled window.
    ///   - cacheLifetime: how long a row read at low usage serves later calls.
    ///   - usageLifetime: how long a written figure counts.
    ///   - retryInterval: how long to pace alone after the database failed.
    ///   - now: the time the row's times are on; `nil` (the default) for the database's clock,
    ///     which every worker shares whatever its own clock says. Tests pass a clock they move.
    ///   - warning: told, in one sentence, when the database cannot be reached and when it can
    ///     again; by default nobody (the library never writes to the app's standard error: a
    ///     program that wants the sentence there passes a closure that writes it).
    public init(
        configuration: PostgresConfiguration, provider: ProviderID, appID: String,
        pacing: RateLimitPacing = RateLimitPacing(), cacheLifetime: Duration = .milliseconds(250),
        usageLifetime: Duration = .seconds(300), retryInterval: Duration = .seconds(5),
        now: (@Sendable () -> Date)? = nil,
        warning: (@Sendable (String) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.provider = provider
        self.appID = appID
        self.pacing = pacing
        self.cacheLifetime = cacheLifetime
        self.usageLifetime = usageLifetime
        self.retryInterval = retryInterval
        self.now = now
        self.warn = warning ?? { _ in }
        connection = PostgresConnectionPool(
            configuration: configuration, size: 1, onConnect: PostgresCredentialStore.checkSchema)
        probeConnection = PostgresConnection(configuration: configuration)
        fallback = LocalRateLimitBudget(pacing: pacing)
        lockID = String(Self.lockID(provider: provider, appID: appID))
    }

    /// Creates Sesame's tables when they are missing (the same migration as
    /// ``PostgresCredentialStore/migrate()``); harmless to run again.
    ///
    /// - Throws: `CredentialStoreError` when the server cannot be reached or its tables are newer.
    public func migrate() async throws { try await PostgresCredentialStore.migrate(connection) }

    // MARK: - Turns

    public func waitForTurn(on clock: any Clock<Duration>) async throws -> RateLimitTurn {
        var fresh = false
        while true {
            try Task.checkCancellation()
            if isResting { return try await fallbackTurn(on: clock) }
            let row: Row
            do {
                row = try await read(fresh: fresh)
            } catch {
                failed(error)
                return try await fallbackTurn(on: clock)
            }
            fresh = true
            guard let until = row.throttledUntil else {
                let delay = pacing.delay(forPercent: row.highest(lifetime: usageLifetime.inSeconds))
                if delay > .zero { try await clock.sleep(for: delay) }
                return .ordinary
            }
            if until > row.now {
                try await clock.sleep(for: .seconds(until - row.now))
                continue
            }
            do {
                if try await claimProbe() { return RateLimitTurn(kind: RateLimitTurn.probe) }
            } catch {
                failed(error)
                return try await fallbackTurn(on: clock)
            }
        }
    }

    public func finish(_ turn: RateLimitTurn, _ outcome: RateLimitOutcome) async {
        await fallback.finish(turn, outcome)
        guard turn.kind != RateLimitTurn.fallback else { return }
        var throttleFor: Duration?
        if case .throttled(let usage) = outcome {
            throttleFor = pacing.throttledWindow(regainAccessAfter: usage?.regainAccessAfter)
        }
        // A probe's answer, whatever it is, ends the window; no answer says nothing.
        let endsThrottling: Bool
        if turn.isProbe, case .answered = outcome { endsThrottling = true } else { endsThrottling = false }
        let usage = outcome.usage?.percentages ?? [:]
        if throttleFor != nil || endsThrottling || differsFromRow(usage) {
            do {
                try await write(usage: usage, throttleFor: throttleFor, endsThrottling: endsThrottling)
            } catch {
                failed(error)
            }
        }
        if turn.isProbe { await releaseProbe() }
    }

    // MARK: - The row

    private var nowParameter: PostgresParameter {
        now.map { .text(String($0().timeIntervalSince1970)) } ?? .null
    }

    private static let readSQL = """
        SELECT extract(epoch FROM n.now)::float8, b.usage::text, extract(epoch FROM b.throttled_until)::float8
        FROM (SELECT coalesce(to_timestamp($3::float8), clock_timestamp()) AS now) n
        LEFT JOIN sesame_rate_limit_budget b ON b.provider = $1 AND b.app_id = $2
        """

    /// The row, from the cache when it is young, the usage low and nothing throttled.
    private func read(fresh: Bool) async throws(PostgresError) -> Row {
        if !fresh, let cached = cachedRow() { return cached }
        let parameters = [.text(provider.rawValue), .text(appID), nowParameter]
        let rows = try await connection.withSession { session throws(PostgresError) in
            try session.execute(Self.readSQL, parameters)
        }
        let row = Self.row(rows.rows.first ?? [])
        remember(row)
        return row
    }

    private func cachedRow() -> Row? {
        state.withLock { state -> Row? in
            guard let until = state.cachedUntil, ContinuousClock.now < until else { return nil }
            return state.row
        }
    }

    private func remember(_ row: Row) {
        // Only a row that lets calls go at full speed serves later calls.
        let cacheable =
            row.throttledUntil == nil && (row.highest(lifetime: usageLifetime.inSeconds) ?? 0) <= pacing.threshold
        let recovered = state.withLock { state in
            state.row = row
            state.cachedUntil = cacheable ? ContinuousClock.now + cacheLifetime : nil
            defer { state.failedAt = nil }
            return state.failedAt != nil
        }
        if recovered {
            warn(
                "PostgreSQL answers again; the fleet's rate-limit budget for \(provider) app \(appID) is shared again.")
        }
    }

    private static func row(_ fields: [String?]) -> Row {
        let now = fields.first.flatMap { $0 }.flatMap(Double.init) ?? Date().timeIntervalSince1970
        var usage: [String: (percent: Double, at: Double)] = [:]
        if fields.count > 1, let text = fields[1], case .object(let members)? = JSONValue(parsing: Data(text.utf8)) {
            for (scope, value) in members {
                guard let pair = value.arrayValue, pair.count == 2, let percent = pair[0].doubleValue,
                    let at = pair[1].doubleValue
                else { continue }
                usage[scope] = (percent, at)
            }
        }
        let until = fields.count > 2 ? fields[2].flatMap(Double.init) : nil
        return Row(now: now, usage: usage, throttledUntil: until)
    }

    /// Whether `usage` says anything the row does not: a scope missing, or a figure a whole
    /// point away from the row's.
    private func differsFromRow(_ usage: [String: Double]) -> Bool {
        guard !usage.isEmpty else { return false }
        let lifetime = usageLifetime.inSeconds
        return state.withLock { state in
            guard let row = state.row else { return true }
            return usage.contains { scope, percent in
                guard let known = row.usage[scope], known.at > row.now - lifetime else { return true }
                return abs(known.percent - percent) >= 1
            }
        }
    }

    /// Merges `usage` into the row (each scope's figure with the time it was written), starts a
    /// throttled window of `throttleFor`, or ends the one that is over: then the probe's answer
    /// replaces the usage, whose figures at 100% were the refusals'.
    private func write(
        usage: [String: Double], throttleFor: Duration?, endsThrottling: Bool
    ) async throws(PostgresError) {
        let usageJSON = JSONValue.object(usage.mapValues { .number($0) }).jsonText
        let parameters: [PostgresParameter] = [
            .text(provider.rawValue), .text(appID), nowParameter, .text(usageJSON),
            throttleFor.map { .text(String($0.inSeconds)) } ?? .null, .text(endsThrottling ? "true" : "false"),
        ]
        let rows = try await connection.withSession { session throws(PostgresError) in
            try session.execute(
                """
                WITH n AS (SELECT coalesce(to_timestamp($3::float8), clock_timestamp()) AS now)
                INSERT INTO sesame_rate_limit_budget AS b (provider, app_id, usage, throttled_until, updated_at)
                SELECT $1, $2,
                    coalesce((SELECT jsonb_object_agg(key, jsonb_build_array(value, extract(epoch FROM n.now)))
                              FROM jsonb_each($4::jsonb)), '{}'::jsonb),
                    n.now + make_interval(secs => $5::float8), n.now
                FROM n
                ON CONFLICT (provider, app_id) DO UPDATE SET
                    usage = CASE WHEN $6::boolean THEN EXCLUDED.usage ELSE b.usage || EXCLUDED.usage END,
                    throttled_until = CASE
                        WHEN $5::float8 IS NOT NULL THEN greatest(b.throttled_until, EXCLUDED.throttled_until)
                        WHEN $6::boolean AND b.throttled_until <= EXCLUDED.updated_at THEN NULL
                        ELSE b.throttled_until END,
                    updated_at = EXCLUDED.updated_at
                RETURNING extract(epoch FROM updated_at)::float8, usage::text,
                    extract(epoch FROM throttled_until)::float8
                """, parameters)
        }
        remember(Self.row(rows.rows.first ?? []))
    }

    // MARK: - The probe

    /// Takes the probe when the window is over and no one else has it; otherwise waits for the
    /// worker that has it to finish. Returns whether this call is the probe.
    private func claimProbe() async throws(PostgresError) -> Bool {
        let mine = state.withLock { state in
            if state.probing { return false }
            state.probing = true
            return true
        }
        guard mine else {
            // Another task of this process probes: wait for its answer, then read again.
            await withCheckedContinuation { continuation in
                let waiting = state.withLock { state in
                    if state.probing { state.probeWaiters.append(continuation) }
                    return state.probing
                }
                if !waiting { continuation.resume() }
            }
            return false
        }
        let id = lockID
        let parameters = [.text(provider.rawValue), .text(appID), nowParameter]
        let claimed: Bool
        do throws(PostgresError) {
            claimed = try await probeConnection.withSession { session throws(PostgresError) -> Bool in
                let taken = try session.execute("SELECT pg_try_advisory_lock($1::bigint)", [.text(id)])
                if taken.rows.first?.first == "t" {
                    // Another worker's probe may have ended the window since the row was read.
                    let row = Self.row(try session.execute(Self.readSQL, parameters).rows.first ?? [])
                    if let until = row.throttledUntil, until <= row.now { return true }
                    _ = try session.execute("SELECT pg_advisory_unlock($1::bigint)", [.text(id)])
                    return false
                }
                // Another worker probes: its lock goes when it has written the answer (or with
                // its connection, should it die). The wait is bounded by the statement timeout;
                // after it, the row is read again and the wait begins anew.
                do throws(PostgresError) {
                    _ = try session.execute("SELECT pg_advisory_lock($1::bigint)", [.text(id)])
                    _ = try session.execute("SELECT pg_advisory_unlock($1::bigint)", [.text(id)])
                } catch {
                    guard error.kind == .timedOut else { throw error }
                }
                return false
            }
        } catch {
            endLocalProbe()
            throw error
        }
        if !claimed { endLocalProbe() }
        return claimed
    }

    private func releaseProbe() async {
        let id = lockID
        _ = try? await probeConnection.withSession { session throws(PostgresError) in
            try session.execute("SELECT pg_advisory_unlock($1::bigint)", [.text(id)])
        }
        endLocalProbe()
    }

    private func endLocalProbe() {
        let waiters = state.withLock { state in
            state.probing = false
            defer { state.probeWaiters = [] }
            return state.probeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - When PostgreSQL fails

    private var isResting: Bool {
        state.withLock { state in state.failedAt.map { $0.duration(to: .now) < retryInterval } ?? false }
    }

    private func failed(_ error: PostgresError) {
        let first = state.withLock { state in
            defer { state.failedAt = .now }
            return state.failedAt == nil
        }
        if first {
            warn(
                "The fleet's rate-limit budget for \(provider) app \(appID) could not be read or written in "
                    + "PostgreSQL (\(error.message)) This process paces on its own usage until it can be.")
        }
    }

    private func fallbackTurn(on clock: any Clock<Duration>) async throws -> RateLimitTurn {
        _ = try await fallback.waitForTurn(on: clock)
        return RateLimitTurn(kind: RateLimitTurn.fallback)
    }

    /// The advisory lock's number for the probe of `appID`: the first eight bytes of a SHA-256.
    static func lockID(provider: ProviderID, appID: String) -> Int64 {
        let identity = ["sesame-rate-limit-probe", provider.rawValue, appID].joined(separator: "\u{0}")
        return Crypto.sha256(Data(identity.utf8)).prefix(8).reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }
}

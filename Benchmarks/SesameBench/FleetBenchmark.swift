import CLibPQ
import Foundation
import Sesame
import SesameCurl
import SesameOIDC
import SesameOIDCEmulator
import SesamePostgres
import SesameTesting

// sesame-bench fleet: what a fleet's PostgreSQL store and lock cost, beside raw libpq doing the
// same work on the same row of the same server, in one run; and a refresh storm's wall time and
// refresh count through them against the OIDC emulator.
//
//   swift run -c release sesame-bench fleet [--json] [--runs N] [--sessions N] [--rounds N]

struct FleetBenchmark {
    static let benchmark = Benchmark(
        name: "fleet",
        summary: "PostgreSQL store/lock beside raw libpq; a refresh storm's wall time and grant count"
    ) { arguments in
        try await FleetBenchmark(arguments: arguments).run()
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// The goal for a load through the store beside the raw `SELECT` (p50 / p50).
    static let loadGoal = 1.5

    struct Report: Encodable {
        var benchmark = "fleet"
        var series: [KeyringBenchmark.Series]
        var ratios: [String: Double]
        var loadGoal: Double
        var loadGoalMet: Bool
        var lockRoundTripsPerSecond: Double
        var storm: Storm
    }

    struct Storm: Encodable {
        var sessions: Int
        var rounds: Int
        var wallMillisecondsP50: Double
        var wallMillisecondsMax: Double
        /// Refresh grants per round (each must be 1), refused grants and revoked families in all.
        var refreshGrants: [Int]
        var refusedRefreshGrants: Int
        var revokedFamilies: Int
        var tokensDiffering: Int
    }

    let json: Bool
    let runs: Int
    let sessions: Int
    let rounds: Int

    init(arguments: [String]) throws {
        var json = false
        var runs = 2000
        var sessions = 40
        var rounds = 5
        var rest = arguments[...]
        func number(_ option: String) throws -> Int {
            guard let value = rest.popFirst().flatMap(Int.init), value > 0 else {
                throw Failure(description: "\(option) needs a positive number")
            }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--json": json = true
            case "--runs": runs = try number(argument)
            case "--sessions": sessions = try number(argument)
            case "--rounds": rounds = try number(argument)
            default:
                throw Failure(
                    description: "unknown argument '\(argument)'; usage: sesame-bench fleet [--json] [--runs N] "
                        + "[--sessions N] [--rounds N]")
            }
        }
        self.json = json
        self.runs = runs
        self.sessions = sessions
        self.rounds = rounds
    }

    func run() async throws {
        progress("starting PostgreSQL")
        let server = try BenchPostgres.start()
        progress("PostgreSQL on 127.0.0.1:\(server.port)")
        defer { server.stop() }
        let report = try await measure(server)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            StandardStreams.out(try encoder.encode(report) + Data("\n".utf8))
        } else {
            StandardStreams.out(Data(Self.table(report).utf8))
        }
    }

    func measure(_ server: BenchPostgres) async throws -> Report {
        let configuration = PostgresConfiguration(connectionString: server.connectionString)
        let key = try CredentialEncryptionKey(id: "bench", bytes: Crypto.randomBytes(count: 32))
        let store = PostgresCredentialStore(configuration: configuration, key: key)
        try await store.migrate()
        let credential = KeyringBenchmark.credential("bench")
        try await store.save(credential)
        let raw = try RawConnection(server.connectionString)
        let keyParameters = [
            credential.key.provider.rawValue, credential.key.issuer ?? "", credential.key.appID, credential.key.account,
        ]
        let select = """
            SELECT key_id, sealed FROM sesame_credentials
            WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
            """
        // The row's own sealed bytes, written back unchanged by the raw UPDATE.
        let sealed = try raw.sealedBytes(select, keyParameters)
        let update = """
            UPDATE sesame_credentials SET sealed = $5, saved_at = now()
            WHERE provider = $1 AND issuer = $2 AND app_id = $3 AND account = $4
            """

        progress("load and raw SELECT, save and raw UPDATE: \(runs) each, interleaved")
        for _ in 0..<50 {
            _ = try await store.load(credential.key)
            try raw.execute(select, keyParameters)
        }
        var loads: [Double] = []
        var selects: [Double] = []
        var saves: [Double] = []
        var updates: [Double] = []
        for _ in 0..<runs {
            loads.append(try await time { _ = try await store.load(credential.key) })
            selects.append(try await time { try raw.execute(select, keyParameters) })
            saves.append(try await time { try await store.save(credential) })
            updates.append(try await time { try raw.execute(update, keyParameters, bytes: sealed) })
        }
        guard try await store.load(credential.key)?.token == credential.token else {
            throw Failure(description: "the credential read back differs from the one saved")
        }

        let lockRuns = max(runs / 4, 50)
        progress("lock-and-release round trips: \(lockRuns) through PostgresRefreshLock and raw")
        let lock = PostgresRefreshLock(configuration: configuration)
        let lockID = String(PostgresRefreshLock.lockID(for: credential.key))
        var locked: [Double] = []
        var rawPair: [Double] = []
        var rawConnectPair: [Double] = []
        for _ in 0..<lockRuns {
            locked.append(try await time { try await lock.withRefreshLock(for: credential.key) {} })
            rawPair.append(
                try await time {
                    try raw.execute("SELECT pg_advisory_lock($1::bigint)", [lockID])
                    try raw.execute("SELECT pg_advisory_unlock($1::bigint)", [lockID])
                })
            rawConnectPair.append(
                try await time {
                    let fresh = try RawConnection(server.connectionString)
                    try fresh.execute("SELECT pg_advisory_lock($1::bigint)", [lockID])
                    try fresh.execute("SELECT pg_advisory_unlock($1::bigint)", [lockID])
                })
        }

        let storm = try await refreshStorm(configuration, key: key)

        let series = [
            KeyringBenchmark.Series(name: "PostgresCredentialStore.load", milliseconds: loads),
            KeyringBenchmark.Series(name: "raw libpq SELECT of the row", milliseconds: selects),
            KeyringBenchmark.Series(name: "PostgresCredentialStore.save", milliseconds: saves),
            KeyringBenchmark.Series(name: "raw libpq UPDATE of the row", milliseconds: updates),
            KeyringBenchmark.Series(name: "PostgresRefreshLock lock+release", milliseconds: locked),
            KeyringBenchmark.Series(name: "raw lock+unlock, open connection", milliseconds: rawPair),
            KeyringBenchmark.Series(name: "raw connect+lock+unlock+close", milliseconds: rawConnectPair),
        ]
        let loadRatio = series[0].p50 / series[1].p50
        return Report(
            series: series,
            ratios: [
                "store load p50 / raw SELECT p50": loadRatio,
                "store save p50 / raw UPDATE p50": series[2].p50 / series[3].p50,
                "PostgresRefreshLock p50 / raw lock+unlock p50": series[4].p50 / series[5].p50,
                "PostgresRefreshLock p50 / raw connect+lock+unlock p50": series[4].p50 / series[6].p50,
            ],
            loadGoal: Self.loadGoal, loadGoalMet: loadRatio <= Self.loadGoal,
            lockRoundTripsPerSecond: 1000 / series[4].mean, storm: storm)
    }

    /// `sessions` sessions, spread over four "machines" (a store and a lock each, sharing only the
    /// server), open one login whose access token has expired, against the OIDC emulator with
    /// rotating refresh tokens, `rounds` times.
    func refreshStorm(_ configuration: PostgresConfiguration, key: CredentialEncryptionKey) async throws -> Storm {
        progress("refresh storm: \(sessions) sessions on 4 machines, \(rounds) rounds")
        let emulator = try OIDCEmulator()
        let endpoints = try await emulator.start()
        do {
            let storm = try await refreshStorm(configuration, key: key, emulator: emulator, endpoints: endpoints)
            await emulator.stop()
            return storm
        } catch {
            await emulator.stop()
            throw error
        }
    }

    func refreshStorm(
        _ configuration: PostgresConfiguration, key: CredentialEncryptionKey, emulator: OIDCEmulator,
        endpoints: OIDCEmulatorEndpoints
    ) async throws -> Storm {
        let transport = CurlTransport()
        let provider = try await OIDCProvider.discover(
            OIDCConfiguration(providerID: .oidc, issuer: endpoints.issuer, clientID: OIDCEmulator.defaultClientID),
            transport: transport)
        let machines = (0..<4).map { _ in
            (
                PostgresCredentialStore(configuration: configuration, key: key),
                PostgresRefreshLock(configuration: configuration)
            )
        }
        // The login, by a device login the emulator approves itself.
        let login = OIDCSession(
            provider: provider, transport: transport, store: machines[0].0, account: "storm",
            loginUI: DeviceLoginFlow(
                dialect: try OIDCDeviceDialect(oidc: provider), presenter: EmulatorApprover(emulator: emulator),
                transport: transport, clock: ManualClock(autoAdvance: true)))
        try await login.open(allowLoginUI: true)
        let storedKey = login.session.key

        var walls: [Double] = []
        var grants: [Int] = []
        var differing = 0
        for _ in 0..<rounds {
            // The stored access token expired a minute ago; the refresh token is good.
            guard var stored = try await machines[0].0.load(storedKey) else {
                throw Failure(description: "the storm's login is not in the store")
            }
            stored.token.expirationDate = Date().addingTimeInterval(-60)
            try await machines[0].0.save(stored)
            let before = emulator.refreshCounters.refreshGrants
            let started = ContinuousClock.now
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<sessions {
                    let (store, lock) = machines[index % 4]
                    group.addTask {
                        let session = OIDCSession(
                            provider: provider, transport: transport, store: store, account: "storm",
                            configuration: .init(refreshLocking: .service(lock)))
                        try await session.open(allowLoginUI: false)
                        return try await session.validToken().tokenString
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            walls.append(CLIBenchmark.milliseconds(ContinuousClock.now - started))
            grants.append(emulator.refreshCounters.refreshGrants - before)
            differing += Set(tokens).count - 1
        }
        let counters = emulator.refreshCounters
        return Storm(
            sessions: sessions, rounds: rounds,
            wallMillisecondsP50: KeyringBenchmark.Series.percentile(walls.sorted(), 0.5),
            wallMillisecondsMax: walls.max() ?? .nan, refreshGrants: grants,
            refusedRefreshGrants: counters.refusedRefreshGrants, revokedFamilies: counters.revokedFamilies,
            tokensDiffering: differing)
    }

    static func table(_ report: Report) -> String {
        func figure(_ value: Double) -> String { String(format: "%9.3f", value) }
        var text = "sesame-bench fleet: a real PostgreSQL on 127.0.0.1, milliseconds per call\n\n"
        text += "operation".padding(toLength: 40, withPad: " ", startingAt: 0) + "      p50       p99      mean  runs\n"
        for series in report.series {
            text += series.name.padding(toLength: 40, withPad: " ", startingAt: 0)
            text += "\(figure(series.p50)) \(figure(series.p99)) \(figure(series.mean))  \(series.runs)\n"
        }
        text += "\nratios\n"
        for (name, value) in report.ratios.sorted(by: { $0.key < $1.key }) {
            text += "  " + name.padding(toLength: 56, withPad: " ", startingAt: 0) + String(format: "%7.2fx\n", value)
        }
        let verdict = report.loadGoalMet ? "PASS" : "FAIL"
        text += String(
            format: "\nload goal: store load <= %.1fx raw SELECT: %@\n", report.loadGoal, verdict)
        text += String(
            format: "PostgresRefreshLock: %.0f lock-and-release round trips per second\n",
            report.lockRoundTripsPerSecond)
        let storm = report.storm
        let once = storm.refreshGrants.allSatisfy { $0 == 1 }
        text += "\nrefresh storm: \(storm.sessions) sessions on 4 machines, one expired login, \(storm.rounds) rounds\n"
        text += String(
            format: "  wall time p50 %.1f ms, max %.1f ms\n", storm.wallMillisecondsP50, storm.wallMillisecondsMax)
        text += "  refresh grants per round: \(storm.refreshGrants.map(String.init).joined(separator: ", "))"
        text += " (must be 1: \(once ? "PASS" : "FAIL"))\n"
        text += "  refused grants \(storm.refusedRefreshGrants), revoked families \(storm.revokedFamilies), "
        text += "sessions with another token than their round's \(storm.tokensDiffering)\n"
        return text
    }

    func time(_ body: () async throws -> Void) async throws -> Double {
        let started = ContinuousClock.now
        try await body()
        return CLIBenchmark.milliseconds(ContinuousClock.now - started)
    }

    func progress(_ message: String) {
        StandardStreams.err(Data("sesame-bench fleet: \(message)\n".utf8))
    }
}

/// Approves the device login at the emulator as soon as it is shown: the person, in a benchmark.
private struct EmulatorApprover: DeviceCodePresenter {
    let emulator: OIDCEmulator
    func present(_ authorization: DeviceAuthorization) async {
        try? await emulator.approveDevice(userCode: authorization.userCode)
    }
    func stillWaiting(_ authorization: DeviceAuthorization, nextPollIn: Duration) async {}
    func finished(_ end: DeviceLoginEnd) async {}
}

/// A plain libpq connection, the baseline: each statement is one `PQexecParams` with text
/// parameters (and one binary one), its values read as C strings, as a minimal client would.
private final class RawConnection {
    let connection: OpaquePointer

    init(_ connectionString: String) throws {
        guard let connection = PQconnectdb(connectionString), PQstatus(connection) == CONNECTION_OK else {
            throw FleetBenchmark.Failure(description: "raw libpq could not connect")
        }
        self.connection = connection
    }

    deinit { PQfinish(connection) }

    /// Runs `sql` with `parameters` (and `bytes` as one more, binary, parameter); reads every value.
    @discardableResult
    func execute(_ sql: String, _ parameters: [String], bytes: [UInt8]? = nil) throws -> [[String]] {
        var values = parameters.map { UnsafePointer(strdup($0)) }
        var lengths = [Int32](repeating: 0, count: parameters.count)
        var formats = [Int32](repeating: 0, count: parameters.count)
        let copy = bytes.map { bytes in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes {
                UnsafeMutableRawPointer(copy).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
            return copy
        }
        if let copy, let bytes {
            values.append(UnsafePointer(copy))
            lengths.append(Int32(bytes.count))
            formats.append(1)
        }
        defer {
            for value in values.prefix(parameters.count) { free(UnsafeMutableRawPointer(mutating: value)) }
            copy?.deallocate()
        }
        let result = PQexecParams(connection, sql, Int32(values.count), nil, values, lengths, formats, 0)
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            throw FleetBenchmark.Failure(description: "raw libpq: \(String(cString: PQerrorMessage(connection)))")
        }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { String(cString: PQgetvalue(result, row, $0)) }
        }
    }

    /// The row's sealed bytes, from the hex text of its `bytea`.
    func sealedBytes(_ select: String, _ parameters: [String]) throws -> [UInt8] {
        guard let hex = try execute(select, parameters).first?[1], hex.hasPrefix("\\x") else {
            throw FleetBenchmark.Failure(description: "the benchmark's row is missing")
        }
        var bytes: [UInt8] = []
        var index = hex.index(hex.startIndex, offsetBy: 2)
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }
}

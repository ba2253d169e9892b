/// Where a PostgreSQL server is and how long to wait for it.
///
/// The connection itself is described the way every PostgreSQL client describes it: a libpq
/// connection string (`host=db.internal dbname=sesame user=worker`) or URI
/// (`postgresql://worker@db.internal/sesame`), and whatever it leaves out comes from libpq's
/// environment variables (`PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`, `PGPASSWORD`,
/// `PGSSLMODE`, …) and `~/.pgpass`. Put the password in `~/.pgpass` or `PGPASSWORD`, never
/// in a command's arguments, which every user of the machine can read with `ps`.
public struct PostgresConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// A libpq connection string or URI; empty takes everything from libpq's environment
    /// variables and defaults.
    public var connectionString: String
    /// How long to wait for the server to accept a connection. libpq counts whole seconds and
    /// waits at least two; a server that refuses the connection is reported at once.
    public var connectTimeout: Duration
    /// How long the server lets one statement run before cancelling it
    /// (PostgreSQL's `statement_timeout`, set on every connection).
    public var statementTimeout: Duration
    /// How many connections a ``PostgresCredentialStore`` keeps at most: calls made at the same
    /// time by many tasks of one process run side by side on up to this many.
    public var poolSize: Int
    /// How long a save keeps trying while the server cannot be reached (it restarts, fails
    /// over): a save usually follows a renewal, and a rotated refresh token that is not saved is
    /// lost, so it is worth waiting for. Reads fail at once.
    public var saveRetryLimit: Duration

    /// Creates a configuration.
    public init(
        connectionString: String = "", connectTimeout: Duration = .seconds(10),
        statementTimeout: Duration = .seconds(5), poolSize: Int = 4, saveRetryLimit: Duration = .seconds(20)
    ) {
        self.connectionString = connectionString
        self.connectTimeout = connectTimeout
        self.statementTimeout = statementTimeout
        self.poolSize = poolSize
        self.saveRetryLimit = saveRetryLimit
    }

    /// The variable a program reads a connection string or URI from (``fromEnvironment(_:)``).
    public static let connectionVariable = "SESAME_POSTGRES"

    /// The configuration a program takes from its environment: the connection string in
    /// `SESAME_POSTGRES` when it is set, and otherwise libpq's own variables (`PGHOST`,
    /// `PGPORT`, `PGDATABASE`, `PGUSER`, `PGSSLMODE`, `PGSSLROOTCERT`, …), which libpq reads
    /// from the process's environment, with the password in `~/.pgpass` or `PGPASSFILE`.
    public static func fromEnvironment(_ environment: [String: String]) -> PostgresConfiguration {
        PostgresConfiguration(connectionString: environment[connectionVariable] ?? "")
    }

    /// Says the timeouts but not the connection string, which may hold a password.
    public var description: String {
        "PostgresConfiguration(connectTimeout: \(connectTimeout), statementTimeout: \(statementTimeout), "
            + "poolSize: \(poolSize))"
    }

    /// The connect timeout as libpq's `connect_timeout`: whole seconds, rounded up, at least 2.
    var connectTimeoutSeconds: Int {
        let (seconds, attoseconds) = connectTimeout.components
        return max(2, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }

    /// The statement timeout in whole milliseconds, rounded up, at least 1 (0 would mean none).
    var statementTimeoutMilliseconds: Int {
        let (seconds, attoseconds) = statementTimeout.components
        let milliseconds = Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        return max(1, milliseconds)
    }
}

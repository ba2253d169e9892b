import Sesame
import SesameDesktop
import SesamePostgres

/// A fleet's store as a program registers it (`Desktop.bootstrap(..., storage: [PostgresStorage()])`):
/// `--storage postgres` (or `SESAME_STORAGE=postgres`) keeps logins in a `PostgresCredentialStore`,
/// shared by every process and machine that reaches the database, encrypted under the operator's
/// key, renewed under a fleet-wide lock. The connection comes from `SESAME_POSTGRES` or libpq's
/// variables, the key from `SESAME_POSTGRES_KEY_FILE` or `SESAME_POSTGRES_KEY`. `auto` never
/// chooses it: a fleet's store is chosen by name.
public struct PostgresStorage: StorageBackend {
    /// Creates the registration.
    public init() {}

    public var name: String { "postgres" }

    public var summary: String {
        "a PostgreSQL database shared by a fleet (SESAME_POSTGRES, SESAME_POSTGRES_KEY_FILE)"
    }

    /// The fleet's store: the connection and the keys from the environment. Nothing is sent to
    /// the server yet; the first call reports an unreachable one.
    ///
    /// - Throws: ``DesktopError`` (78) when the keys are missing or wrong.
    public func open(environment: [String: String]) throws -> (store: any CredentialStore, backend: String) {
        let keys: CredentialEncryptionKeys
        do {
            keys = try CredentialEncryptionKeys.fromEnvironment(environment)
        } catch let error as CredentialStoreError {
            throw DesktopError(error.message, status: .config)
        }
        let configuration = PostgresConfiguration.fromEnvironment(environment)
        let target =
            configuration.connectionString.isEmpty
            ? "from libpq's variables"
            : "from \(PostgresConfiguration.connectionVariable)"
        return (
            PostgresCredentialStore(configuration: configuration, keys: keys),
            "postgres (connection \(target), key \"\(keys.current.id)\")"
        )
    }

    /// A missing, wrong or refused key is a setting to fix (78); tables of a newer Sesame, the
    /// store being unusable until it is upgraded (69).
    public func status(of error: CredentialStoreError) -> DesktopError.Status? {
        switch error.kind {
        case .invalidKey, .wrongKey, .authenticationFailed: .config
        case .incompatibleSchema: .unavailable
        default: nil
        }
    }

    public var variables: [(name: String, summary: String)] {
        [
            (
                "SESAME_POSTGRES",
                "With the postgres storage: a libpq connection string or URI; when unset, libpq's own variables "
                    + "(PGHOST, PGPORT, PGDATABASE, PGUSER, PGSSLMODE, PGSSLROOTCERT) and ~/.pgpass."
            ),
            (
                "SESAME_POSTGRES_KEY_FILE, SESAME_POSTGRES_KEY",
                "With the postgres storage: a file holding, or the text of, the keys logins are encrypted with, one "
                    + "ID:BASE64 line each (openssl rand -base64 32), the current key first."
            ),
        ]
    }

    /// PostgreSQL's advisory lock, held by one worker of the fleet at a time.
    public func refreshLocking(environment: [String: String]) -> RefreshLocking {
        .service(PostgresRefreshLock(configuration: .fromEnvironment(environment)))
    }

    /// The app's budget in the fleet's database (`PostgresRateLimitBudget`): when the provider
    /// throttles the app, every process holds back until the window is over.
    public func rateLimitBudget(
        provider: ProviderID, appID: String, environment: [String: String]
    ) -> (any RateLimitBudget)? {
        PostgresRateLimitBudget(configuration: .fromEnvironment(environment), provider: provider, appID: appID)
    }

    /// What `sesame doctor` says of a fleet's store: the server and how it is reached, the
    /// tables, and the keys.
    public func doctorLines(for store: any CredentialStore) async -> [DoctorLine] {
        guard let store = store as? PostgresCredentialStore else { return [] }
        let server: PostgresServerReport
        do {
            server = try await store.serverReport()
        } catch {
            return [DoctorLine(.problem, "PostgreSQL: \(error.sentence)")]
        }
        var lines = [
            DoctorLine(
                server.tls == nil ? .warning : .ok,
                "PostgreSQL \(server.version) at \(server.address), database \(server.database), user \(server.user), "
                    + (server.tls.map { "over \($0)." } ?? "not encrypted."),
                fix: server.tls == nil && server.address != "a local socket"
                    ? "set PGSSLMODE=verify-full and PGSSLROOTCERT to the server's CA" : nil)
        ]
        let version: Int?
        do {
            version = try await store.schemaVersion()
        } catch {
            return lines + [DoctorLine(.problem, "Sesame's tables: \(error.sentence)")]
        }
        guard version != nil else {
            return lines + [
                DoctorLine(
                    .problem, "Sesame's tables are not in this database yet.",
                    fix: "log in once with --storage postgres (which makes them), or have a DBA run:\n"
                        + PostgresCredentialStore.migrationSQL)
            ]
        }
        lines.append(DoctorLine(.ok, "Sesame's tables: version \(version!)."))
        do {
            for use in try await store.keyReport() {
                let rows = use.rows == 1 ? "1 login" : "\(use.rows) logins"
                if !use.known {
                    lines.append(
                        DoctorLine(
                            .problem,
                            "\(rows) encrypted with the key \"\(use.id)\", which is not among the keys given.",
                            fix: "add that key to the key file after the current one"))
                } else if use.failing.count == use.rows {
                    lines.append(
                        DoctorLine(
                            .problem,
                            "\(rows) under the key id \"\(use.id)\" \(use.rows == 1 ? "does" : "do") not decrypt with the key "
                                + "of that id.",
                            fix: "give the key they were saved with; a key must keep its id"))
                } else if !use.opens {
                    let named = use.failing.prefix(5).map { "\($0)".sanitizedForTerminal }.joined(separator: "; ")
                    let more = use.failing.count > 5 ? "; and \(use.failing.count - 5) more" : ""
                    lines.append(
                        DoctorLine(
                            .problem,
                            "\(use.failing.count) of \(rows) encrypted with \"\(use.id)\" \(use.failing.count == 1 ? "does" : "do") "
                                + "not decrypt with it (altered since they were saved): \(named)\(more). The other "
                                + "\(use.rows - use.failing.count) open.",
                            fix: "log in again to those logins to replace them; the key itself is right"))
                } else {
                    let role =
                        use.isCurrent
                        ? "the current key" : "a previous key (re-encrypted with the current one when saved)"
                    lines.append(DoctorLine(.ok, "\(rows) encrypted with \"\(use.id)\", \(role)."))
                }
            }
        } catch {
            lines.append(DoctorLine(.problem, "The keys could not be checked: \(error.sentence)"))
        }
        return lines
    }
}

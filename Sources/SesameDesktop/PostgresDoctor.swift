import Sesame
import SesamePostgres

extension DesktopStorage {
    /// What `sesame doctor` says of a fleet's store: the server and how it is reached, the
    /// tables, and the keys; empty for any other store.
    public static func doctorLines(for selection: StorageSelection) async -> [DoctorLine] {
        guard let store = selection.store as? PostgresCredentialStore else { return [] }
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

internal import CLibPQ
import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#endif

/// A value sent to the server as a statement's parameter, never spliced into the SQL.
package enum PostgresParameter: Sendable, Hashable {
    /// Text, for `text` columns and for anything the server casts from text.
    case text(String)
    /// Raw bytes, sent in binary, for `bytea` columns.
    case bytes([UInt8])
    /// SQL's `NULL`.
    case null
}

/// The rows a statement returned, copied out of libpq's result in text form.
package struct PostgresRows: Sendable {
    /// Each row's fields; `nil` for `NULL`.
    package var rows: [[String?]]

    /// The `bytea` in text form (`\x` and hexadecimal digits, PostgreSQL's default output) at
    /// `row`, `column` as bytes; `nil` for `NULL` or for text in another form.
    package func bytes(row: Int, column: Int) -> [UInt8]? {
        guard let text = rows[row][column] else { return nil }
        let digits = Array(text.utf8)
        guard digits.count >= 2, digits[0] == UInt8(ascii: "\\"), digits[1] == UInt8(ascii: "x"),
            digits.count % 2 == 0
        else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity((digits.count - 2) / 2)
        var index = 2
        while index < digits.count {
            guard let high = Self.hexValue(digits[index]), let low = Self.hexValue(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A failed connection or statement: the `CredentialStoreError` kind it maps to, the
/// server's SQLSTATE when it sent one, and a sentence that says what happened and what to do.
/// It never holds a parameter's value or the connection string, either of which may be secret.
package struct PostgresError: Error, Sendable {
    /// The kind of store failure this is.
    package var kind: CredentialStoreError.Kind
    /// The server's five-character SQLSTATE (`42P01`: no such table), when it sent one.
    package var sqlState: String?
    /// What happened and what to do.
    package var message: String

    /// This failure as a store error, after `action` ("Could not save …").
    package func storeError(_ action: String) -> CredentialStoreError {
        CredentialStoreError(kind: kind, message: "\(action): \(message)")
    }
}

/// One connection to PostgreSQL through libpq, used by one caller at a time.
///
/// It owns its `PGconn` and frees it in `deinit`. libpq's calls block, so every call runs on a
/// serial Dispatch queue of its own, never on the cooperative pool, and holds the
/// connection's lock for its whole length, which keeps callers of one connection in turn, as
/// libpq requires. The connection is made on first use and made again when it broke (the server
/// restarted, the network failed); every new connection gets the configured statement timeout
/// before anything else runs on it.
package final class PostgresConnection: Sendable {
    package let configuration: PostgresConfiguration
    /// The `PGconn`, or `nil` before the first use; only touched while this lock is held.
    private let handle = Locked<OpaquePointer?>(nil)
    /// Where calls run, one at a time.
    private let queue = DispatchQueue(label: "sesame.postgres")
    /// Runs once on each new connection, inside its first session (the store checks the schema).
    private let onConnect: @Sendable (borrowing PostgresSession) throws(PostgresError) -> Void

    /// Creates a connection to the server `configuration` names; nothing is sent until the first
    /// ``withSession(_:)``. `onConnect` runs on every new connection before its first use.
    package init(
        configuration: PostgresConfiguration,
        onConnect: @escaping @Sendable (borrowing PostgresSession) throws(PostgresError) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.onConnect = onConnect
    }

    deinit {
        handle.withLock { connection in
            if let connection { PQfinish(connection) }
            connection = nil
        }
    }

    /// Runs `body` with the connection on a thread of its own, connecting first when needed.
    /// Statements `body` runs are not interleaved with any other caller's, so a transaction
    /// begun in `body` and ended in it is the caller's alone.
    ///
    /// When `body` fails because a connection made earlier turns out to be gone (the server
    /// restarted, or ended it), a new connection is made and `body` runs once more on it, so a
    /// restart costs the caller nothing. `body` must therefore be safe to run twice: a statement
    /// whose reply was lost may have been carried out.
    package func withSession<T: Sendable>(
        _ body: @escaping @Sendable (borrowing PostgresSession) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        try await onQueue { () throws(PostgresError) -> T in
            try self.handle.withLock { (connection: inout OpaquePointer?) throws(PostgresError) -> T in
                if let existing = connection, PQstatus(existing) != CONNECTION_OK {
                    PQfinish(existing)
                    connection = nil
                }
                let reused = connection != nil
                if connection == nil { connection = try self.open() }
                do throws(PostgresError) {
                    return try body(PostgresSession(connection: connection!))
                } catch {
                    guard reused, PQstatus(connection!) != CONNECTION_OK else { throw error }
                    PQfinish(connection!)
                    connection = nil
                    connection = try self.open()
                    return try body(PostgresSession(connection: connection!))
                }
            }
        }
    }

    /// Runs `body` on the connection's serial queue (a thread of Dispatch's, not of Swift's
    /// cooperative pool, which libpq's blocking calls must not hold) and returns what it did.
    /// A queue's thread is kept between calls; a thread made for each call cost more than the
    /// statement it ran.
    private func onQueue<T: Sendable>(
        _ body: @escaping @Sendable () throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<T, PostgresError>, Never>) in
            queue.async { continuation.resume(returning: Result { () throws(PostgresError) -> T in try body() }) }
        }
        return try result.get()
    }

    /// A new connection that passed `onConnect`; blocks.
    private func open() throws(PostgresError) -> OpaquePointer {
        let fresh = try Self.connect(configuration)
        do throws(PostgresError) {
            try onConnect(PostgresSession(connection: fresh))
        } catch {
            PQfinish(fresh)
            throw error
        }
        return fresh
    }

    /// Opens a connection and sets its statement timeout; blocks.
    private static func connect(_ configuration: PostgresConfiguration) throws(PostgresError) -> OpaquePointer {
        // Later keywords win over earlier ones, so the operator's connection string (expanded
        // from `dbname`) may name anything but the timeouts, which come last.
        let parameters: [(String, String)] = [
            ("fallback_application_name", "sesame"),
            ("dbname", configuration.connectionString),
            ("connect_timeout", String(configuration.connectTimeoutSeconds)),
        ]
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordPointers = keywords.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let connection = PQconnectdbParams(keywordPointers, valuePointers, 1) else {
            throw PostgresError(
                kind: .unavailable, sqlState: nil,
                message: "libpq could not allocate a connection; the process is out of memory.")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let error = connectionError(connection)
            PQfinish(connection)
            throw error
        }
        // libpq prints the server's notices ("relation … already exists, skipping") on standard
        // error by default; a library has no business writing there.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        do throws(PostgresError) {
            let session = PostgresSession(connection: connection)
            _ = try session.execute(
                "SELECT set_config('statement_timeout', $1, false)",
                [.text(String(configuration.statementTimeoutMilliseconds))])
        } catch {
            PQfinish(connection)
            throw error
        }
        return connection
    }

    /// Why `connection` failed to connect, in libpq's words (which name the host and port, and
    /// never the password), with what to do.
    private static func connectionError(_ connection: OpaquePointer) -> PostgresError {
        let detail = oneLine(String(cString: PQerrorMessage(connection)))
        if detail.contains("timeout expired") {
            return PostgresError(
                kind: .timedOut, sqlState: nil,
                message: "PostgreSQL did not accept a connection in time (\(detail)). Check that the server is "
                    + "reachable from this machine, or give it a longer connect timeout.")
        }
        if detail.contains("authentication failed") || detail.contains("no password supplied")
            || detail.contains("no pg_hba.conf entry")
        {
            return PostgresError(
                kind: .authenticationFailed, sqlState: nil,
                message: "PostgreSQL refused the login (\(detail)). Check the user name, and the password in "
                    + "~/.pgpass or PGPASSWORD, and that pg_hba.conf lets this user in from this machine.")
        }
        if ["SSL", "certificate", "server name"].contains(where: { detail.contains($0) }) {
            return PostgresError(
                kind: .unavailable, sqlState: nil,
                message: "could not connect to PostgreSQL over TLS (\(detail)). Check that sslrootcert (or "
                    + "PGSSLROOTCERT) names the CA that signed the server's certificate, that the host name is one "
                    + "the certificate names (sslmode=verify-full checks it), and the server's ssl settings.")
        }
        return PostgresError(
            kind: .unavailable, sqlState: nil,
            message: "could not connect to PostgreSQL (\(detail)). Check that the server is running and that "
                + "the connection string, or PGHOST, PGPORT and PGDATABASE, name it.")
    }

    /// libpq's messages end in a newline and may span lines; one line reads better in an error.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }
}

/// A connection lent to a ``PostgresConnection/withSession(_:)`` body; valid only inside it.
package struct PostgresSession: ~Copyable {
    fileprivate let connection: OpaquePointer

    /// Runs one statement with `parameters` bound to `$1`, `$2`, …, and returns its rows.
    ///
    /// The statement is sent with `PQexecParams`, so values travel apart from the SQL and are
    /// never parsed as SQL. Text parameters may not contain a NUL character (PostgreSQL's text
    /// cannot hold one).
    package func execute(_ sql: String, _ parameters: [PostgresParameter] = []) throws(PostgresError) -> PostgresRows {
        var values: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        defer { values.forEach { free($0) } }
        // Copies that libpq reads until PQexecParams returns, all from malloc (strdup's too), so
        // one `free` releases each.
        for parameter in parameters {
            switch parameter {
            case .null:
                values.append(nil)
                lengths.append(0)
                formats.append(0)
            case .text(let text):
                guard !text.utf8.contains(0) else {
                    throw PostgresError(
                        kind: .ioFailure, sqlState: nil,
                        message: "a value contains a NUL character, which PostgreSQL's text cannot hold; "
                            + "remove it from the account or app name.")
                }
                values.append(strdup(text))
                lengths.append(0)
                formats.append(0)
            case .bytes(let bytes):
                let copy = malloc(max(1, bytes.count))!.assumingMemoryBound(to: CChar.self)
                bytes.withUnsafeBytes { source in
                    if let base = source.baseAddress {
                        UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: source.count)
                    }
                }
                values.append(copy)
                lengths.append(Int32(bytes.count))
                formats.append(1)
            }
        }
        let valuePointers = values.map { UnsafePointer($0) }
        let result = PQexecParams(
            connection, sql, Int32(parameters.count), nil, valuePointers, lengths, formats, 0)
        defer { PQclear(result) }
        let status = result.map { PQresultStatus($0) } ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK, let result else {
            throw statementError(result)
        }
        var rows: [[String?]] = []
        let rowCount = PQntuples(result)
        let columnCount = PQnfields(result)
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var fields: [String?] = []
            fields.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                fields.append(
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column)))
            }
            rows.append(fields)
        }
        return PostgresRows(rows: rows)
    }

    /// What went wrong with a statement, from its result (`nil` when libpq made none) and the
    /// connection's state. Only the server's primary message is kept, never its DETAIL, which can
    /// quote a row's values.
    private func statementError(_ result: OpaquePointer?) -> PostgresError {
        let sqlState = result.flatMap { sesame_pq_sqlstate($0) }.map { String(cString: $0) }
        if PQstatus(connection) != CONNECTION_OK || sqlState == nil || sqlState!.hasPrefix("08")
            || ["57P01", "57P02", "57P03"].contains(sqlState!)
        {
            let detail = PostgresConnection.oneLine(String(cString: PQerrorMessage(connection)))
            return PostgresError(
                kind: .unavailable, sqlState: sqlState,
                message: "the connection to PostgreSQL was lost (\(detail.isEmpty ? "no detail" : detail)). "
                    + "Check that the server is running; every call tries to connect again.")
        }
        let primary = result.flatMap { sesame_pq_primary_message($0) }.map { String(cString: $0) } ?? "no detail"
        switch sqlState! {
        case "57014":
            return PostgresError(
                kind: .timedOut, sqlState: sqlState,
                message: "PostgreSQL stopped the statement after the statement timeout (\(primary)). Check the "
                    + "server's load and locks, or give the store a longer statement timeout.")
        case "42501":
            return PostgresError(
                kind: .ioFailure, sqlState: sqlState,
                message: "PostgreSQL refused it (\(primary)). Grant this user the rights on Sesame's tables.")
        default:
            return PostgresError(
                kind: .ioFailure, sqlState: sqlState,
                message: "PostgreSQL refused it (\(primary), SQLSTATE \(sqlState!)).")
        }
    }
}

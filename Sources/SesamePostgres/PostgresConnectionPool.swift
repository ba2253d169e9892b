import Sesame

/// A few ``PostgresConnection``s to one server, lent one call at a time: a store used by many
/// tasks of one process runs that many statements at once instead of in a queue.
///
/// A call takes an idle connection when there is one (made on its first use, as every
/// connection is), and otherwise waits, on its own thread, for the one lent least recently.
package final class PostgresConnectionPool: Sendable {
    private let connections: [PostgresConnection]
    /// How many calls each connection has now, and the next one to wait for.
    private let load: Locked<(calls: [Int], next: Int)>

    /// `size` connections (at least one) to the server `configuration` names; `onConnect` runs
    /// on each new one.
    package init(
        configuration: PostgresConfiguration, size: Int,
        onConnect: @escaping @Sendable (borrowing PostgresSession) throws(PostgresError) -> Void = { _ in }
    ) {
        let count = max(1, size)
        connections = (0..<count).map { _ in PostgresConnection(configuration: configuration, onConnect: onConnect) }
        load = Locked((calls: Array(repeating: 0, count: count), next: 0))
    }

    /// Runs `body` on a connection of the pool, as ``PostgresConnection/withSession(_:)`` does.
    package func withSession<T: Sendable>(
        _ body: @escaping @Sendable (borrowing PostgresSession) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let index = load.withLock { load in
            let chosen = load.calls.firstIndex(of: 0) ?? load.next
            if load.calls[chosen] > 0 { load.next = (load.next + 1) % load.calls.count }
            load.calls[chosen] += 1
            return chosen
        }
        defer { load.withLock { $0.calls[index] -= 1 } }
        return try await connections[index].withSession(body)
    }
}

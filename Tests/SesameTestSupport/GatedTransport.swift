// Shared by the test targets that check the cross-process refresh lock: a transport that holds
// a refresh at the server's door, and a way to see that another party waits for the lock file.
import Foundation
import Sesame

/// Sends through another transport, but once armed holds the first request whose path ends
/// with a suffix until ``release()``, and counts every such request.
///
/// A test holds one session's refresh inside its lock and looks at what a second session does
/// meanwhile: with the lock it waits (``FileLocks/waiters(on:)``), without it its own refresh
/// request arrives here.
public final class GatedTransport: HTTPTransport {
    private struct State {
        var armed = false
        var released = false
        var matched = 0
        var held: [CheckedContinuation<Void, Never>] = []
    }

    private let base: any HTTPTransport
    private let suffix: String
    private let state = Locked(State())

    /// Wraps `base`; requests whose URL path ends with `suffix` are the ones counted and held.
    public init(_ base: any HTTPTransport, holding suffix: String) {
        self.base = base
        self.suffix = suffix
    }

    /// From now on the first matching request is held.
    public func arm() { state.withLock { $0.armed = true } }

    /// Matching requests since ``arm()``.
    public var matchedCount: Int { state.withLock { $0.matched } }

    /// Requests held now.
    public var heldCount: Int { state.withLock { $0.held.count } }

    /// Lets the held request go, and every later one through.
    public func release() {
        let held = state.withLock { state in
            state.released = true
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let hold = state.withLock { state in
            guard state.armed, request.url.path.hasSuffix(suffix) else { return false }
            state.matched += 1
            return state.matched == 1 && !state.released
        }
        if hold {
            await withCheckedContinuation { continuation in
                let goOn = state.withLock { state in
                    if state.released { return true }
                    state.held.append(continuation)
                    return false
                }
                if goOn { continuation.resume() }
            }
        }
        return try await base.send(request)
    }
}

/// What the kernel says about `flock` locks (Linux `/proc/locks`).
public enum FileLocks {
    /// How many lock requests are blocked waiting for the file at `url`; `nil` when
    /// `/proc/locks` or the file cannot be read.
    public static func waiters(on url: URL) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value,
            let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8)
        else { return nil }
        // "1: -> FLOCK  ADVISORY  WRITE 17904 fe:00:16225826 0 EOF": "->" marks a waiter.
        return table.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            guard fields.contains("->"), fields.contains("FLOCK") else { return false }
            return fields.contains { field in
                let parts = field.split(separator: ":")
                return parts.count == 3 && UInt64(parts[2]) == inode
            }
        }.count
    }
}

/// Waits, checking every 10 ms, until `condition` holds or `limit` has passed.
///
/// The limit only turns a hang into a failure: on a machine whose CPUs other processes keep
/// busy, 30 s was seen to pass before a file lock was taken, so it is two minutes.
///
/// - Returns: whether the condition held (a `false` is for the test to report, not a timing claim).
public func waitUntil(limit: Duration = .seconds(120), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

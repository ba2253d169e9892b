import Foundation
import Sesame

/// What one answer's `x-ratelimit-*` headers say about the primary rate limit.
public struct GitHubRateLimit: Sendable, Hashable, CustomStringConvertible {
    /// Requests allowed per window (`x-ratelimit-limit`, 5000 for a user token on github.com).
    public var limit: Int
    /// Requests left in this window (`x-ratelimit-remaining`).
    public var remaining: Int
    /// When the window resets (`x-ratelimit-reset`, epoch seconds).
    public var reset: Date
    /// Requests made in this window (`x-ratelimit-used`), when sent.
    public var used: Int?
    /// Which limit (`x-ratelimit-resource`: `core`, `search`, `graphql`...), when sent.
    public var resource: String?

    /// Creates a value.
    public init(limit: Int, remaining: Int, reset: Date, used: Int? = nil, resource: String? = nil) {
        self.limit = limit
        self.remaining = remaining
        self.reset = reset
        self.used = used
        self.resource = resource
    }

    /// Reads the headers; `nil` unless limit, remaining and reset are all there and numbers.
    public init?(headers: HTTPHeaders) {
        func int(_ name: String) -> Int? { headers[name].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
        guard let limit = int("x-ratelimit-limit"), let remaining = int("x-ratelimit-remaining"),
            let reset = int("x-ratelimit-reset"), limit >= 0, remaining >= 0, reset >= 0
        else { return nil }
        self.init(
            limit: limit, remaining: remaining, reset: Date(timeIntervalSince1970: TimeInterval(reset)),
            used: int("x-ratelimit-used"), resource: headers["x-ratelimit-resource"])
    }

    public var description: String {
        "\(resource ?? "core"): \(remaining)/\(limit) left, resets \(reset.ISO8601Format())"
    }
}

/// Slows GitHub calls down as the primary rate limit runs low, instead of waiting for a 403.
///
/// Every answer's `x-ratelimit-*` headers are recorded, per resource (`core`, `search`...).
/// While more than ``reserve`` of the window's requests are left, nothing waits. Below it, each
/// call first waits so that what is left is spread over the time until `x-ratelimit-reset`:
/// `(reset − now) / (remaining + 1)`, at most ``maxDelay``. With nothing left, the wait is until
/// the reset, at most ``maxWait``. It is the GitHub counterpart of the Facebook provider's
/// `GraphUsageGovernor`; waits are on the injected clock.
public final class GitHubRateLimitGovernor: Sendable {
    /// The fraction of the window's requests (0..<1) below which calls are spread out.
    public let reserve: Double
    /// The longest wait while requests are left.
    public let maxDelay: Duration
    /// The longest wait when none are left.
    public let maxWait: Duration
    private let now: @Sendable () -> Date
    private let limits = Locked<[String: GitHubRateLimit]>([:])

    /// Creates a governor.
    public init(
        reserve: Double = 0.1, maxDelay: Duration = .seconds(10), maxWait: Duration = .seconds(900),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        precondition(reserve >= 0 && reserve < 1, "GitHubRateLimitGovernor's reserve must be in 0..<1")
        self.reserve = reserve
        self.maxDelay = maxDelay
        self.maxWait = maxWait
        self.now = now
    }

    /// Records the limit in `headers`, if they carry one.
    public func record(_ headers: HTTPHeaders) {
        guard let limit = GitHubRateLimit(headers: headers) else { return }
        limits.withLock { $0[limit.resource ?? "core"] = limit }
    }

    /// The limit last recorded for `resource`.
    public func lastLimit(resource: String = "core") -> GitHubRateLimit? { limits.withLock { $0[resource] } }

    /// How long the next call on `resource` should wait.
    public func delay(resource: String = "core") -> Duration {
        guard let limit = lastLimit(resource: resource) else { return .zero }
        let untilReset = limit.reset.timeIntervalSince(now())
        guard untilReset > 0 else { return .zero }
        if limit.remaining == 0 { return Self.milliseconds(untilReset, atMost: maxWait) }
        guard Double(limit.remaining) < Double(limit.limit) * reserve else { return .zero }
        let spread = untilReset / Double(limit.remaining + 1)
        return Self.milliseconds(spread, atMost: maxDelay)
    }

    /// `seconds`, rounded up to a millisecond, or `limit` when that is shorter (a reset time
    /// far in the future gives more seconds than a `Duration` holds).
    private static func milliseconds(_ seconds: Double, atMost limit: Duration) -> Duration {
        seconds < limit.inSeconds ? min(.milliseconds(Int((seconds * 1000).rounded(.up))), limit) : limit
    }

    /// Waits ``delay(resource:)`` on `clock` (nothing while plenty is left).
    ///
    /// - Throws: `CancellationError` when the task is cancelled during the wait.
    public func pace(resource: String = "core", on clock: any Clock<Duration>) async throws {
        let delay = self.delay(resource: resource)
        if delay > .zero { try await clock.sleep(for: delay) }
    }
}

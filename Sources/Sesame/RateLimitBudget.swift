import Foundation

/// How much of an app's rate limits one answer said were used, in a provider's own counters.
///
/// A provider's API client reads it from the answer's headers (Facebook's `X-App-Usage`,
/// `X-Page-Usage` and `X-Business-Use-Case-Usage`, for example) and hands it to a
/// ``RateLimitBudget``. Each counter is a percentage of the provider's allowance, keyed by a
/// scope the provider names (`app`, `page`, `business:<object>:<use case>`, …).
public struct RateLimitUsage: Sendable, Hashable {
    /// Percent used, per scope.
    public var percentages: [String: Double]
    /// When the provider refused a call for the rate limit and said how long until calls are
    /// allowed again: that time.
    public var regainAccessAfter: Duration?

    /// Creates usage.
    public init(percentages: [String: Double] = [:], regainAccessAfter: Duration? = nil) {
        self.percentages = percentages
        self.regainAccessAfter = regainAccessAfter
    }

    /// The highest percentage of any scope; `nil` when there is none.
    public var highestPercentage: Double? { percentages.values.max() }
}

/// How calls slow down as usage nears the limit: nothing below ``threshold`` percent, a wait in
/// proportion above it (`maxDelay × (usage − threshold) / (100 − threshold)`), and at 100% or
/// more the longer of ``maxDelay`` and the provider's regain time, never more than ``maxWait``.
public struct RateLimitPacing: Sendable, Hashable {
    /// Usage, in percent, below which calls go at full speed.
    public var threshold: Double
    /// The wait just before 100%.
    public var maxDelay: Duration
    /// The longest wait, whatever the provider estimates.
    public var maxWait: Duration

    /// Creates a pacing rule; `threshold` is in 0..<100.
    public init(threshold: Double = 75, maxDelay: Duration = .seconds(10), maxWait: Duration = .seconds(300)) {
        precondition(threshold >= 0 && threshold < 100, "RateLimitPacing's threshold must be in 0..<100")
        self.threshold = threshold
        self.maxDelay = maxDelay
        self.maxWait = maxWait
    }

    /// The wait before a call when usage is `percent` (unknown: `nil`) and the provider said
    /// access returns after `regainAccessAfter`.
    public func delay(forPercent percent: Double?, regainAccessAfter: Duration? = nil) -> Duration {
        guard let percent, percent > threshold else { return .zero }
        if percent >= 100 { return throttledWindow(regainAccessAfter: regainAccessAfter) }
        return min(maxDelay * ((percent - threshold) / (100 - threshold)), maxWait)
    }

    /// How long calls stop after an answer that refused a call for the rate limit.
    public func throttledWindow(regainAccessAfter: Duration?) -> Duration {
        min(max(maxDelay, regainAccessAfter ?? .zero), maxWait)
    }
}

/// What became of a call made on a ``RateLimitTurn``.
public enum RateLimitOutcome: Sendable, Hashable {
    /// The provider answered (successfully or with an error other than an app-wide throttle),
    /// with this usage (`nil` when the answer carried none).
    case answered(RateLimitUsage?)
    /// The provider refused the call because the app's rate limit was reached.
    case throttled(RateLimitUsage?)
    /// No answer came: the call failed below HTTP, or was cancelled, or never went.
    case noAnswer

    /// The usage the answer carried.
    public var usage: RateLimitUsage? {
        switch self {
        case .answered(let usage), .throttled(let usage): usage
        case .noAnswer: nil
        }
    }
}

/// A call's permission to go, given by ``RateLimitBudget/waitForTurn(on:)`` and handed back to
/// ``RateLimitBudget/finish(_:_:)`` with what the answer said.
public struct RateLimitTurn: Sendable, Hashable {
    /// What kind of turn it is; the budget that gave it decides what the kinds mean.
    package var kind: UInt8
    /// Whether this call is the one that finds out whether a throttled window is over.
    public var isProbe: Bool { kind == Self.probe }

    package static let normal: UInt8 = 0
    package static let probe: UInt8 = 1
    package static let fallback: UInt8 = 2

    package init(kind: UInt8) { self.kind = kind }

    /// An ordinary turn.
    public static let ordinary = RateLimitTurn(kind: normal)
}

/// The rate-limit budget an API client consults before each call and reports to after it.
///
/// Before a call the client awaits ``waitForTurn(on:)``, which waits while the budget says so
/// (pacing near the limit, or a throttled window); after it, the client hands the turn back to
/// ``finish(_:_:)`` with the answer's usage and whether the provider refused the call for the
/// app's rate limit. ``LocalRateLimitBudget`` keeps the budget in this process;
/// a fleet shares one through a database (SesamePostgres's `PostgresRateLimitBudget`), so
/// that every worker paces on the fleet's usage and waits out a throttled window together.
public protocol RateLimitBudget: Sendable {
    /// The pacing rule the budget applies.
    var pacing: RateLimitPacing { get }

    /// Waits, on `clock`, until a call may be made, and returns its turn.
    ///
    /// - Throws: `CancellationError` when the task is cancelled during the wait.
    func waitForTurn(on clock: any Clock<Duration>) async throws -> RateLimitTurn

    /// Reports what became of the call made on `turn`. Every turn is finished exactly once.
    func finish(_ turn: RateLimitTurn, _ outcome: RateLimitOutcome) async
}

/// The rate-limit budget of one process: the usage of the last answer decides the wait before
/// the next call, by ``pacing``.
///
/// It is every API client's default. Its waits are on the clock each call passes in.
public final class LocalRateLimitBudget: RateLimitBudget {
    public let pacing: RateLimitPacing
    private let last = Locked<(usage: RateLimitUsage?, delay: Duration)>((nil, .zero))

    /// Creates a budget that paces by `pacing`.
    public init(pacing: RateLimitPacing = RateLimitPacing()) { self.pacing = pacing }

    /// The usage last recorded.
    public var lastUsage: RateLimitUsage? { last.withLock { $0.usage } }

    /// How long the next call waits.
    public var delay: Duration { last.withLock { $0.delay } }

    /// Records `usage` (a throttled answer with none counts as 100%).
    public func record(_ usage: RateLimitUsage?, throttled: Bool = false) {
        var usage = usage
        if throttled, (usage?.highestPercentage ?? 0) < 100 {
            usage = RateLimitUsage(
                percentages: (usage?.percentages ?? [:]).merging(["throttled": 100]) { max($0, $1) },
                regainAccessAfter: usage?.regainAccessAfter)
        }
        guard let usage else { return }
        if last.withLock({ $0.usage == usage }) { return }
        let delay = pacing.delay(forPercent: usage.highestPercentage, regainAccessAfter: usage.regainAccessAfter)
        last.withLock { $0 = (usage, delay) }
    }

    public func waitForTurn(on clock: any Clock<Duration>) async throws -> RateLimitTurn {
        let delay = self.delay
        if delay > .zero { try await clock.sleep(for: delay) }
        return .ordinary
    }

    public func finish(_ turn: RateLimitTurn, _ outcome: RateLimitOutcome) async {
        if case .throttled = outcome { record(outcome.usage, throttled: true) } else { record(outcome.usage) }
    }
}

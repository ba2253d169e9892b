import Foundation
import Sesame

/// Slows Graph calls down as the app's rate-limit usage nears 100%, instead of waiting for a
/// throttling error.
///
/// Every answer's usage headers (`X-App-Usage`, `X-Page-Usage`, `X-Business-Use-Case-Usage`)
/// are read and handed to a `RateLimitBudget`, which each call consults first. By default that
/// is a `LocalRateLimitBudget`, this process's own: below ``threshold`` percent nothing waits;
/// above it each call first waits in proportion:
/// `maxDelay × (usage − threshold) / (100 − threshold)`. At 100% or more the wait is the longer
/// of ``maxDelay`` and Facebook's `estimated_time_to_regain_access`, up to ``maxWait``. Waits
/// are on the injected clock.
///
/// A fleet of workers shares one budget instead (SesamePostgres's `PostgresRateLimitBudget`):
/// pass it as `GraphUsageGovernor(budget:)`, and every worker paces on the fleet's usage and
/// waits out an app-wide throttled window together.
public final class GraphUsageGovernor: Sendable {
    /// The budget each call consults.
    public let budget: any RateLimitBudget
    private let last = Locked<Recorded>(Recorded())

    /// Usage, in percent, below which calls go at full speed.
    public var threshold: Double { budget.pacing.threshold }
    /// The wait just before 100%.
    public var maxDelay: Duration { budget.pacing.maxDelay }
    /// The longest wait, whatever Facebook estimates.
    public var maxWait: Duration { budget.pacing.maxWait }

    /// The values of `X-App-Usage`, `X-Page-Usage` and `X-Business-Use-Case-Usage`.
    private typealias UsageHeaderValues = (String?, String?, String?)

    /// The usage last read, the header values it was read from, and the same usage in the
    /// budget's terms: an answer whose usage headers are the same (most are, between one percent
    /// and the next) is not parsed again.
    private struct Recorded {
        var headerValues: UsageHeaderValues = (nil, nil, nil)
        var usage: GraphUsage?
        var budgetUsage: RateLimitUsage?
    }

    /// Creates a governor with a budget of this process's own.
    public convenience init(
        threshold: Double = 75, maxDelay: Duration = .seconds(10), maxWait: Duration = .seconds(300)
    ) {
        precondition(threshold >= 0 && threshold < 100, "GraphUsageGovernor's threshold must be in 0..<100")
        self.init(
            budget: LocalRateLimitBudget(
                pacing: RateLimitPacing(threshold: threshold, maxDelay: maxDelay, maxWait: maxWait)))
    }

    /// Creates a governor that consults `budget`, for example a fleet's shared one.
    public init(budget: any RateLimitBudget) { self.budget = budget }

    /// Records the usage in `headers`, if they carry any, and returns it in the budget's terms.
    @discardableResult
    public func record(_ headers: HTTPHeaders) -> RateLimitUsage? {
        let usage = read(headers)
        (budget as? LocalRateLimitBudget)?.record(usage)
        return usage
    }

    /// The usage in `headers` in the budget's terms, read again only when the headers changed.
    func read(_ headers: HTTPHeaders) -> RateLimitUsage? {
        // A tuple, not an array: nothing allocated on the answers that carry the same usage.
        let values = (headers["X-App-Usage"], headers["X-Page-Usage"], headers["X-Business-Use-Case-Usage"])
        guard values.0 != nil || values.1 != nil || values.2 != nil else { return nil }
        if let cached = last.withLock({ $0.usage != nil && $0.headerValues == values ? $0.budgetUsage : nil }) {
            return cached
        }
        guard let usage = GraphUsage(headers: headers) else { return nil }
        let budgetUsage = usage.rateLimitUsage
        last.withLock { $0 = Recorded(headerValues: values, usage: usage, budgetUsage: budgetUsage) }
        return budgetUsage
    }

    /// The usage last recorded by this process.
    public var lastUsage: GraphUsage? { last.withLock { $0.usage } }

    /// How long the next call should wait by the usage this process last recorded.
    public var delay: Duration {
        let usage = last.withLock { $0.budgetUsage }
        return budget.pacing.delay(forPercent: usage?.highestPercentage, regainAccessAfter: usage?.regainAccessAfter)
    }

    /// Waits as the budget says (nothing at low usage) and gives the turn back unused.
    ///
    /// - Throws: `CancellationError` when the task is cancelled during the wait.
    public func pace(on clock: any Clock<Duration>) async throws {
        let turn = try await budget.waitForTurn(on: clock)
        await budget.finish(turn, .noAnswer)
    }
}

extension GraphUsage {
    /// The usage as a `RateLimitUsage`: `app`, `page`, and `business:<object>:<type>` scopes,
    /// and the regain time.
    public var rateLimitUsage: RateLimitUsage {
        var percentages: [String: Double] = [:]
        if let value = app?.highest { percentages["app"] = value }
        if let value = page?.highest { percentages["page"] = value }
        for entry in businessUseCases {
            if let value = entry.counters.highest {
                let key = "business:\(entry.objectID):\(entry.type ?? "")"
                percentages[key] = max(percentages[key] ?? 0, value)
            }
        }
        return RateLimitUsage(percentages: percentages, regainAccessAfter: estimatedTimeToRegainAccess)
    }
}

import Foundation
import Sesame

/// Slows Graph calls down as the app's rate-limit usage nears 100%, instead of waiting for a
/// throttling error.
///
/// Every answer's usage headers (`X-App-Usage`, `X-Page-Usage`, `X-Business-Use-Case-Usage`)
/// are recorded. Below ``threshold`` percent nothing waits; above it each call first waits in
/// proportion: `maxDelay × (usage − threshold) / (100 − threshold)`. At 100% or more the wait
/// is the longer of ``maxDelay`` and Facebook's `estimated_time_to_regain_access`, up to
/// ``maxWait``. Waits are on the injected clock.
public final class GraphUsageGovernor: Sendable {
    /// Usage, in percent, below which calls go at full speed.
    public let threshold: Double
    /// The wait just before 100%.
    public let maxDelay: Duration
    /// The longest wait, whatever Facebook estimates.
    public let maxWait: Duration
    private let last = Locked<Recorded>(Recorded())

    /// The values of `X-App-Usage`, `X-Page-Usage` and `X-Business-Use-Case-Usage`.
    private typealias UsageHeaderValues = (String?, String?, String?)

    /// The usage last recorded, the header values it was read from, and the wait it calls for:
    /// an answer whose usage headers are the same (most are, between one percent and the next)
    /// is not parsed again, and a call reads its wait without working it out again.
    private struct Recorded {
        var headerValues: UsageHeaderValues = (nil, nil, nil)
        var usage: GraphUsage?
        var delay: Duration = .zero
    }

    /// Creates a governor.
    public init(threshold: Double = 75, maxDelay: Duration = .seconds(10), maxWait: Duration = .seconds(300)) {
        precondition(threshold >= 0 && threshold < 100, "GraphUsageGovernor's threshold must be in 0..<100")
        self.threshold = threshold
        self.maxDelay = maxDelay
        self.maxWait = maxWait
    }

    /// Records the usage in `headers`, if they carry any.
    public func record(_ headers: HTTPHeaders) {
        // A tuple, not an array: nothing allocated on the answers that carry the same usage.
        let values = (headers["X-App-Usage"], headers["X-Page-Usage"], headers["X-Business-Use-Case-Usage"])
        guard values.0 != nil || values.1 != nil || values.2 != nil else { return }
        if last.withLock({ $0.usage != nil && $0.headerValues == values }) { return }
        guard let usage = GraphUsage(headers: headers) else { return }
        let delay = delay(for: usage)
        last.withLock { $0 = Recorded(headerValues: values, usage: usage, delay: delay) }
    }

    /// The usage last recorded.
    public var lastUsage: GraphUsage? { last.withLock { $0.usage } }

    /// How long the next call should wait.
    public var delay: Duration { last.withLock { $0.delay } }

    private func delay(for usage: GraphUsage) -> Duration {
        guard let percent = usage.highestPercentage, percent > threshold else { return .zero }
        if percent >= 100 {
            return min(max(maxDelay, usage.estimatedTimeToRegainAccess ?? .zero), maxWait)
        }
        return min(maxDelay * ((percent - threshold) / (100 - threshold)), maxWait)
    }

    /// Waits ``delay`` on `clock` (nothing at low usage).
    ///
    /// - Throws: `CancellationError` when the task is cancelled during the wait.
    public func pace(on clock: any Clock<Duration>) async throws {
        let delay = self.delay
        if delay > .zero { try await clock.sleep(for: delay) }
    }
}

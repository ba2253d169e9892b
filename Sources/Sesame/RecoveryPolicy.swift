import Foundation

/// What to do about an ``AuthError``, as decided by a ``RecoveryPolicy``.
public enum RecoveryDecision: Sendable, Hashable, CustomStringConvertible {
    /// Make the call again after waiting this long (zero: at once).
    case retry(after: Duration)
    /// Close the session and ask the person to log in again.
    case reauthenticate
    /// Ask the person again for the missing permission, then replay the call.
    case requestPermissions
    /// Show the person this message; do not retry.
    case showMessage(title: String, message: String)
    /// Stop: retries are used up, or the server asked for a longer wait than the policy allows.
    case giveUp(reason: String)

    public var description: String {
        switch self {
        case .retry(let delay): delay == .zero ? "retry now" : "retry after \(delay.formattedSeconds)"
        case .reauthenticate: "reauthenticate"
        case .requestPermissions: "request permissions"
        case .showMessage(let title, let message): "show \"\(title)\": \(message)"
        case .giveUp(let reason): "give up: \(reason)"
        }
    }
}

/// Decides how to recover from errors, and runs calls with bounded retries.
///
/// `retry` errors are retried at once the first time and with back-off after that;
/// `throttling` errors always wait. Back-off is exponential with full jitter
/// (`random(0 ... min(maxDelay, baseDelay × 2^(n−1)))`), and never shorter than a server hint
/// (``AuthError/retryAfter``). A hint longer than ``maxServerHint`` is not waited out: the
/// policy gives up and says so. Time comes from the clock passed to ``run(clock:onRetry:_:)``.
public struct RecoveryPolicy: Sendable {
    /// The most times a call is made, the first included.
    public var maxAttempts: Int
    /// The back-off before the first delayed retry, before jitter.
    public var baseDelay: Duration
    /// The longest back-off, before jitter and apart from server hints.
    public var maxDelay: Duration
    /// The longest server hint the policy will wait out.
    public var maxServerHint: Duration
    /// Where jitter comes from.
    public var jitter: Jitter
    /// The title of a message whose error has none of its own, and the text shown should an
    /// error's ``AuthError/messageForPerson`` be blank.
    public var genericMessage: (title: String, message: String)

    /// How back-off delays are randomised.
    public struct Jitter: Sendable {
        let unit: @Sendable () -> Double

        /// "Full jitter": a uniform draw between zero and the computed delay.
        public static let full = Jitter { Double.random(in: 0...1) }
        /// No jitter: always the computed delay.
        public static let none = Jitter { 1 }
        /// A fixed fraction of the computed delay (for tests).
        public static func fixed(_ fraction: Double) -> Jitter { Jitter { min(max(fraction, 0), 1) } }
        /// Fractions from a function (for tests that script a sequence).
        public static func custom(_ unit: @escaping @Sendable () -> Double) -> Jitter { Jitter(unit: unit) }
    }

    /// Creates a policy.
    public init(
        maxAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(500),
        maxDelay: Duration = .seconds(30),
        maxServerHint: Duration = .seconds(120),
        jitter: Jitter = .full,
        genericMessage: (title: String, message: String) = (
            "Something Went Wrong", "Something went wrong. Please try again later."
        )
    ) {
        precondition(maxAttempts >= 1, "RecoveryPolicy needs at least one attempt")
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxServerHint = maxServerHint
        self.jitter = jitter
        self.genericMessage = genericMessage
    }

    /// The back-off before retry number `retry` (1 for the first retry), before any server hint.
    public func backoff(forRetry retry: Int) -> Duration {
        let exponent = min(max(retry - 1, 0), 40)
        let uncapped = baseDelay * (1 << exponent)
        let capped = min(uncapped, maxDelay)
        return capped * jitter.unit()
    }

    /// Decides what to do after attempt number `attempt` (1-based) failed with `error`.
    public func decide(for error: AuthError, attempt: Int) -> RecoveryDecision {
        switch error.recoveryTactic {
        case .retry, .retryAfterBackoff:
            guard attempt < maxAttempts else {
                return .giveUp(reason: "\(attempt) attempt\(attempt == 1 ? "" : "s") failed (\(error.category))")
            }
            if let hint = error.retryAfter, hint > maxServerHint {
                return .giveUp(
                    reason:
                        "the server asked to wait \(hint.formattedSeconds), longer than the \(maxServerHint.formattedSeconds) "
                        + "this policy waits")
            }
            var delay = Duration.zero
            if error.recoveryTactic == .retryAfterBackoff || attempt > 1 {
                delay = backoff(forRetry: attempt)
            }
            if let hint = error.retryAfter { delay = max(delay, hint) }
            return .retry(after: delay)
        case .reauthenticate:
            return .reauthenticate
        case .requestPermissions:
            return .requestPermissions
        default:  // .showMessage, RecoveryTactic.none, and any tactic added later
            return message(for: error)
        }
    }

    /// The message to show for `error`, by the one rule: its ``AuthError/userMessage`` (and
    /// title) when the person should be notified, its ``AuthError/contextualMessage`` otherwise.
    public func message(for error: AuthError) -> RecoveryDecision {
        let text = error.messageForPerson
        let title = error.shouldNotifyUser ? (error.userTitle ?? genericMessage.title) : genericMessage.title
        return .showMessage(title: title, message: text.isEmpty ? genericMessage.message : text)
    }

    /// Runs `operation`, retrying `retry` and `throttling` failures as ``decide(for:attempt:)``
    /// says, sleeping on `clock` between attempts.
    ///
    /// Errors that are not ``AuthError`` (and `CancellationError`) are rethrown at once. When
    /// the decision is anything but a retry, the last ``AuthError`` is rethrown for the caller's
    /// own recovery.
    ///
    /// - Parameters:
    ///   - clock: The clock the waits are measured on.
    ///   - onRetry: Told of each retry before the wait: the error, the delay and the number of
    ///     the attempt about to be made.
    ///   - operation: The call to make.
    public func run<T: Sendable>(
        clock: any Clock<Duration> = ContinuousClock(),
        onRetry: @Sendable (AuthError, Duration, Int) async -> Void = { _, _, _ in },
        _ operation: () async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await operation()
            } catch let error as AuthError {
                guard case .retry(let delay) = decide(for: error, attempt: attempt) else { throw error }
                attempt += 1
                await onRetry(error, delay, attempt)
                if delay > .zero { try await clock.sleep(for: delay) }
                try Task.checkCancellation()
            }
        }
    }
}

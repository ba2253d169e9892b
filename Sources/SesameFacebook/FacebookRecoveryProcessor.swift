import Foundation
import Sesame

/// What the host app does when ``FacebookRecoveryProcessor`` needs the person.
///
/// These are the three things the Facebook SDK's sample app does by hand: re-request a permission,
/// log in again, and show a message.
public protocol FacebookRecoveryDelegate: Sendable {
    /// Asks the person again for `permissions` (the ones the call needs; empty when the caller
    /// did not say). Returns whether they were granted, in which case the call is replayed.
    ///
    /// - Throws: whatever the app's permission request throws; the call then fails with it.
    func requestPermissions(_ permissions: [Permission]) async throws -> Bool

    /// Asks the person to log in again. Returns whether they did, in which case the call is
    /// replayed.
    ///
    /// When ``ReauthenticationReason/allowsSilentReauthentication`` is false (the person removed
    /// the app, 458, or has not confirmed their account, 464), the login must involve the
    /// person: do not reconnect silently with a cached browser session.
    ///
    /// - Throws: whatever the app's login throws; the call then fails with it.
    func reauthenticate(reason: ReauthenticationReason) async throws -> Bool

    /// Shows the person a message (an alert, a line on a terminal).
    func showMessage(title: String, message: String) async

    /// Told before each automatic retry, with the wait and the number of the attempt about to
    /// be made. Does nothing unless implemented.
    func willRetry(after delay: Duration, attempt: Int, error: AuthError) async
}

extension FacebookRecoveryDelegate {
    public func willRetry(after delay: Duration, attempt: Int, error: AuthError) async {}
}

/// Why ``FacebookRecoveryProcessor`` asks the host to log the person in again.
public struct ReauthenticationReason: Sendable, CustomStringConvertible {
    /// The error that ended the session.
    public var error: AuthError
    /// A title for the login prompt.
    public var title: String
    /// A message for the login prompt, saying why.
    public var message: String
    /// Whether a login without the person (a browser that still has their Facebook session) is
    /// acceptable. False for 458 and 464.
    public var allowsSilentReauthentication: Bool
    /// Whether the processor has already shown ``message`` through the delegate.
    public var messageShown: Bool

    /// Creates a reason (the processor makes these; tests of a delegate may too).
    public init(
        error: AuthError, title: String, message: String, allowsSilentReauthentication: Bool, messageShown: Bool
    ) {
        self.error = error
        self.title = title
        self.message = message
        self.allowsSilentReauthentication = allowsSilentReauthentication
        self.messageShown = messageShown
    }

    public var description: String {
        "\(title): \(message)" + (allowsSilentReauthentication ? "" : " (the person must take part)")
    }
}

/// The words the processor shows, which a host can replace per subcode, message key or
/// category.
///
/// The Facebook SDK's sample app replaces the message for a removed app:
///
/// ```swift
/// var texts = RecoveryTexts.standard
/// texts.subcodes[458] = .init(title: "Session Error", message: "The app was removed. Please log in again.")
/// texts.categories[.authenticationReopenSession] = .init(
///     title: "Session Error", message: "Your current session is no longer valid. Please log in again.")
/// ```
///
/// For an error, the first of these that exists is used: ``subcodes``, ``messageKeys``, the
/// error's own message when `AuthError.shouldNotifyUser` (Facebook's
/// `error_user_msg`, or the table's), ``categories``, and the error's `AuthError.contextualMessage`
/// (the table's message for its code and subcode, or its category's). Without overrides that is
/// the one rule, `AuthError.messageForPerson`. A title comes from the same place, or else
/// ``categoryTitles``; ``generic`` is the last resort.
public struct RecoveryTexts: Sendable, Hashable {
    /// A title and a message.
    public struct Text: Sendable, Hashable, CustomStringConvertible {
        /// The title.
        public var title: String
        /// The message.
        public var message: String
        /// Creates a text.
        public init(title: String, message: String) {
            self.title = title
            self.message = message
        }
        public var description: String { "\(title): \(message)" }
    }

    /// Texts for errors with a given subcode (458, 464, ...), whatever their code.
    public var subcodes: [Int: Text]
    /// Texts for errors whose table row has this message key (see `GraphErrors.json`).
    public var messageKeys: [String: Text]
    /// Texts for whole categories, used when the error has no message for the person.
    public var categories: [ErrorCategory: Text]
    /// Titles for messages that have none of their own.
    public var categoryTitles: [ErrorCategory: String]
    /// The last resort.
    public var generic: Text

    /// Creates texts; everything not given falls back to ``standard``'s.
    public init(
        subcodes: [Int: Text] = [:], messageKeys: [String: Text] = [:], categories: [ErrorCategory: Text] = [:],
        categoryTitles: [ErrorCategory: String] = RecoveryTexts.standardTitles,
        generic: Text = Text(title: "Something Went Wrong", message: "Something went wrong. Please try again later.")
    ) {
        self.subcodes = subcodes
        self.messageKeys = messageKeys
        self.categories = categories
        self.categoryTitles = categoryTitles
        self.generic = generic
    }

    /// No overrides: each error's own message, with a title for its category.
    public static let standard = RecoveryTexts()

    /// The default title of each category.
    public static let standardTitles: [ErrorCategory: String] = [
        .authenticationReopenSession: "Session Error",
        .permissions: "Permission Needed",
        .throttling: "Please Wait",
        .server: "Facebook Is Unavailable",
        .retry: "Something Went Wrong",
        .badRequest: "Something Went Wrong",
        .providerOther: "Something Went Wrong",
        .invalid: "Something Went Wrong",
        .userCancelled: "Cancelled",
    ]

    /// The text to show for `error`.
    public func text(for error: AuthError) -> Text {
        if let subcode = error.subcode, let text = subcodes[subcode] { return text }
        if let key = error.messageKey, let text = messageKeys[key] { return text }
        let title = error.userTitle ?? categoryTitles[error.category] ?? generic.title
        if error.shouldNotifyUser, let message = error.userMessage, !message.isEmpty {
            return Text(title: title, message: message)
        }
        if let text = categories[error.category] { return text }
        return error.contextualMessage.isEmpty ? generic : Text(title: title, message: error.contextualMessage)
    }
}

/// What ``FacebookRecoveryProcessor/recover(from:attempt:permissions:)`` did about an error.
public enum RecoveryOutcome: Sendable, Hashable, CustomStringConvertible {
    /// Make the call again after this wait.
    case retry(after: Duration)
    /// The person granted the permission or logged in again: make the call again now.
    case replay
    /// The person was shown this text; the call is not retried.
    case messageShown(RecoveryTexts.Text)
    /// The person declined to grant the permission or to log in again.
    case declined
    /// Nothing to do or show (the person cancelled).
    case nothing

    public var description: String {
        switch self {
        case .retry(let delay): "retry after \(delay.formattedSeconds)"
        case .replay: "replay"
        case .messageShown(let text): "shown \(text)"
        case .declined: "declined"
        case .nothing: "nothing"
        }
    }
}

/// Recovers from Facebook errors the way the Facebook SDK's samples do, properly: bounded retries with
/// back-off, re-requested permissions, a new login, or a message for the person.
///
/// | error | what happens |
/// |---|---|
/// | `retry`, `throttling` (tactic `retry`/`retryAfterBackoff`) | retried up to `RecoveryPolicy.maxAttempts` times, waiting at least the server's hint, then a message |
/// | `permissions` | the delegate re-requests the permissions, then the call is replayed (once) |
/// | `authenticationReopenSession` | the session is closed and cleared, the delegate asks the person to log in again, then the call is replayed (once); for 458 and 464 the message is shown first and the login must not be silent |
/// | `userCancelled` | nothing |
/// | anything else | the error's `userMessage` when it should be shown, its `contextualMessage` otherwise |
///
/// With a `Session`, every error goes through `Session.handle(_:)`, which closes
/// the session and clears its token when the error says so (but not for 459, which keeps it).
/// Waits use the injected clock.
public struct FacebookRecoveryProcessor: Sendable {
    /// The retry and back-off rules.
    public var policy: RecoveryPolicy
    /// The words shown to the person.
    public var texts: RecoveryTexts
    /// How many times one ``run(permissions:_:)`` may re-request permissions.
    public var maxPermissionRequests: Int
    /// How many times one ``run(permissions:_:)`` may ask the person to log in again.
    public var maxReauthentications: Int
    /// The host.
    public let delegate: any FacebookRecoveryDelegate
    /// The session the calls are made with, if the processor should close it.
    public let session: Session?
    /// Classifies transport failures thrown by the operation.
    public var taxonomy: FacebookErrorTaxonomy
    private let clock: any Clock<Duration>

    /// Creates a processor.
    public init(
        delegate: any FacebookRecoveryDelegate,
        session: Session? = nil,
        policy: RecoveryPolicy = RecoveryPolicy(),
        texts: RecoveryTexts = .standard,
        maxPermissionRequests: Int = 1,
        maxReauthentications: Int = 1,
        taxonomy: FacebookErrorTaxonomy = FacebookErrorTaxonomy(),
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.delegate = delegate
        self.session = session
        self.policy = policy
        self.texts = texts
        self.maxPermissionRequests = maxPermissionRequests
        self.maxReauthentications = maxReauthentications
        self.taxonomy = taxonomy
        self.clock = clock
    }

    /// Runs `operation`, recovering from its `AuthError`s (and `TransportError`s)
    /// until it succeeds or recovery is over.
    ///
    /// - Parameters:
    ///   - permissions: the permissions the call needs, re-requested after a permissions error.
    ///   - operation: the call; it is made again for each retry and replay.
    /// - Throws: the last `AuthError` when the processor could not recover (the person
    ///   has already been shown whatever message applies), `CancellationError`, or any other
    ///   error of the operation, unchanged.
    public func run<T: Sendable>(permissions: [Permission] = [], _ operation: () async throws -> T) async throws -> T {
        var budget = Budget(permissionRequests: maxPermissionRequests, reauthentications: maxReauthentications)
        var attempt = 1
        while true {
            let error: AuthError
            do {
                return try await operation()
            } catch let failure as AuthError {
                error = failure
            } catch let failure as TransportError {
                error = taxonomy.classify(failure)
            }
            switch try await recover(from: error, attempt: attempt, permissions: permissions, budget: &budget) {
            case .retry(let delay):
                attempt += 1
                await delegate.willRetry(after: delay, attempt: attempt, error: error)
                if delay > .zero { try await clock.sleep(for: delay) }
                try Task.checkCancellation()
            case .replay:
                attempt = 1
            case .messageShown, .declined, .nothing:
                throw error
            }
        }
    }

    /// Does what one error calls for: closes the session if the error says so, then decides;
    /// asks the delegate to re-request permissions or to log the person in again, or shows a
    /// message. A retry is returned, not waited for.
    ///
    /// - Parameters:
    ///   - error: the error the call failed with.
    ///   - attempt: the number of the call that failed (1 for the first).
    ///   - permissions: the permissions the call needs, re-requested after a permissions error.
    ///
    /// - Throws: whatever the delegate throws while re-requesting permissions or logging in again.
    public func recover(
        from error: AuthError, attempt: Int = 1, permissions: [Permission] = []
    ) async throws -> RecoveryOutcome {
        var budget = Budget(permissionRequests: maxPermissionRequests, reauthentications: maxReauthentications)
        return try await recover(from: error, attempt: attempt, permissions: permissions, budget: &budget)
    }

    private struct Budget {
        var permissionRequests: Int
        var reauthentications: Int
    }

    private func recover(
        from error: AuthError, attempt: Int, permissions: [Permission], budget: inout Budget
    )
        async throws -> RecoveryOutcome
    {
        if let session { await session.handle(error) }
        if error.category == .userCancelled || error.recoveryTactic == .none { return .nothing }
        switch policy.decide(for: error, attempt: attempt) {
        case .retry(let delay):
            return .retry(after: delay)
        case .requestPermissions:
            guard budget.permissionRequests > 0 else { return await show(error) }
            budget.permissionRequests -= 1
            return try await delegate.requestPermissions(permissions) ? .replay : .declined
        case .reauthenticate:
            let text = texts.text(for: error)
            let mustInvolvePerson = !error.allowsSilentReauthentication || error.shouldNotifyUser
            if mustInvolvePerson || budget.reauthentications == 0 {
                await delegate.showMessage(title: text.title, message: text.message)
            }
            guard budget.reauthentications > 0 else { return .messageShown(text) }
            budget.reauthentications -= 1
            let reason = ReauthenticationReason(
                error: error, title: text.title, message: text.message,
                allowsSilentReauthentication: error.allowsSilentReauthentication, messageShown: mustInvolvePerson)
            return try await delegate.reauthenticate(reason: reason) ? .replay : .declined
        case .showMessage, .giveUp:
            return await show(error)
        }
    }

    private func show(_ error: AuthError) async -> RecoveryOutcome {
        let text = texts.text(for: error)
        await delegate.showMessage(title: text.title, message: text.message)
        return .messageShown(text)
    }
}

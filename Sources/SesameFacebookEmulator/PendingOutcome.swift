import Sesame
import SesameEmulator

/// What the engine's handlers answer under the lock: a reply, or closing the connection without
/// one, after an optional delay (the `slow` scenario). ``EmulatorEngine`` turns it into an
/// ``EmulatorOutcome`` once the lock is released.
struct PendingOutcome: Sendable {
    /// The reply; `nil` closes the connection without answering.
    var reply: Reply?
    /// How long to wait before answering.
    var delay: Duration = .zero
    /// For a Graph answer not yet finished, the version prefix of its path (`/v19.0`, or ""):
    /// the engine finishes it after the lock is released.
    var graphVersionPrefix: String?
    /// The version that served it: the one in its path unless that one has ended, when it is
    /// the oldest one still available (Facebook's rule); `nil` for an unversioned call.
    var servedGraphVersion: String?
    /// The app a Graph call was counted for, whose usage the handler's time is added to.
    var usageAppID: String?

    static func respond(_ reply: Reply) -> PendingOutcome { PendingOutcome(reply: reply) }
    static func respond(_ response: HTTPResponse) -> PendingOutcome { PendingOutcome(reply: Reply(response)) }
}

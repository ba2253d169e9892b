import Foundation

/// Where a ``Session`` is in its life, after the Facebook SDK's `FBSessionState`.
public enum SessionState: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// New; no token loaded.
    case created
    /// A valid cached token was found in the store; opening needs no UI.
    case createdTokenLoaded
    /// A login is under way.
    case opening
    /// Open with a token.
    case open
    /// Open, and the token was extended, refreshed or given new permissions.
    case openTokenExtended
    /// The login failed or was cancelled.
    case closedLoginFailed
    /// Closed by the app or by an error that invalidated the session.
    case closed

    /// Whether calls can be made (`open` or `openTokenExtended`).
    public var isOpen: Bool { self == .open || self == .openTokenExtended }

    /// Whether the session is closed (`closed` or `closedLoginFailed`).
    public var isClosed: Bool { self == .closed || self == .closedLoginFailed }

    /// The one table that decides which transitions are legal.
    ///
    /// It is FBSession's, with one addition: a closed session may be opened again (from the
    /// store or by a new login) instead of being thrown away, which suits a long-lived actor.
    public static let transitions: [SessionState: Set<SessionState>] = [
        .created: [.createdTokenLoaded, .opening],
        .createdTokenLoaded: [.open, .opening, .closed],
        .opening: [.open, .closedLoginFailed],
        .open: [.openTokenExtended, .closed],
        .openTokenExtended: [.openTokenExtended, .closed],
        .closedLoginFailed: [.createdTokenLoaded, .opening],
        .closed: [.createdTokenLoaded, .opening],
    ]

    /// Whether moving from `self` to `next` is legal.
    public func canTransition(to next: SessionState) -> Bool { Self.transitions[self]?.contains(next) ?? false }

    public var description: String { rawValue }
}

/// One change of a session's state: what every observer receives, in order (the Facebook SDK's
/// `sessionStateChanged:state:error:`).
public struct SessionStateChange: Sendable, CustomStringConvertible {
    /// The new state.
    public var state: SessionState
    /// The state before.
    public var previousState: SessionState
    /// The error that caused the change, if one did.
    public var error: AuthError?

    /// Creates a change.
    public init(state: SessionState, previousState: SessionState, error: AuthError? = nil) {
        self.state = state
        self.previousState = previousState
        self.error = error
    }

    public var description: String {
        "\(previousState) → \(state)" + (error.map { " (\($0.category): \($0.message))" } ?? "")
    }
}

/// A transition the table does not allow.
public struct SessionTransitionError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// The state the session was in.
    public var from: SessionState
    /// The state that was asked for.
    public var to: SessionState

    /// Creates an error.
    public init(from: SessionState, to: SessionState) {
        self.from = from
        self.to = to
    }

    public var description: String {
        "A session cannot go from '\(from)' to '\(to)'"
            + (from == .opening ? ": a login is already in progress; wait for it to finish." : ".")
    }

    /// The same sentence as ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }
}

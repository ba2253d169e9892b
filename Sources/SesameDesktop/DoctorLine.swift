import Foundation
import Sesame

/// One line of `sesame doctor`: what was checked, how it is, and what to do when it is wrong.
public struct DoctorLine: Sendable, Equatable {
    /// How it is.
    public enum Level: Sendable, Equatable {
        case ok, warning, problem, info
    }
    /// How it is.
    public var level: Level
    /// What was checked and found.
    public var text: String
    /// What to do, when something is to be done.
    public var fix: String?

    /// Creates a line.
    public init(_ level: Level, _ text: String, fix: String? = nil) {
        self.level = level
        self.text = text
        self.fix = fix
    }
}

extension Error {
    /// The error as one sentence for a person: its `LocalizedError` description when it has one
    /// (``AuthError``'s message, not its `AuthError(provider, category)` debug form), else its
    /// description.
    package var sentence: String { (self as? any LocalizedError)?.errorDescription ?? "\(self)" }
}

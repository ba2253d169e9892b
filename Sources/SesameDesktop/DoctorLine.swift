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
    /// For a problem, the exit status it calls for when it is `sesame doctor`'s first: a wrong
    /// setting is ``DesktopError/Status/config`` (78); `nil` is a missing service (69).
    public var status: DesktopError.Status?

    /// Creates a line.
    public init(_ level: Level, _ text: String, fix: String? = nil, status: DesktopError.Status? = nil) {
        self.level = level
        self.text = text
        self.fix = fix
        self.status = status
    }

    /// A problem: `what`, then `error` as a sentence, with the status a ``DesktopError`` names
    /// (78 for a wrong setting).
    public static func problem(_ what: String, _ error: any Error) -> DoctorLine {
        DoctorLine(.problem, "\(what): \(error.sentence)", status: (error as? DesktopError)?.status)
    }
}

extension Error {
    /// The error as one sentence for a person: its `LocalizedError` description when it has one
    /// (``AuthError``'s message, not its `AuthError(provider, category)` debug form), else its
    /// description.
    package var sentence: String { (self as? any LocalizedError)?.errorDescription ?? "\(self)" }
}

import Foundation

/// A failure of the emulator itself (not an error of the provider it plays): bad configuration, a state file it
/// cannot use, an admin request it cannot carry out.
public struct EmulatorError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What went wrong, what it concerned, and what to do.
    public var message: String

    /// Creates an error.
    public init(message: String) { self.message = message }

    public var description: String { message }

    /// The ``message``: what `localizedDescription` returns.
    public var errorDescription: String? { message }

    package static func stateFile(_ url: URL, _ reason: String) -> EmulatorError {
        EmulatorError(message: "The emulator state file \(url.path) \(reason)")
    }
}

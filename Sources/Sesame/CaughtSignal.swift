internal import CSesameSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A signal caught into a descriptor while this lives: each arrival writes one byte to it (the
/// write end of a pipe that a polling thread also watches), and its default action is off.
/// Installed when the initialiser returns, so a signal sent right after is never lost (a dispatch
/// signal source is registered later, on its own queue). ``restore()`` puts the previous action
/// back. Used from one task: a terminal prompt that Ctrl-C must cancel, not kill.
package final class CaughtSignal {
    private let number: Int32
    private var previous = sigaction()
    private var restored = false

    /// Starts catching `number` into `descriptor`.
    ///
    /// - Throws: `POSIXError` when the action cannot be changed.
    package init(_ number: Int32, into descriptor: Int32) throws {
        self.number = number
        let status = sesame_signal_to_descriptor(number, descriptor, &previous)
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EINVAL) }
    }

    /// Stops catching and puts the previous action back; once.
    package func restore() {
        guard !restored else { return }
        restored = true
        _ = sesame_signal_restore(number, &previous)
    }

    deinit { restore() }
}

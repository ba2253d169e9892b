import Dispatch
import Foundation
import Sesame

/// Waits for the first of a few signals, delivered on a dispatch queue instead of a handler:
/// the signals' default actions are off from ``init(_:)`` until ``cancel()``, which restores
/// their previous dispositions. `sesame emulator`'s main loops wait on it, and so can a
/// `SesameDesktop.ForegroundEmulator` in another package, on its request's signals.
public final class SignalWaiter: Sendable {
    private let state = Locked<(signal: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))
    private let sources: Locked<[any DispatchSourceSignal]>
    private let previous: Locked<[(Int32, sighandler_t?)]>

    /// Starts listening for `signals`, turning their default actions off.
    public init(_ signals: [Int32]) {
        var previous: [(Int32, sighandler_t?)] = []
        for number in signals { previous.append((number, signal(number, SIG_IGN))) }
        self.previous = Locked(previous)
        sources = Locked([])
        let queue = DispatchQueue(label: "sesame.emulator.signals")
        for number in signals {
            sources.withLock { sources in
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { [weak self] in self?.deliver(number) }
                source.resume()
                sources.append(source)
            }
        }
    }

    private func deliver(_ signal: Int32) {
        let waiter = state.withLock { state -> CheckedContinuation<Int32, Never>? in
            guard state.signal == nil else { return nil }
            state.signal = signal
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: signal)
    }

    /// The first signal that arrived, once one has.
    public func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Int32? in
                if let signal = state.signal { return signal }
                state.waiter = continuation
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }

    /// Stops listening and restores the signals' previous dispositions.
    public func cancel() {
        for source in sources.withLock({ $0 }) { source.cancel() }
        for (number, handler) in previous.withLock({ $0 }) { signal(number, handler) }
    }
}

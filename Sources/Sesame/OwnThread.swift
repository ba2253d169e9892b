import Foundation

/// Runs blocking work (file reads and writes, `fsync`, `flock` waiting for another process,
/// reading standard input) on a thread of its own and hands its result to the awaiting task,
/// so that no thread of the cooperative pool blocks.
///
/// The one copy of this bridge in the package. The work is not interrupted when the task is
/// cancelled: the calls it makes cannot be, so the caller checks for cancellation afterwards.
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

import Foundation

/// Runs blocking work (file reads and writes, `fsync`, `flock` waiting for another process,
/// reading standard input, waiting for a child process) on a thread of its own and hands its
/// result to the awaiting task, so that no thread of the cooperative pool blocks.
///
/// The one bridge of this kind in the package. A blocking call cannot be interrupted from
/// outside, so cancelling the awaiting task does not stop `body` by itself: where the work
/// allows it, `onCancel` makes it return early (it kills the child being waited for, closes
/// the descriptor being read), and it runs at most once, on the cancelling thread. Without
/// it, the caller checks for cancellation once the work has finished.
///
/// `body`'s error type is kept: work that cannot fail is awaited without `try`.
package func onOwnThread<T: Sendable, Failure: Error>(
    _ body: @escaping @Sendable () throws(Failure) -> T,
    onCancel: @escaping @Sendable () -> Void = {}
) async throws(Failure) -> T {
    let result = await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Failure>, Never>) in
            Thread.detachNewThread { continuation.resume(returning: Result { () throws(Failure) -> T in try body() }) }
        }
    } onCancel: {
        onCancel()
    }
    return try result.get()
}

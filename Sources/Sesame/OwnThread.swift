internal import CSesameSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
///
/// The thread keeps no copy of the result once it says it is done: the result goes into a box
/// that the awaiting task empties, so a process that exits as soon as it has the result (a
/// `Data` read from standard input) leaves nothing on the thread for LeakSanitizer to report.
package func onOwnThread<T: Sendable, Failure: Error>(
    _ body: @escaping @Sendable () throws(Failure) -> T,
    onCancel: @escaping @Sendable () -> Void = {}
) async throws(Failure) -> T {
    let handover = Locked<Result<T, Failure>?>(nil)
    await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            detachThread {
                // One statement: its temporaries are gone before the awaiting task goes on.
                handover.withLock { $0 = Result { () throws(Failure) -> T in try body() } }
                releaseThreadLibraryState()
                continuation.resume()
            }
        }
    } onCancel: {
        onCancel()
    }
    return try handover.withLock { $0.take() }!.get()
}

/// Frees what libraries keep for the calling thread and would free only in its exit: OpenSSL's
/// per-thread state, when libcrypto is in the process (an emulator's key pair, libcurl's start),
/// without loading it otherwise. For a thread of ``detachThread(_:)`` to call once its work is
/// done and *before* it tells anyone so: a process that exits while such a thread is still
/// ending has LeakSanitizer find that state attached to no thread it knows (a report of 904
/// bytes, OpenSSL 3's per-thread error queue).
package func releaseThreadLibraryState() {
    sesame_openssl_thread_stop_if_loaded()
}

/// Runs `body` on a new detached POSIX thread. Work whose end someone waits for calls
/// ``releaseThreadLibraryState()`` before it signals that end.
///
/// A plain `pthread_create`, not Foundation's `Thread`: starting one of those also sets up
/// Foundation's thread object, its name and its thread-specific data, about a tenth of a
/// millisecond of every `sesame` command that reads its state file.
package func detachThread(_ body: @escaping @Sendable () -> Void) {
    final class Work: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Work(body)).toOpaque()
    var thread = pthread_t()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let created = pthread_create(
        &thread, &attributes,
        { context in
            Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
    guard created == 0 else {
        fatalError(
            "could not start a thread: pthread_create returned \(created) (\(String(cString: strerror(created))))")
    }
}

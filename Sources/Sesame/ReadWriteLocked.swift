#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a `pthread_rwlock_t`: many threads may read it at once, one at a time may
/// change it. The shape of ``Locked`` (`withReadLock`, `withWriteLock`), for state that is read
/// far more often than it is changed, where readers that took turns on one mutex would queue
/// behind each other (the emulator's engine answering `GET /me` on several server threads).
///
/// Writers are preferred: once one waits, new readers wait behind it, so a steady stream of
/// reads cannot hold off a change for ever. Neither lock is recursive: taking either again
/// inside a closure on the same thread deadlocks. ThreadSanitizer intercepts the `pthread_rwlock`
/// calls, so it sees every hand-over, as it does for ``Locked``.
///
/// A read closure must not change the value, nor anything the value reaches that other readers
/// could see at the same time: it gets the value `borrowing`, but a class instance can still be
/// changed through it, and that is a data race.
package final class ReadWriteLocked<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: `value`'s pointee is read only under the read or write lock and
    // changed only under the write lock.
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Creates a lock holding `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        defer { pthread_rwlockattr_destroy(&attributes) }
        #if canImport(Glibc)
            pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        #endif
        let error = pthread_rwlock_init(lock, &attributes)
        precondition(error == 0, "pthread_rwlock_init failed: \(error)")
        value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        let error = pthread_rwlock_destroy(lock)
        precondition(error == 0, "pthread_rwlock_destroy failed: \(error)")
        lock.deinitialize(count: 1)
        lock.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Calls `body` with the value while holding the lock for reading (other readers may hold it
    /// too), and returns what it returns.
    @inlinable
    package func withReadLock<Result: ~Copyable, E: Error>(
        _ body: (borrowing Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let error = pthread_rwlock_rdlock(lock)
        precondition(error == 0, "pthread_rwlock_rdlock failed: \(error)")
        defer { unlock() }
        return try body(value.pointee)
    }

    /// Calls `body` with the value while holding the lock for writing (no other thread holds it),
    /// and returns what it returns.
    @inlinable
    package func withWriteLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let error = pthread_rwlock_wrlock(lock)
        precondition(error == 0, "pthread_rwlock_wrlock failed: \(error)")
        defer { unlock() }
        return try body(&value.pointee)
    }

    @inlinable
    func unlock() {
        let error = pthread_rwlock_unlock(lock)
        precondition(error == 0, "pthread_rwlock_unlock failed: \(error)")
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a `pthread_rwlock_t`: Sesame's lock for small synchronous state, used in place
/// of `Synchronization.Mutex` with the same call shape (`withLock`, `withLockIfAvailable`), plus
/// ``withReadLock(_:)`` for state that is read far more often than it is changed, where readers
/// that took turns would queue behind each other (the emulator's engine answering `GET /me` on
/// several server threads).
///
/// It exists so that ThreadSanitizer can see every hand-over of the lock. On Linux, `Mutex`
/// passes a contended lock on through a futex in the standard library's slow path, which is not
/// instrumented, so TSan misses the acquire and reports a data race on every access the lock
/// protects whenever it is contended (`scripts/sanitize thread`). The `pthread_rwlock` calls are
/// intercepted by TSan, so a lock taken here is seen. SwiftNIO's `NIOLock` is the same design: a
/// class owning a heap-allocated lock (a lock must not move once initialised, and Swift promises
/// no stable address for a stored property).
///
/// Writers are preferred: once one waits, new readers wait behind it, so a steady stream of
/// reads cannot hold off a change for ever. Like `Mutex`, the value goes in and comes out as
/// `sending`, so a non-`Sendable` value can be kept inside and the lock is `Sendable` whatever
/// its value. The lock is not recursive: taking it again inside a closure on the same thread
/// deadlocks.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: `value`'s pointee is read only under the read or write lock and
    // changed only under the write lock.
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>
    /// The value lives in its own allocation and is reached through a pointer, as `Mutex` and
    /// NIO's `NIOLockedValueBox` reach theirs, not as a stored property: `&storedProperty` is a
    /// Swift access that ThreadSanitizer records at the property's address, and for an empty
    /// value (`Locked<Void>`, a plain lock) that address is the object's own start, whose header
    /// every caller reads before taking the lock, so TSan reported a race on every contended
    /// plain lock.
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

    /// Calls `body` with the value while holding the lock (no other thread holds it), and returns
    /// what it returns.
    ///
    /// Inlinable, as `Mutex.withLock` is: called across modules without it, each call would go
    /// through the unspecialized generic entry point, which cost `CurlTransport` several
    /// microseconds a request.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let error = pthread_rwlock_wrlock(lock)
        precondition(error == 0, "pthread_rwlock_wrlock failed: \(error)")
        defer { unlock() }
        return try body(&value.pointee)
    }

    /// Calls `body` with the value if the lock can be taken without waiting, and returns what it
    /// returns; returns `nil` at once, without calling `body`, if another thread holds it.
    @inlinable
    package func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_rwlock_trywrlock(lock) == 0 else { return nil }
        defer { unlock() }
        return try body(&value.pointee)
    }

    /// Calls `body` with the value while holding the lock for reading (other readers may hold it
    /// too), and returns what it returns.
    ///
    /// `body` must not change the value, nor anything the value reaches that other readers could
    /// see at the same time: it gets the value `borrowing`, but a class instance can still be
    /// changed through it, and that is a data race.
    @inlinable
    package func withReadLock<Result: ~Copyable, E: Error>(
        _ body: (borrowing Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let error = pthread_rwlock_rdlock(lock)
        precondition(error == 0, "pthread_rwlock_rdlock failed: \(error)")
        defer { unlock() }
        return try body(value.pointee)
    }

    @inlinable
    func unlock() {
        let error = pthread_rwlock_unlock(lock)
        precondition(error == 0, "pthread_rwlock_unlock failed: \(error)")
    }
}

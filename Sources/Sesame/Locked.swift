#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a `pthread_mutex_t`: Sesame's lock for small synchronous state, used in place
/// of `Synchronization.Mutex` with the same call shape (`withLock`, `withLockIfAvailable`).
///
/// It exists so that ThreadSanitizer can see every hand-over of the lock. On Linux, `Mutex`
/// passes a contended lock on through a futex in the standard library's slow path, which is not
/// instrumented, so TSan misses the acquire and reports a data race on every access the lock
/// protects whenever it is contended (`scripts/sanitize thread`). `pthread_mutex_lock` and
/// `pthread_mutex_unlock` are intercepted by TSan, so a lock taken here is seen. SwiftNIO's
/// `NIOLock` is the same design: a class owning a heap-allocated `pthread_mutex_t` (a mutex must
/// not move once initialised, and Swift promises no stable address for a stored property).
///
/// Like `Mutex`, the value goes in and comes out as `sending`, so a non-`Sendable` value can be
/// kept inside and the lock is `Sendable` whatever its value. The lock is not recursive: taking
/// it again inside `withLock` on the same thread deadlocks.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked Sendable: `value`'s pointee is read and written only while `mutex` is held.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// The value lives in its own allocation and is reached through a pointer, as `Mutex` and
    /// NIO's `NIOLockedValueBox` reach theirs, not as a stored property: `&storedProperty` is a
    /// Swift access that ThreadSanitizer records at the property's address, and for an empty
    /// value (`Locked<Void>`, a plain lock) that address is the object's own start, whose header
    /// every caller reads before taking the lock, so TSan reported a race on every contended
    /// plain lock.
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Creates a lock holding `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let error = pthread_mutex_init(mutex, nil)
        precondition(error == 0, "pthread_mutex_init failed: \(error)")
        value = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        let error = pthread_mutex_destroy(mutex)
        precondition(error == 0, "pthread_mutex_destroy failed: \(error)")
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Calls `body` with the value while holding the lock, and returns what it returns.
    ///
    /// Inlinable, as `Mutex.withLock` is: called across modules without it, each call would go
    /// through the unspecialized generic entry point, which cost `CurlTransport` several
    /// microseconds a request.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        lock()
        defer { unlock() }
        return try body(&value.pointee)
    }

    /// Calls `body` with the value if the lock can be taken without waiting, and returns what it
    /// returns; returns `nil` at once, without calling `body`, if another thread holds it.
    @inlinable
    package func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { unlock() }
        return try body(&value.pointee)
    }

    @inlinable
    func lock() {
        let error = pthread_mutex_lock(mutex)
        precondition(error == 0, "pthread_mutex_lock failed: \(error)")
    }

    @inlinable
    func unlock() {
        let error = pthread_mutex_unlock(mutex)
        precondition(error == 0, "pthread_mutex_unlock failed: \(error)")
    }
}

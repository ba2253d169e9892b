import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What waiters behind a lock file learn from a renewal that failed: a process that renews a
/// login and fails for a passing reason (the provider silent past the request timeout, down, or
/// throttling) writes the failure's category and message, and when, into the lock file before it
/// lets the lock go. Every process that was waiting for that lock then reports the same failure
/// instead of sending the same request and waiting out the same timeout in turn; a process that
/// starts waiting afterwards tries again. The stored login is never touched by it.
extension RefreshLock {
    /// The most a process waits for another one's renewal of the same login before it gives up
    /// with a passing failure (``ErrorCategory/retry``); `nil` (the default) waits as long as the
    /// other holds the lock. A program sets it, for the renewals it starts, to the request timeout
    /// it gives its transport plus a small margin:
    ///
    /// ```swift
    /// try await RefreshLock.$waitLimit.withValue(.seconds(65)) { try await session.validToken() }
    /// ```
    @TaskLocal public static var waitLimit: Duration?

    /// Writes `error` (its category and message, never a secret: the session's renewal redacts
    /// them) and `date` into the lock file, which the caller holds. Best effort: a failure that
    /// cannot be written only means that waiters try again themselves.
    func recordFailure(_ error: AuthError, at date: Date) {
        let bytes = Self.failureRecord(error, at: date)
        let fd = open(url.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard ftruncate(fd, 0) == 0 else { return }
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// The failure recorded in the lock file at or after `date`, as an ``AuthError`` for `provider`,
    /// if there is one; read by a holder of the lock.
    func failure(since date: Date, provider: ProviderID) -> AuthError? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return Self.failure(fromRecord: data, since: date, provider: provider)
    }

    /// `error`'s record (category, message, user message, HTTP status; no secret) with `date`, as
    /// JSON: what a lock file holds, and a lock service keeps beside its lock.
    package static func failureRecord(_ error: AuthError, at date: Date) -> Data {
        var record: [String: JSONValue] = [
            "category": .string(error.category.rawValue), "message": .string(error.message),
            "at": .number(date.timeIntervalSince1970),
        ]
        if error.shouldNotifyUser, let userMessage = error.userMessage { record["user_message"] = .string(userMessage) }
        if let status = error.httpStatus { record["http_status"] = .int(status) }
        return JSONValue.object(record).jsonData
    }

    /// The failure in `data` (a ``failureRecord(_:at:)``) if it was recorded at or after `date`,
    /// as an ``AuthError`` for `provider` that says another process met it.
    package static func failure(fromRecord data: Data, since date: Date, provider: ProviderID) -> AuthError? {
        guard !data.isEmpty, let record = JSONValue(parsing: data),
            let at = record["at"]?.doubleValue, at >= date.timeIntervalSince1970,
            let category = record["category"]?.stringValue, let message = record["message"]?.stringValue
        else { return nil }
        let userMessage = record["user_message"]?.stringValue
        return AuthError(
            category: ErrorCategory(rawValue: category),
            message: message + " (Another process's renewal of this login met this a moment ago.)",
            shouldNotifyUser: userMessage != nil, userMessage: userMessage,
            httpStatus: record["http_status"]?.doubleValue.map { Int($0) }, provider: provider)
    }

    /// Locks the file within `limit`, polling (`flock` cannot time out); `nil` when another
    /// process still holds it then.
    static func lock(_ path: String, within limit: Duration) async throws -> Int32? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        var pause = Duration.milliseconds(2)
        while true {
            if let fd = try PrivateFiles.tryLock(path) { return fd }
            let now = clock.now
            guard now < deadline else { return nil }
            try await Task.sleep(for: min(pause, now.duration(to: deadline)))
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// The failure of a waiter that gave up after `limit`.
    package static func waitedTooLong(_ limit: Duration) -> AuthError {
        AuthError(
            category: .retry,
            message: "Another process has been renewing this login for over \(Int(limit.inSeconds.rounded())) s "
                + "without finishing (its provider may not be answering); nothing was changed.")
    }
}

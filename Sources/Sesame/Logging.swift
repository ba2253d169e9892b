import Foundation

/// How much a log event matters: swift-log's `Logger.Level`, with the same names and raw values
/// (`Logger.Level(rawValue: level.rawValue)` converts). Sesame logs at ``debug`` and ``info``, and
/// ``trace`` for the decisions made on every call.
public enum LogLevel: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case trace, debug, info, notice, warning, error, critical

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A log event's text. It is made only from a string literal, written into Sesame, never from a
/// value at run time, so it cannot carry a token; what varies is in the event's ``LogMetadata``.
public struct LogMessage: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The text.
    public let description: String

    public init(stringLiteral value: StaticString) { description = value.description }
}

/// A log event's values, by name (`method`, `host`, `status`, `login`, …).
public typealias LogMetadata = [String: LogValue]

/// A value in a log event, made only from what carries no secret: numbers, durations, words
/// written into Sesame, HTTP methods, the host and path of a URL (its query values and fragment
/// left out), a login's key (provider, issuer, app, account), a type's name, and an error's
/// classification (category, codes, status; never its message or body). There is no way to
/// make one from a string, so a token, an authorization code, a PKCE verifier, a client secret
/// or a password cannot reach a log handler through Sesame.
public struct LogValue: Sendable, Hashable, CustomStringConvertible {
    /// The value as text.
    public let description: String

    private init(_ description: String) { self.description = description }

    /// A count or a status code.
    public static func number(_ value: Int) -> LogValue { LogValue(String(value)) }

    /// A duration, in milliseconds with one decimal (`12.5ms`).
    public static func duration(_ value: Duration) -> LogValue {
        let (seconds, attoseconds) = value.components
        let tenths = seconds * 10_000 + attoseconds / 100_000_000_000_000
        return LogValue("\(tenths / 10).\(abs(tenths % 10))ms")
    }

    /// A word written into Sesame: `due`, `keyring`, `yes`.
    public static func word(_ value: StaticString) -> LogValue { LogValue(value.description) }

    /// Whether something is so: `yes` or `no`.
    public static func flag(_ value: Bool) -> LogValue { LogValue(value ? "yes" : "no") }

    /// An HTTP method.
    public static func method(_ method: HTTPMethod) -> LogValue {
        LogValue(String(method.rawValue.unicodeScalars.filter { $0.isASCII && $0.properties.isAlphabetic }))
    }

    /// The host of `url`, with its port when it has one; never its user or password.
    public static func host(of url: URL) -> LogValue {
        let host = url.host ?? "-"
        return LogValue(url.port.map { "\(host):\($0)" } ?? host)
    }

    /// The path of `url` and the names of its query parameters, each value replaced by
    /// `<redacted>` (`/oauth/access_token?client_id=<redacted>&code=<redacted>`); the fragment is
    /// left out. Query values carry codes, tokens and secrets (`debug_token?input_token=`, a
    /// redirect's `code=`).
    public static func path(of url: URL) -> LogValue {
        let unreserved = CharacterSet(charactersIn: "-._~").union(.alphanumerics)
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = components?.percentEncodedPath ?? ""
        let names = (components?.queryItems ?? []).map { item in
            let name = item.name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "-"
            return item.value == nil ? name : "\(name)=\(Redaction.placeholder)"
        }
        return LogValue((path.isEmpty ? "/" : path) + (names.isEmpty ? "" : "?" + names.joined(separator: "&")))
    }

    /// A provider.
    public static func provider(_ id: ProviderID) -> LogValue { LogValue(id.rawValue) }

    /// A login's key: provider, issuer when there is one, app and account.
    public static func login(_ key: CredentialKey) -> LogValue { LogValue(key.description) }

    /// The name of `value`'s type (a store's: `FileCredentialStore`).
    public static func type(of value: Any) -> LogValue { LogValue(String(describing: Swift.type(of: value))) }

    /// What kind of error `error` is, never its message: an ``AuthError``'s category, code,
    /// subcode and HTTP status; a ``TransportError``'s or ``CredentialStoreError``'s kind;
    /// otherwise the error's type.
    public static func error(_ error: any Error) -> LogValue {
        switch error {
        case let error as AuthError:
            var parts = ["\(error.category)"]
            if let code = error.code { parts.append("code \(code)") }
            if let subcode = error.subcode { parts.append("subcode \(subcode)") }
            if let status = error.httpStatus { parts.append("HTTP \(status)") }
            return LogValue(parts.joined(separator: ", "))
        case let error as TransportError: return LogValue("transport \(error.kind)")
        case let error as CredentialStoreError: return LogValue("store \(error.kind)")
        case is CancellationError: return LogValue("cancelled")
        default: return LogValue(String(describing: Swift.type(of: error)))
        }
    }
}

/// Where Sesame's log events go: the app's handler, in swift-log's shape.
///
/// The app supplies it (``SesameLogging/bootstrap(_:)``); Sesame never builds a logger of its own
/// and never writes to the app's standard output or error. A handler that forwards to swift-log
/// is a few lines (see <doc:InstallingALogHandler>).
public protocol LogHandler: Sendable {
    /// The least level this handler takes: events below it are never built.
    var logLevel: LogLevel { get }

    /// Takes one event.
    ///
    /// - Parameters:
    ///   - level: how much it matters.
    ///   - message: what happened, a fixed sentence.
    ///   - metadata: its values, none of them a secret (``LogValue``).
    ///   - source: the Sesame module that logged it (`Sesame`, `SesameCurl`).
    ///   - file: the file (`#fileID`) that logged it.
    ///   - function: the function that logged it.
    ///   - line: the line that logged it.
    func log(
        level: LogLevel, message: LogMessage, metadata: LogMetadata, source: String, file: String, function: String,
        line: UInt)
}

/// The app's log handler for Sesame, installed once, as swift-log's `LoggingSystem.bootstrap`.
///
/// ```swift
/// SesameLogging.bootstrap(MyLogHandler())      // once, at start; nothing is logged before
/// ```
///
/// By default there is none and nothing is logged. Sesame logs each HTTP exchange (method, host,
/// path, status, duration), each renewal decision and each store operation, at ``LogLevel/info``
/// or below, with no secret in any event.
public enum SesameLogging {
    private static let installed = Locked<(any LogHandler)?>(nil)
    @TaskLocal private static var scoped: (any LogHandler)?

    /// Installs the process's handler. Call it once, before Sesame does anything; a second call
    /// is a programming error (as in swift-log).
    public static func bootstrap(_ handler: any LogHandler) {
        installed.withLock { current in
            precondition(current == nil, "SesameLogging.bootstrap was called twice; call it once per process.")
            current = handler
        }
    }

    /// Runs `operation` with `handler` taking the events of this task and the tasks it starts,
    /// instead of the installed one: for a test, or a part of a program that logs elsewhere.
    public static func withHandler<T>(
        _ handler: any LogHandler, isolation: isolated (any Actor)? = #isolation,
        _ operation: () async throws -> T
    ) async rethrows -> T {
        try await $scoped.withValue(handler, operation: operation, isolation: isolation)
    }

    /// The handler that takes this task's events, if any.
    public static var handler: (any LogHandler)? { scoped ?? installed.withLock { $0 } }

    /// Logs an event when there is a handler that takes `level`; `metadata` is built only then.
    package static func log(
        _ level: LogLevel, _ message: LogMessage, _ metadata: @autoclosure () -> LogMetadata = [:],
        file: String = #fileID, function: String = #function, line: UInt = #line
    ) {
        guard let handler, level >= handler.logLevel else { return }
        handler.log(
            level: level, message: message, metadata: metadata(), source: String(file.prefix { $0 != "/" }),
            file: file, function: function, line: line)
    }
}

extension SesameLogging {
    /// Runs one HTTP exchange, `send`, and logs it at debug: the method, host and path (query
    /// values left out), the status and how long it took, or the kind of error. Neither headers
    /// nor bodies are logged. A transport calls it around its own work.
    package static func exchange(
        _ request: HTTPRequest, file: String = #fileID, function: String = #function, line: UInt = #line,
        _ send: () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        guard let handler, LogLevel.debug >= handler.logLevel else { return try await send() }
        let started = ContinuousClock.now
        var metadata: LogMetadata = [
            "method": .method(request.method), "host": .host(of: request.url), "path": .path(of: request.url),
        ]
        do {
            let response = try await send()
            metadata["status"] = .number(response.status)
            metadata["duration"] = .duration(started.duration(to: .now))
            log(.debug, "HTTP exchange", metadata, file: file, function: function, line: line)
            return response
        } catch {
            metadata["error"] = .error(error)
            metadata["duration"] = .duration(started.duration(to: .now))
            log(.debug, "HTTP exchange failed", metadata, file: file, function: function, line: line)
            throw error
        }
    }

    /// Runs one operation of `store` on `key`, `body`, and logs it at debug: which operation,
    /// which store (its type), which login, how long it took, or the kind of error. Never a token.
    package static func storeOperation<T>(
        _ operation: StaticString, _ store: any CredentialStore, _ key: CredentialKey, file: String = #fileID,
        function: String = #function, line: UInt = #line, _ body: () async throws -> T
    ) async throws -> T {
        guard let handler, LogLevel.debug >= handler.logLevel else { return try await body() }
        let started = ContinuousClock.now
        var metadata: LogMetadata = [
            "operation": .word(operation), "store": .type(of: store), "login": .login(key),
        ]
        do {
            let result = try await body()
            if let found = result as? StoredCredential? { metadata["found"] = .flag(found != nil) }
            if let done = result as? Bool { metadata["done"] = .flag(done) }
            metadata["duration"] = .duration(started.duration(to: .now))
            log(.debug, "credential store operation", metadata, file: file, function: function, line: line)
            return result
        } catch {
            metadata["error"] = .error(error)
            metadata["duration"] = .duration(started.duration(to: .now))
            log(.debug, "credential store operation failed", metadata, file: file, function: function, line: line)
            throw error
        }
    }
}

extension LoginCondition {
    /// The condition as a log value: `valid`, `renewable`, `expired-renewable` or `needs-login`.
    var logValue: LogValue {
        switch self {
        case .valid: .word("valid")
        case .renewable(let expired): expired ? .word("expired-renewable") : .word("renewable")
        case .needsLogin: .word("needs-login")
        }
    }
}

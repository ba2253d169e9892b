import Sesame

/// A log handler that keeps every event in memory, as swift-log's `InMemoryLogHandler`: install
/// it for a test with `SesameLogging.withHandler(_:_:)` and look at what Sesame logged.
///
/// ```swift
/// let log = InMemoryLogHandler()
/// try await SesameLogging.withHandler(log) { try await session.open(allowLoginUI: false) }
/// #expect(log.events.contains { $0.message.description == "stored login read" })
/// ```
public final class InMemoryLogHandler: LogHandler {
    /// One event as it was logged.
    public struct Event: Sendable, Hashable {
        /// How much it mattered.
        public var level: LogLevel
        /// What happened.
        public var message: LogMessage
        /// Its values.
        public var metadata: LogMetadata
        /// The module that logged it.
        public var source: String

        /// The event as one line: level, message and the values, their names in order.
        public var line: String {
            let values = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "\(level.rawValue) \(source): \(message) " + values.joined(separator: " ")
        }
    }

    private let recorded = Locked<[Event]>([])
    public let logLevel: LogLevel

    /// Creates a handler that keeps the events at `logLevel` and above (all, by default).
    public init(logLevel: LogLevel = .trace) { self.logLevel = logLevel }

    /// Every event so far, in order.
    public var events: [Event] { recorded.withLock { $0 } }

    public func log(
        level: LogLevel, message: LogMessage, metadata: LogMetadata, source: String, file: String, function: String,
        line: UInt
    ) {
        recorded.withLock { $0.append(Event(level: level, message: message, metadata: metadata, source: source)) }
    }
}

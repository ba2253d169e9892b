import Sesame
import SesameDesktop

/// `sesame --debug` and `SESAME_DEBUG=1`: Sesame's log events, each a line on standard error, as
/// `GH_DEBUG` does for gh. The events carry no secret (``LogValue``); the line shows them as
/// they are, their names in order, a value with spaces in quotes.
struct DebugLogHandler: LogHandler {
    let writeError: @Sendable (String) -> Void

    var logLevel: LogLevel { .trace }

    func log(
        level: LogLevel, message: LogMessage, metadata: LogMetadata, source: String, file: String, function: String,
        line: UInt
    ) {
        let values = metadata.sorted { $0.key < $1.key }.map { name, value in
            let text = Terminal.printable(value.description)
            return "\(name)=" + (text.contains(" ") ? "\"\(text)\"" : text)
        }
        let tail = values.isEmpty ? "" : ": " + values.joined(separator: " ")
        writeError("[\(Desktop.programName) \(level.rawValue)] \(message)\(tail)\n")
    }

    /// Whether the environment asks for debug output: `SESAME_DEBUG` set to anything but empty,
    /// `0` or `false`.
    static func requested(by environment: [String: String]) -> Bool {
        guard let value = environment["SESAME_DEBUG"] else { return false }
        return !["", "0", "false"].contains(value.lowercased())
    }
}

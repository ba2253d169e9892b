import Foundation
import SesameTestSupport
import Testing

/// `dbus-monitor` on the test's session bus, its output read as it comes.
final class BusMonitor: @unchecked Sendable {
    private let process = Process()
    private let output = Pipe()
    /// What has been read so far; touched by one reading call at a time.
    private var text = ""

    init(rule: String) throws {
        process.executableURL = URL(fileURLWithPath: try KeyringTestSupport.requireExecutable("dbus-monitor"))
        process.arguments = ["--session", rule]
        process.environment = TestChildren.environment()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Returns once the monitor listens: the bus has taken its name away again.
    func waitUntilListening() async throws {
        text += await readUntil(output.fileHandleForReading, contains: "NameLost", timeout: .seconds(30))
        try #require(text.contains("NameLost"), "dbus-monitor did not start: \(text)")
        text = ""
    }

    /// Reads until `done` holds for what was read since listening began, or `timeout` passes;
    /// returns what was read.
    func read(timeout: Duration, until done: (String) -> Bool) async -> String {
        let deadline = ContinuousClock.now + timeout
        while !done(text), ContinuousClock.now < deadline {
            // Each method call ends with the next one's first line: read a little at a time.
            text += await readUntil(output.fileHandleForReading, contains: "\n", timeout: .milliseconds(200))
        }
        return text
    }

    func stop() { if process.isRunning { process.terminate() } }

    /// The method calls in `text` to `member`, each with its arguments (the indented lines).
    static func calls(_ member: String, in text: String) -> [String] {
        var blocks: [String] = []
        for line in text.split(separator: "\n") {
            if line.first == " ", !blocks.isEmpty {
                blocks[blocks.count - 1] += "\n" + line
            } else {
                blocks.append(String(line))
            }
        }
        return blocks.filter { $0.hasPrefix("method call") }
            .filter { block in
                let head = block.prefix { $0 != "\n" }
                return head.hasSuffix("member=\(member)")
            }
    }

    /// The unique name a call was sent from.
    static func sender(of call: String) -> String? {
        guard let start = call.range(of: "sender=") else { return nil }
        return String(call[start.upperBound...].prefix { $0 != " " })
    }

    /// Each call's first line (its sender, member and path), never its arguments, where another
    /// test's CreateItem would carry a secret: what a failure shows.
    static func heads(_ text: String) -> String {
        text.split(separator: "\n").filter { $0.hasPrefix("method call") }.joined(separator: "\n")
    }
}

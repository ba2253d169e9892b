import Foundation
import Sesame
import SesameDesktop
import Testing

/// Collects what is written to a file handle.
final class CapturedOutput: Sendable {
    let pipe = Pipe()
    var handle: FileHandle { pipe.fileHandleForWriting }

    /// Everything written so far; closes the writing end.
    func text() throws -> String {
        try pipe.fileHandleForWriting.close()
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

@Suite("SystemBrowserOpener")
struct SystemBrowserOpenerTests {
    static let url = URL(string: "https://auth.example.com/authorize?client_id=1&state=abc")!

    /// A command that writes the URL it is given to a file, standing in for xdg-open.
    static func recordingCommand(_ file: URL) -> [String] {
        ["sh", "-c", "printf '%s' \"$0\" > '\(file.path)'"]
    }

    static func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("sesame-opener-\(UUID().uuidString)")
    }

    @Test("with a display it runs the command with the URL")
    func runsCommand() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let output = CapturedOutput()
        let opener = SystemBrowserOpener(
            command: Self.recordingCommand(file), environment: ["DISPLAY": ":0", "PATH": "/usr/bin:/bin"],
            output: output.handle)
        try await opener.open(Self.url)
        #expect(try String(contentsOf: file, encoding: .utf8) == Self.url.absoluteString)
        #expect(try output.text().contains("A browser window was opened"))
    }

    @Test("without DISPLAY or WAYLAND_DISPLAY it prints the URL and says why, running nothing")
    func noDisplay() async throws {
        let file = Self.temporaryFile()
        let output = CapturedOutput()
        let opener = SystemBrowserOpener(
            command: Self.recordingCommand(file), environment: ["PATH": "/usr/bin:/bin", "WAYLAND_DISPLAY": ""],
            output: output.handle)
        try await opener.open(Self.url)
        let text = try output.text()
        #expect(text.contains("No graphical display"))
        #expect(text.contains(Self.url.absoluteString))
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test("print-only mode prints the URL and runs nothing")
    func printOnly() async throws {
        let file = Self.temporaryFile()
        let output = CapturedOutput()
        let opener = SystemBrowserOpener(
            mode: .printOnly, command: Self.recordingCommand(file), environment: ["DISPLAY": ":0"],
            output: output.handle)
        try await opener.open(Self.url)
        #expect(try output.text().contains(Self.url.absoluteString))
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test(
        "a failing or missing command prints the URL and the reason",
        arguments: [(["false"], "exit status 1"), (["sesame-no-such-browser"], "command not found")])
    func failure(_ command: [String], reason: String) async throws {
        let output = CapturedOutput()
        let opener = SystemBrowserOpener(
            command: command, environment: ["DISPLAY": ":0", "PATH": "/usr/bin:/bin"], output: output.handle)
        try await opener.open(Self.url)
        let text = try output.text()
        #expect(text.contains(reason))
        #expect(text.contains(Self.url.absoluteString))
    }

    @Test("with no output it says nothing, and fails at once where printing the address was the only way in")
    func silent() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let opener = SystemBrowserOpener(
            command: Self.recordingCommand(file), environment: ["DISPLAY": ":0", "PATH": "/usr/bin:/bin"], output: nil)
        try await opener.open(Self.url)
        #expect(try String(contentsOf: file, encoding: .utf8) == Self.url.absoluteString)
        let noDisplay = SystemBrowserOpener(
            command: Self.recordingCommand(file), environment: ["PATH": "/usr/bin:/bin"], output: nil)
        let error = await #expect(throws: AuthError.self) { try await noDisplay.open(Self.url) }
        #expect(error?.loginFailedReason == .noPresenter)
    }
}

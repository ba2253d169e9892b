import Foundation
import Testing

@testable import Sesame

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
}

@Suite("TerminalDeviceCodePresenter")
struct TerminalDeviceCodePresenterTests {
    static let authorization = DeviceAuthorization(
        deviceCode: "secret-device-code", userCode: "ABCD-EFGH", verificationURL: URL(string: "https://x.test/device")!,
        verificationURLComplete: URL(string: "https://x.test/device?user_code=ABCD-EFGH"), expiresIn: .seconds(420))

    @Test("it shows the code, the address, the expiry and a dot per poll, and never the device code")
    func showsCode() async throws {
        let output = CapturedOutput()
        let presenter = TerminalDeviceCodePresenter(output: output.handle, providerName: "Facebook")
        await presenter.present(Self.authorization)
        await presenter.stillWaiting(Self.authorization, nextPollIn: .seconds(5))
        await presenter.stillWaiting(Self.authorization, nextPollIn: .seconds(5))
        await presenter.finished(.succeeded)
        let text = try output.text()
        #expect(text.contains("To sign in to Facebook, open https://x.test/device"))
        #expect(text.contains("    ABCD-EFGH\n"))
        #expect(text.contains("https://x.test/device?user_code=ABCD-EFGH"))
        #expect(text.contains("expires in 7 min"))
        #expect(text.hasSuffix("Waiting for you to finish..... signed in.\n"))
        #expect(!text.contains("secret-device-code"))
    }

    @Test(
        "it says how the login ended",
        arguments: [
            (DeviceLoginEnd.cancelled, "cancelled."),
            (.failed(AuthError(category: .userCancelled, message: "declined")), "declined"),
            (.failed(AuthError.deviceCodeExpired()), "The device login code expired"),
        ])
    func endings(_ end: DeviceLoginEnd, expected: String) async throws {
        let output = CapturedOutput()
        await TerminalDeviceCodePresenter(output: output.handle).finished(end)
        #expect(try output.text().contains(expected))
    }

    @Test("durations read as minutes and seconds", arguments: [(420, "7 min"), (90, "1 min 30 s"), (45, "45 s")])
    func minutes(_ seconds: Int, expected: String) {
        #expect(TerminalDeviceCodePresenter.minutes(.seconds(seconds)) == expected)
    }
}

@Suite("Login values")
struct LoginValueTests {
    @Test("a device authorization's description hides the device code")
    func redactsDeviceCode() {
        let text = String(describing: TerminalDeviceCodePresenterTests.authorization)
        #expect(!text.contains("secret-device-code"))
        #expect(text.contains("ABCD-EFGH"))
    }

    @Test("a token answer's scope decides what was granted and declined")
    func tokenFromAnswer() throws {
        let answer = try #require(
            OAuthTokenResponse(
                json: JSONValue(parsing: Data(#"{"access_token":"t","expires_in":60,"scope":"email"}"#.utf8))))
        let request = LoginRequest(provider: "x", appID: "a", permissions: [.read("email"), .read("user_posts")])
        let now = Date(timeIntervalSince1970: 1000)
        let token = AccessToken(answer, for: request, now: now)
        #expect(token.permissions.granted == ["email"])
        #expect(token.permissions.declined == ["user_posts"])
        #expect(token.expirationDate == Date(timeIntervalSince1970: 1060))
    }

    @Test("a token answer without scope grants what was asked, plus what a re-request already had")
    func tokenWithoutScope() throws {
        let answer = try #require(OAuthTokenResponse(json: JSONValue(parsing: Data(#"{"access_token":"t"}"#.utf8))))
        let current = AccessToken(
            tokenString: "old", provider: "x", appID: "a", userID: "42", permissions: PermissionSet(granted: ["email"]))
        let request = LoginRequest(
            provider: "x", appID: "a", permissions: [Permission("publish_actions", kind: .init(rawValue: "publish"))],
            isRerequest: true,
            currentToken: current)
        let token = AccessToken(answer, for: request)
        #expect(token.permissions.granted == ["email", "publish_actions"])
        #expect(token.userID == "42")
        #expect(token.expirationDate == nil)
    }

    @Test("the RFC 8628 start answer is read, with Google's verification_url and a default interval")
    func readsDeviceAuthorization() throws {
        let json = JSONValue(
            parsing: Data(
                #"{"device_code":"d","user_code":"U","verification_url":"https://g.test/device","expires_in":"1800"}"#
                    .utf8))
        let authorization = try RFC8628DeviceDialect.readAuthorization(
            json, deviceCodeField: "device_code", provider: nil)
        #expect(authorization.verificationURL.absoluteString == "https://g.test/device")
        #expect(authorization.expiresIn == .seconds(1800))
        #expect(authorization.interval == .seconds(5))
        #expect(throws: AuthError.self) {
            try RFC8628DeviceDialect.readAuthorization(
                JSONValue(parsing: Data(#"{"user_code":"U"}"#.utf8)), deviceCodeField: "device_code", provider: nil)
        }
    }
}

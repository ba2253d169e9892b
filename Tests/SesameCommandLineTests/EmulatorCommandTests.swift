import Foundation
import Sesame
import SesameCurl
import SesameFacebookEmulator
import SesameGitHubEmulator
import SesameTestSupport
import Testing

@testable import SesameCommandLine

@Suite("sesame emulator")
struct EmulatorCommandTests {
    init() { TestProviders.bootstrap() }

    func parse(_ arguments: [String]) throws(UsageError) -> EmulatorCommand {
        try EmulatorCommand(try ArgumentParser.parse(arguments, for: EmulatorCommand.spec))
    }

    @Test("a provider's emulator by name, the first provider's by default, with that emulator's options")
    func options() throws {
        #expect(try parse([]) == EmulatorCommand(provider: "facebook"))
        #expect(
            try parse([
                "facebook", "--port", "8765", "--app-id=42", "--scenario", "transient,count=2", "--scenario",
                "slow,delayMs=5", "--in-memory", "--log",
            ])
                == EmulatorCommand(
                    provider: "facebook", port: 8765,
                    options: [
                        "app-id": ["42"], "scenario": ["transient,count=2", "slow,delayMs=5"], "in-memory": [""],
                        "log": [""],
                    ]))
        #expect(try parse(["oidc", "--port", "8765"]) == EmulatorCommand(provider: "oidc", port: 8765))
        #expect(try parse(["github", "--port", "8766"]) == EmulatorCommand(provider: "github", port: 8766))
        let command = try SesameCLI.parse(["emulator", "--port", "0", "--in-memory"])
        #expect(command == .emulator(EmulatorCommand(provider: "facebook", options: ["in-memory": [""]])))
    }

    @Test(
        "bad command lines are usage errors naming what is wrong",
        arguments: [
            (["--port", "70000"], "--port"), (["--port", "x"], "--port"), (["meteor"], "no 'meteor' emulator"),
            (["facebook", "extra"], "extra"), (["oidc", "--app-id", "42"], "--app-id is not an option of the oidc"),
            (["oidc", "--in-memory"], "it takes --port and --quirks"),
            (["github", "--scenario", "slow"], "github emulator"),
        ])
    func badValues(arguments: [String], mention: String) {
        #expect {
            try parse(arguments)
        } throws: { error in
            (error as? UsageError)?.message.contains(mention) == true
        }
    }

    @Test(
        "an emulator's own option values are checked when it starts: exit 64 with the option named",
        arguments: [
            (["--app-id", "abc"], "--app-id"), (["--scenario", "meteor"], "meteor"),
            (["--scenario", "slow,delayMs=-1"], "delayMs"), (["--in-memory", "--state-file", "/x"], "contradict"),
        ])
    func badEmulatorValues(arguments: [String], mention: String) async throws {
        let errors = Locked("")
        let io = CommandIO(
            readStandardInput: { _ in Data() }, write: { _ in }, writeError: { text in errors.withLock { $0 += text } })
        let command = try parse(["facebook"] + arguments)
        let status = await command.run(io: io, environment: ["XDG_STATE_HOME": "/tmp/none"])
        #expect(status == ExitStatus.usage)
        #expect(errors.withLock { $0 }.contains(mention))
    }

    @Test("as a process: prints its URLs, answers with the scenario, and stops cleanly on SIGTERM")
    func process() async throws {
        let arguments = ["--in-memory", "--app-id", "777", "--scenario", "unknown-error,count=1"]
        try await withEmulatorProcess(arguments) { banner in
            #expect(banner.contains("App id:       777"))
            #expect(banner.contains("State:        in memory only"))
            let base = try bannerBaseURL(banner)
            let transport = CurlTransport(configuration: .init(redirects: .never, proxy: .direct))
            let tokenReply = try await transport.send(.postJSON(base.appendingPathComponent("__sesame/tokens")))
            let token = try #require(tokenReply.json?["access_token"]?.stringValue)
            let me = HTTPRequest(
                url: base.appendingPathComponent("v19.0/me"), headers: ["Authorization": "Bearer \(token)"])
            let first = try await transport.send(me)
            #expect(first.status == 500)
            #expect(first.json?["error"]?["code"] == .number(1))
            #expect(try await transport.send(me).json?["id"] == .string(EmulatedUser.sesameDefault.id))
        }
        // Not asserted: that the freed port now refuses connections. Any process on the machine
        // may have been given that port since; the exit status and the message say it stopped.
    }

    @Test("as a process, github: prints its URLs, answers the GitHub API, and stops cleanly on SIGTERM")
    func githubProcess() async throws {
        try await withEmulatorProcess(["github"]) { banner in
            #expect(banner.contains("Client id:    \(GitHubEmulator.defaultClientID)"))
            let base = try bannerBaseURL(banner)
            let transport = CurlTransport(configuration: .init(redirects: .never, proxy: .direct))
            let tokenReply = try await transport.send(.postJSON(base.appendingPathComponent("__sesame/tokens")))
            let token = try #require(tokenReply.json?["token"]?.stringValue)
            let me = try await transport.send(
                HTTPRequest(
                    url: base.appendingPathComponent("api/v3/user"), headers: ["Authorization": "Bearer \(token)"]))
            #expect(me.json?["login"] == .string("octocat"))
            #expect(me.headers["x-ratelimit-remaining"] == "4999")
        }
    }
}

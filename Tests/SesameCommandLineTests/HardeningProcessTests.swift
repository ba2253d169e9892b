import Foundation
import Sesame
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What issue 47 found from outside in the state files, standard input and the helpers'
/// requests, each run against the built programs.
@Suite("hardening: state files under any umask, bounded standard input, ambiguous requests")
struct HardeningProcessTests {
    init() { TestProviders.bootstrap() }

    /// The modes of everything under `directory` that are not 0600 (files) or 0700 (directories).
    static func looseModes(under directory: URL) throws -> [String] {
        var loose: [String] = []
        for path in try [""] + FileManager.default.subpathsOfDirectory(atPath: directory.path) {
            var info = stat()
            let full = path.isEmpty ? directory.path : directory.appending(path: path).path
            guard lstat(full, &info) == 0 else { continue }
            let mode = info.st_mode & 0o777
            let wanted: mode_t = info.st_mode & S_IFMT == S_IFDIR ? 0o700 : 0o600
            if mode != wanted { loose.append("\(path.isEmpty ? "." : path) \(String(mode, radix: 8))") }
        }
        return loose
    }

    @Test("under umask 002 every state file is 0600, every directory 0700, and a switch is kept")
    func umask002() async throws {
        let cli = try CLIHarness()
        let approve = ["SESAME_EMULATOR_APPROVE": "auto"]
        let umask = "umask 002"
        for arguments in [
            ["login", "facebook", "--account", "work"], ["login", "facebook"], ["login", "github"],
            ["switch", "facebook", "work"],
        ] {
            let result = try await cli.run("sesame", arguments, shellSetup: umask, environment: approve)
            #expect(result.status == 0, "sesame \(arguments.joined(separator: " ")): \(result.standardError)")
            #expect(!result.standardError.contains("Sesame ignored"), "\(result.standardError)")
        }
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"], shellSetup: umask)
        #expect(!status.standardError.contains("Sesame ignored"), "\(status.standardError)")
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)), "\(status.standardError)")
        let facebook = try #require(
            document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == "facebook" })
        let active = (facebook["accounts"]?.arrayValue ?? []).filter { $0["active"]?.boolValue == true }
        #expect(active.map { $0["account"] } == [.string("work")], "the switch was lost: \(status.standardOutput)")

        let state = cli.root.appending(path: "state")
        let written = try FileManager.default.subpathsOfDirectory(atPath: state.path)
        let names = [
            "sesame/accounts.json", "sesame/credentials.json", "sesame/emulator.json", "sesame/github-emulator.json",
        ]
        for name in names {
            #expect(written.contains(name), "\(name) was not written: \(written)")
        }
        #expect(try Self.looseModes(under: state) == [])
    }

    /// A command that reads standard input, and what it says when given too much.
    struct EndlessInput: Sendable, CustomTestStringConvertible {
        var program: String
        var arguments: [String]
        var says: String
        var testDescription: String { "\(program) \(arguments.joined(separator: " "))" }
    }

    @Test(
        "endless standard input (/dev/zero) is refused at the size limit with 65, not read to the end",
        arguments: [
            EndlessInput(program: "docker-credential-sesame", arguments: ["get"], says: "more than 64 KiB"),
            EndlessInput(program: "docker-credential-sesame", arguments: ["list"], says: "more than 64 KiB"),
            EndlessInput(program: "sesame", arguments: ["git-credential", "get"], says: "larger than 64 KiB"),
            EndlessInput(
                program: "sesame", arguments: ["login", "facebook", "--with-token"], says: "longer than 16 KiB"),
            EndlessInput(
                program: "sesame",
                arguments: [
                    "login", "oidc", "--issuer", "http://127.0.0.1:9", "--client-id", "x", "--client-secret-stdin",
                ],
                says: "longer than 16 KiB"),
            EndlessInput(
                program: "sesame",
                arguments: ["explain-error", "--provider", "facebook", "--status", "400", "--body-file", "-"],
                says: "more than 1 MiB"),
        ])
    func endlessInput(_ command: EndlessInput) async throws {
        let cli = try CLIHarness()
        // The limit turns a hang (today's read to the end) into a failure; it times nothing.
        let result = try await cli.run(
            command.program, command.arguments, shellSetup: "exec </dev/zero", limit: .seconds(60))
        #expect(!result.wasKilled, "still reading after 60 s")
        #expect(result.status == 65, "\(result.standardOutput)\(result.standardError)")
        #expect((result.standardOutput + result.standardError).contains(command.says), "\(result)")
    }

    @Test("docker-credential-sesame gives no token for plain http to a registry that is not loopback")
    func plainHTTPRegistry() async throws {
        let cli = try CLIHarness()
        let config = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try #"{"registries": {"ghcr.io": "facebook", "127.0.0.1:5000": "facebook"}}"#.write(
            to: config.appending(path: "config.json"), atomically: true, encoding: .utf8)
        let approve = ["SESAME_EMULATOR_APPROVE": "auto"]
        let login = try await cli.run("sesame", ["login", "facebook"], environment: approve)
        try #require(login.status == 0, "\(login.standardError)")
        let token = try #require(try await cli.storedTokens().first)
        func get(_ serverURL: String) async throws -> ProcessResult {
            try await cli.run("docker-credential-sesame", ["get"], input: Data(serverURL.utf8))
        }
        for allowed in ["https://ghcr.io", "ghcr.io", "http://127.0.0.1:5000"] {
            let answer = try await get(allowed)
            #expect(answer.status == 0, "\(allowed): \(answer.standardOutput)\(answer.standardError)")
            #expect(answer.standardOutput.contains(token), "\(allowed) got no token")
        }
        for refused in ["http://ghcr.io", "HTTP://ghcr.io/v2/"] {
            let answer = try await get(refused)
            #expect(answer.status == 65, "\(refused): \(answer.standardOutput)\(answer.standardError)")
            #expect(!(answer.standardOutput + answer.standardError).contains(token), "\(refused) got the token")
            #expect(answer.standardOutput.contains("plain http to ghcr.io"), "\(answer.standardOutput)")
        }
    }
}

import Foundation
import Sesame
import SesameDesktop
import SesameTestSupport
import Testing

/// A program built on the command line says its own name: the `sesame` executable run as
/// `acme-auth` (a symbolic link, as an app's executable target of that name would be started)
/// prints `acme-auth` in its help, usage errors, messages, doctor lines, completion scripts and
/// manual page, and "sesame" only where it names Sesame itself: `SESAME_*` variables, the
/// `sesame/` folders, the emulators' `/__sesame/` paths.
@Suite("A program built on SesameCommandLine says its own name")
struct ProgramNameProcessTests {
    init() { TestProviders.bootstrap() }

    /// "sesame" as a word of its own, as in 'sesame login' or `complete -c sesame`; not in
    /// `SESAME_STORAGE`, `$XDG_STATE_HOME/sesame/`, `/__sesame/`, `sesame-desktop` (roff: `sesame\-desktop`) or "Sesame's".
    static func namesSesame(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { line in
            line.contains(/(^|[^\w\/.\-$])sesame(?![\w\/\-\\])/)
        }
    }

    @Test(
        "help, usage errors, a login with nothing configured, token, status, doctor, completions and the manual page say acme-auth",
        arguments: [
            (["help"], 0), (["--version"], 0), ([], 64), (["bogus"], 64), (["--bogus"], 64), (["login"], 64),
            (["login", "facebook", "--bogus"], 64), (["emulator", "--bogus"], 64), (["login", "dropbox"], 78),
            (["token", "facebook"], 77), (["status"], 77), (["doctor"], nil), (["completion", "bash"], 0),
            (["completion", "zsh"], 0), (["completion", "fish"], 0), (["manpage"], 0), (["help", "token"], 0),
        ] as [([String], Int32?)])
    func saysItsName(_ arguments: [String], status: Int32?) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "acme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let program = folder.appending(path: "acme-auth")
        try FileManager.default.createSymbolicLink(
            at: program, withDestinationURL: ProcessRunner.builtExecutable("sesame"))

        let cli = try CLIHarness(storage: "memory")
        let result = try await LiveProcess(program, arguments, environment: cli.environment, input: Data()).finish()
        let output = result.standardOutput + result.standardError
        if let status { #expect(result.status == status, "\(output)") }
        // roff escapes the manual page's hyphens.
        #expect(output.contains("acme-auth") || output.contains("acme\\-auth"), "\(output)")
        #expect(Self.namesSesame(output).isEmpty, "\(Self.namesSesame(output).joined(separator: "\n"))")
        if arguments == ["emulator", "--bogus"] {
            // Its usage lists the emulators the program registered.
            #expect(output.contains("acme-auth emulator [facebook|oidc|github]"), "\(output)")
        }
    }

    @Test(
        "the program's name is the one given, else the executable's name, else sesame",
        arguments: [
            ("acme", ["/usr/bin/sesame"], "acme"), (nil, ["/usr/local/bin/acme-auth", "login"], "acme-auth"),
            (nil, ["acme-auth"], "acme-auth"), (nil, [], "sesame"), (nil, ["/opt/my app"], "sesame"),
            (nil, ["/"], "sesame"),
        ] as [(String?, [String], String)])
    func resolvesTheName(_ given: String?, arguments: [String], expected: String) {
        #expect(Desktop.programName(given: given, arguments: arguments) == expected)
    }

    @Test("the name given to Desktop.bootstrap wins over the executable's (here the test runner's)")
    func givenNameWins() throws {
        let runner = try #require(CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent })
        #expect(runner != "sesame")
        #expect(Desktop.programName == "sesame")
    }
}

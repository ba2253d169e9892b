import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameFacebookEmulator
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a new user and another local user met from outside (issue 40), each run for real.
@Suite("tried from outside: planted state, echoed secrets, exits, writes, settings")
struct OutsideUserTests {
    init() { TestProviders.bootstrap() }

    // MARK: 1. planted state files

    enum Planted: String, CaseIterable, Sendable {
        case anotherUsersFile = "a file of another user"
        case writableByOthers = "a file others may write"
        case symbolicLink = "a symbolic link"
    }

    @Test(
        "a state file planted while the directory was open is ignored after the directory is made private",
        arguments: Planted.allCases)
    func plantedStateFile(_ planted: Planted) throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-planted-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appending(path: "sesame")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #expect(chmod(directory.path, 0o777) == 0)
        let file = directory.appending(path: "oidc-discovery.json")
        let body = Data(#"{"https://issuer.example":{"document":{"token_endpoint":"https://evil.example/t"}}}"#.utf8)
        switch planted {
        case .anotherUsersFile:
            try body.write(to: file)
            // Only root can give a file away; as anybody else the case is a file others may write.
            if geteuid() == 0 {
                #expect(chown(file.path, 65534, 65534) == 0)
                #expect(chmod(file.path, 0o644) == 0)
            } else {
                #expect(chmod(file.path, 0o666) == 0)
            }
        case .writableByOthers:
            try body.write(to: file)
            #expect(chmod(file.path, 0o666) == 0)
        case .symbolicLink:
            let target = root.appending(path: "elsewhere.json")
            try body.write(to: target)
            try FileManager.default.createSymbolicLink(at: file, withDestinationURL: target)
        }
        try PrivateFiles.ensurePrivateDirectory(directory)
        let state = JSONStateFile(url: file)
        #expect(state.read().isEmpty, "a planted file was read")
        // The next write replaces it with a file of this user, which is then read.
        try state.modify { $0["https://issuer.example"] = .string("mine") }
        #expect(state.read()["https://issuer.example"] == .string("mine"))
    }

    @Test("a state file of this user that only this user may write is read")
    func ownStateFile() throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-own-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let state = JSONStateFile(url: root.appending(path: "sesame/accounts.json"))
        try state.modify { $0["facebook"] = .string("a") }
        #expect(state.read()["facebook"] == .string("a"))
    }

    // MARK: 4. status when the store cannot be read

    @Test("status says the stored logins cannot be read, with token's status, not 'not logged in' and 77")
    func statusWithUnreadableStore() async throws {
        let cli = try CLIHarness()
        // A directory where the credential file should be: reading it fails as a broken disk would.
        let file = cli.root.appending(path: "state/sesame/credentials.json")
        try FileManager.default.createDirectory(at: file, withIntermediateDirectories: true)
        #expect(chmod(file.path, 0o700) == 0)
        let token = try await cli.run("sesame", ["token", "facebook"])
        #expect(token.status == 74, "\(token.standardError)")
        let status = try await cli.run("sesame", ["status"])
        #expect(status.status == token.status, "\(status.standardOutput)\(status.standardError)")
        #expect(!status.standardOutput.contains("Not logged in"), "\(status.standardOutput)")
        #expect(status.standardOutput.contains("could not be read"), "\(status.standardOutput)")
        let json = try await cli.run("sesame", ["status", "--json"])
        #expect(json.status == token.status)
    }

    // MARK: 5. output that could not be written

    /// Runs `script` with `/bin/sh -c` in the harness's environment.
    static func shell(
        _ cli: CLIHarness, _ script: String, environment extra: [String: String] = [:]
    ) async throws -> ProcessResult {
        let running = try await LiveProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script], environment: cli.environment.merging(extra) { $1 },
            input: Data())
        return await running.finish()
    }

    struct WriteCase: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var closed: Bool
        var testDescription: String {
            "sesame \(arguments.joined(separator: " ")) \(closed ? ">&-" : "> /dev/full")"
        }
    }

    @Test(
        "a command whose output is lost exits non-zero and says so",
        arguments: [
            WriteCase(arguments: ["token", "facebook"], closed: false),
            WriteCase(arguments: ["token", "facebook"], closed: true),
            WriteCase(arguments: ["status"], closed: false),
            WriteCase(arguments: ["manpage"], closed: false),
            WriteCase(arguments: ["manpage"], closed: true),
        ])
    func lostOutput(_ example: WriteCase) async throws {
        let cli = try CLIHarness()
        let login = try await cli.run("sesame", ["login", "facebook"], environment: NewUserDefectTests.approve)
        #expect(login.status == 0, "\(login.standardError)")
        let sesame = try ProcessRunner.builtExecutable("sesame").path
        let quoted = ([sesame] + example.arguments).map { "'\($0)'" }.joined(separator: " ")
        let redirect = example.closed ? ">&-" : "> /dev/full"
        let result = try await Self.shell(cli, "\(quoted) \(redirect)", environment: NewUserDefectTests.approve)
        #expect(result.status == 74, "\(result.standardError)")
        #expect(result.standardError.contains("could not write to standard output"), "\(result.standardError)")
    }

    @Test("a reader that went away is still not an error")
    func readerGone() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run("sesame", ["login", "facebook"], environment: NewUserDefectTests.approve)
        #expect(login.status == 0, "\(login.standardError)")
        let sesame = try ProcessRunner.builtExecutable("sesame").path
        let result = try await Self.shell(cli, "'\(sesame)' manpage | true; echo \"status $?\"")
        #expect(result.standardOutput.contains("status 0"), "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    // MARK: 8, 9. settings of the wrong type, unknown keys

    struct ConfigCase: Sendable, CustomTestStringConvertible {
        var file: String
        var names: String
        var testDescription: String { file }
    }

    static let badConfigs = [
        ConfigCase(file: #"{"facebook":{"app_id":1234567890}}"#, names: "facebook.app_id"),
        ConfigCase(file: #"{"facebook":{"app_id":"abc"}}"#, names: "facebook.app_id"),
        ConfigCase(file: #"{"facebook":{"appid":"123"}}"#, names: "facebook.appid"),
        ConfigCase(file: #"{"github":{"clientID":"x"}}"#, names: "github.clientID"),
        ConfigCase(file: #"{"github":{"client_id":7}}"#, names: "github.client_id"),
        ConfigCase(
            file: #"{"oidc":{"work":{"issuer":"https://id.example.com","clientid":"x"}}}"#, names: "oidc.work.clientid"),
    ]

    @Test("every command refuses a bad setting with 78 and the key's path", arguments: badConfigs)
    func badConfig(_ example: ConfigCase) async throws {
        let cli = try CLIHarness()
        let config = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data(example.file.utf8).write(to: config.appending(path: "config.json"))
        for arguments in [["status"], ["status", "--json"], ["token", "facebook"], ["doctor"]] {
            let result = try await cli.run("sesame", arguments)
            #expect(result.status == 78, "sesame \(arguments): \(result.standardOutput)\(result.standardError)")
            #expect(
                (result.standardOutput + result.standardError).contains(example.names),
                "sesame \(arguments): \(result.standardOutput)\(result.standardError)")
        }
    }

    @Test("the old clientID spelling of an OpenID issuer is still read, with a warning")
    func oldClientIDSpelling() async throws {
        let cli = try CLIHarness()
        let config = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data(#"{"oidc":{"work":{"issuer":"http://127.0.0.1:9","clientID":"desktop"}}}"#.utf8)
            .write(to: config.appending(path: "config.json"))
        let result = try await cli.run("sesame", ["token", "work"])
        #expect(result.status != 78, "\(result.standardError)")
        #expect(result.standardError.contains("clientID\" is the old spelling"), "\(result.standardError)")
    }

    // MARK: 3. control sequences in an explained body

    @Test(
        "explain-error prints no control sequence from the body",
        arguments: [
            [
                "--provider", "facebook", "--status", "400", "--body",
                #"{"error":{"message":"\u001b]0;pwned\u0007 bad","type":"OAuthException","code":190,"error_user_msg":"\u001b[2Jx","fbtrace_id":"\u001b[31mT"}}"#,
            ],
            [
                "--provider", "oidc", "--status", "400", "--body",
                #"{"error":"invalid_grant","error_description":"\u001b]0;pwned\u0007 bad"}"#,
            ],
            [
                "--provider", "github", "--status", "422", "--body",
                #"{"message":"\u001b]0;pwned\u0007 bad","errors":[{"message":"\u001b[31mred"}]}"#,
            ],
        ])
    func explainedControlSequences(_ arguments: [String]) async throws {
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable("sesame"), ["explain-error"] + arguments, input: Data())
        #expect(result.status == 0, "\(result.standardError)")
        #expect(!result.standardOutput.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
    }

    // MARK: 6. two logins at once against the built-in emulator

    @Test("two logins at once against the built-in emulator both stay valid", arguments: ["facebook", "github"])
    func concurrentEmulatorLogins(_ provider: String) async throws {
        let cli = try CLIHarness()
        let first = try await cli.start(
            "sesame", ["login", provider, "--account", "a"], environment: NewUserDefectTests.approve)
        let second = try await cli.start(
            "sesame", ["login", provider, "--account", "b"], environment: NewUserDefectTests.approve)
        let (a, b) = (await first.finish(), await second.finish())
        #expect(a.status == 0, "\(a.standardError)")
        #expect(b.status == 0, "\(b.standardError)")
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        #expect(status.status == 0, "\(status.standardOutput)\(status.standardError)")
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        let accounts = document["providers"]?.arrayValue?.flatMap { $0["accounts"]?.arrayValue ?? [] } ?? []
        let validity = Dictionary(
            accounts.compactMap { account in
                account["account"]?.stringValue.map { ($0, account["validity"]?.stringValue ?? "") }
            }, uniquingKeysWith: { a, _ in a })
        #expect(validity == ["a": "valid", "b": "valid"], "\(status.standardOutput)")
    }

    // MARK: 7. status in words

    @Test("status shows usage in words, marks the active account in words, and names GitHub's host once")
    func statusInWords() async throws {
        let cli = try CLIHarness()
        for provider in ["facebook", "github"] {
            let login = try await cli.run("sesame", ["login", provider], environment: NewUserDefectTests.approve)
            #expect(login.status == 0, "\(login.standardError)")
        }
        let status = try await cli.run("sesame", ["status", "--timeout", "60"])
        let text = status.standardOutput
        #expect(status.status == 0, "\(text)\(status.standardError)")
        #expect(!text.contains("{"), "JSON in the text: \(text)")
        #expect(!text.contains("✓"), "\(text)")
        #expect(text.contains("default (active):"), "\(text)")
        #expect(text.contains("last usage: app: 0% of calls"), "\(text)")
        #expect(text.contains(#/last usage: rate limit \d+/5000 \(core\), resets \d\d:\d\d/#), "\(text)")
        let githubLine = try #require(text.split(separator: "\n").first { $0.hasPrefix("github (") })
        #expect(githubLine.components(separatedBy: "github-emulator.localhost").count == 2, "\(githubLine)")
        let json = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        #expect(json.standardOutput.contains(#""remaining":"#), "--json keeps the numbers: \(json.standardOutput)")
    }

    // MARK: 10. messages without Swift or internal names

    @Test("a provider that cannot be reached is reported in words")
    func unreachableInWords() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run(
            "sesame", ["login", "oidc", "--issuer", "http://127.0.0.1:9", "--client-id", "x"])
        #expect(login.status == 75, "\(login.standardError)")
        for name in ["connectionFailed", "AuthError(", "Network error (", "`.never`", "sesame-write-check"] {
            #expect(!login.standardError.contains(name), "\(login.standardError)")
        }
        #expect(login.standardError.contains("Could not talk to 127.0.0.1"), "\(login.standardError)")
    }

    // MARK: 11. sentences that read as sentences

    @Test("switch, a bad app id and --storage memory say whole sentences; memory writes no file")
    func wholeSentences() async throws {
        let cli = try CLIHarness(storage: "memory")
        let memory = try await cli.run("sesame", ["login", "facebook"], environment: NewUserDefectTests.approve)
        #expect(memory.status == 0, "\(memory.standardError)")
        #expect(!memory.standardOutput.contains("which is gone"), "\(memory.standardOutput)")
        let github = try await cli.run("sesame", ["login", "github"], environment: NewUserDefectTests.approve)
        #expect(github.status == 0, "\(github.standardError)")
        #expect(memory.standardError.contains("its state is in memory only"), "\(memory.standardError)")
        let written =
            (try? FileManager.default.contentsOfDirectory(atPath: cli.root.appending(path: "state/sesame").path)) ?? []
        #expect(written.isEmpty, "--storage memory wrote \(written)")

        let file = try CLIHarness()
        let login = try await file.run("sesame", ["login", "facebook"], environment: NewUserDefectTests.approve)
        #expect(login.status == 0, "\(login.standardError)")
        let missing = try await file.run("sesame", ["switch", "facebook", "nosuch"])
        #expect(missing.status == 77)
        #expect(missing.standardError.contains("No login to the Facebook emulator is named 'nosuch'"), "\(missing)")
        let switched = try await file.run("sesame", ["switch", "facebook", "default"])
        #expect(
            switched.standardOutput.hasPrefix("The account 'default' of the Facebook emulator is now the active one."),
            "\(switched.standardOutput)")
        let bad = try await file.run("sesame", ["token", "facebook"], environment: ["SESAME_FACEBOOK_APP_ID": "abc"])
        #expect(bad.status == 78)
        #expect(!bad.standardError.contains("valid the"), "\(bad.standardError)")
        #expect(bad.standardError.contains("SESAME_FACEBOOK_APP_ID is 'abc', which is not a valid value for app-id"))
    }

    @Test("a port in use is explained once")
    func portInUse() async throws {
        let listener = try SilentListener()
        defer { listener.stop() }
        let cli = try CLIHarness()
        let second = try await cli.run("sesame", ["emulator", "facebook", "--port", "\(listener.port)", "--in-memory"])
        #expect(second.status != 0)
        #expect(second.standardError.components(separatedBy: "free one").count == 2, "\(second.standardError)")
        #expect(!second.standardError.contains(".."), "\(second.standardError)")
    }

    // MARK: 12. a home Sesame cannot write to

    @Test("a state directory that cannot be made is 73, naming it and what to do")
    func unwritableHome() async throws {
        let cli = try CLIHarness()
        // A file where the state directory's parent should be: no directory can be made under it,
        // whoever runs the test (root may write anywhere, but not under a file).
        let blocker = cli.root.appending(path: "blocker")
        try Data().write(to: blocker)
        let result = try await cli.run(
            "sesame", ["login", "facebook"],
            environment: NewUserDefectTests.approve.merging(["XDG_STATE_HOME": blocker.appending(path: "state").path]) {
                $1
            })
        #expect(result.status == 73, "\(result.standardError)")
        #expect(result.standardError.contains("could not create the directory \(blocker.path)/state"), "\(result)")
        #expect(result.standardError.contains("set XDG_STATE_HOME"), "\(result.standardError)")
        #expect(!result.standardError.contains("The operation could not be completed"), "\(result.standardError)")
    }

    // MARK: 14. a revocation nobody answers

    @Test("logout --revoke against a silent server says what it waits for, and stops at --timeout")
    func silentRevocation() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run("sesame", ["login", "facebook"], environment: NewUserDefectTests.approve)
        #expect(login.status == 0, "\(login.standardError)")
        let listener = try SilentListener()
        defer { listener.stop() }
        let started = ContinuousClock.now
        let logout = try await cli.run(
            "sesame", ["logout", "facebook", "--revoke", "--timeout", "1"],
            environment: [
                "SESAME_FACEBOOK_APP_ID": EmulatorConfiguration().defaultApp.id,
                "SESAME_FACEBOOK_GRAPH_URL": "http://127.0.0.1:\(listener.port)",
            ])
        #expect(ContinuousClock.now - started < .seconds(30), "it waited for the transport's own timeout")
        #expect(logout.status == 69, "\(logout.standardError)")
        #expect(logout.standardError.contains("Revoking the access at Facebook (waiting up to 1 s; --timeout"))
        #expect(logout.standardError.contains("did not answer the revocation within 1 s"), "\(logout.standardError)")
        #expect(!logout.standardError.contains(".."), "\(logout.standardError)")
        #expect(logout.standardOutput.contains("Logged out of Facebook account 'default'"))
        #expect(try await cli.storedTokens().isEmpty, "the login stays removed here")
    }

    // MARK: 15. Linux advice

    @Test("help and messages suggest no macOS tools")
    func noMacOSTools() async throws {
        let cli = try CLIHarness()
        let help = try await cli.run("sesame", ["login", "--help"])
        let empty = try await cli.run("sesame", ["login", "facebook", "--with-token"])
        let manual = try await cli.run("sesame", ["manpage"])
        for text in [help.standardOutput, empty.standardError, manual.standardOutput] {
            #expect(!text.contains("pbpaste") && !text.contains("pbcopy"), "\(text)")
        }
        #expect(empty.standardError.contains("--with-token < token.txt"), "\(empty.standardError)")
    }

    // MARK: 16. completions that know the values

    @Test(
        "bash completes known values and each provider's own login flags",
        arguments: [
            (["status", "--storage", ""], "keyring keyring-or-file file memory auto pass postgres"),
            (["explain-error", "--provider", ""], "facebook oidc github google microsoft gitlab dropbox slack"),
            (["login", "facebook", "--a"], "--account --app-id"),
        ])
    func bashCompletion(_ words: [String], _ expected: String) async throws {
        let reply = try await Self.bashCompletion(words)
        #expect(reply == expected)
    }

    @Test("login github --<Tab> offers no other provider's flags")
    func loginFlagsOfOneProvider() async throws {
        let reply = try await Self.bashCompletion(["login", "github", "--"]).split(separator: " ").map(String.init)
        #expect(reply.contains("--hostname") && reply.contains("--client-id"), "\(reply)")
        #expect(!reply.contains("--app-id") && !reply.contains("--issuer"), "\(reply)")
    }

    @Test("switch PROVIDER <Tab> and --account <Tab> offer the stored accounts, in bash, zsh and fish")
    func accountNamesComplete() async throws {
        let cli = try CLIHarness()
        for account in ["work", "home box"] {
            let login = try await cli.run(
                "sesame", ["login", "facebook", "--account", account], environment: ["SESAME_EMULATOR_APPROVE": "auto"])
            try #require(login.status == 0, "\(login.standardError)")
        }
        let listed = try await cli.run("sesame", ["__complete", "accounts", "facebook"])
        #expect(listed.standardOutput == "home box\nwork\n", "\(listed.standardError)")
        #expect(try await cli.run("sesame", ["__complete", "accounts", "github"]).standardOutput.isEmpty)

        #expect(try await Self.bashCompletion(["switch", "facebook", ""], cli) == #"home\ box work"#)
        #expect(try await Self.bashCompletion(["token", "facebook", "--account", "h"], cli) == #"home\ box"#)
        // Another store has none: the command line's --storage is passed on.
        #expect(
            try await Self.bashCompletion(["token", "facebook", "--storage", "memory", "--account", ""], cli) == "")

        let zsh = try await Self.completionShell(
            "/usr/bin/zsh",
            """
            compdef() { :; }
            source <(sesame completion zsh)
            _describe() { print -l -- "${(@P)${@[-1]}}"; }
            _sesame_program=sesame; words=(switch facebook ""); _sesame_accounts
            """, cli)
        #expect(zsh == "home box\nwork", "\(zsh)")
        let fish = try await Self.completionShell(
            "/usr/bin/fish", "sesame completion fish | source; complete -C 'sesame switch facebook '", cli)
        #expect(fish == "home box\nwork", "\(fish)")
    }

    @Test("zsh and fish offer each provider's own login flags, once the provider is named")
    func loginFlagsInZshAndFish() async throws {
        let cli = try CLIHarness()
        let fish = try await Self.completionShell(
            "/usr/bin/fish", "sesame completion fish | source; complete -C 'sesame login github --'", cli)
        let offered = Set(fish.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) })
        #expect(offered.contains("--hostname") && offered.contains("--client-id"), "\(offered)")
        #expect(!offered.contains("--app-id") && !offered.contains("--issuer"), "\(offered)")

        let script = try await cli.run("sesame", ["completion", "zsh"]).standardOutput
        let github = try #require(script.split(separator: "\n").first { $0.contains("github) provider_options=(") })
        #expect(github.contains("--hostname[") && !github.contains("--app-id[") && !github.contains("--issuer["))
        // The options every login gets: login's _arguments, after the per-provider case.
        let login = try #require(script.range(of: "        login)\n")).upperBound
        let arguments = try #require(script[login...].range(of: "_arguments -s")).lowerBound
        let common = script[arguments...].prefix { $0 != ";" }
        #expect(common.contains("$provider_options"), "\(common)")
        #expect(!common.contains("'--app-id[") && !common.contains("'--hostname["), "\(common)")
    }

    @Test("__complete serves the scripts and is in no help, script or manual page")
    func completeIsHidden() async throws {
        let cli = try CLIHarness()
        for arguments in [["help"], ["completion", "bash"], ["manpage"]] {
            let text = try await cli.run("sesame", arguments).standardOutput
            let shown = text.replacingOccurrences(of: "__complete accounts", with: "")
            #expect(!shown.contains("__complete"), "\(arguments): \(shown)")
        }
        let wrong = try await cli.run("sesame", ["__complete", "nothing"])
        #expect(wrong.status == 64)
    }

    /// What `shell -c script` prints, with the built `sesame` first on the PATH, in `cli`'s home.
    static func completionShell(_ shell: String, _ script: String, _ cli: CLIHarness) async throws -> String {
        var arguments = ["-c", script]
        if shell.hasSuffix("fish") { arguments.insert("--no-config", at: 0) }
        if shell.hasSuffix("zsh") { arguments.insert("-f", at: 0) }
        let running = try await LiveProcess(
            URL(fileURLWithPath: shell), arguments, environment: try builtFirst(cli.environment), input: Data())
        let result = await running.finish()
        #expect(result.status == 0, "\(shell): \(result.standardError)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `environment` with the built `sesame` first on the PATH.
    static func builtFirst(_ environment: [String: String]) throws -> [String: String] {
        let directory = try ProcessRunner.builtExecutable("sesame").deletingLastPathComponent().path
        return environment.merging(["PATH": directory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")]) { $1 }
    }

    /// What bash's completion of `sesame WORDS` (the last one being completed) offers.
    static func bashCompletion(_ words: [String], _ home: CLIHarness? = nil) async throws -> String {
        let cli = try home ?? CLIHarness()
        let sesame = try ProcessRunner.builtExecutable("sesame").path
        let quoted = (["sesame"] + words).map { "'\($0)'" }.joined(separator: " ")
        let script = """
            source <('\(sesame)' completion bash)
            COMP_WORDS=(\(quoted)); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
            _sesame
            echo "${COMPREPLY[*]}"
            """
        let running = try await LiveProcess(
            URL(fileURLWithPath: "/bin/bash"), ["-c", script], environment: try builtFirst(cli.environment),
            input: Data())
        let result = await running.finish()
        #expect(result.status == 0, "\(result.standardError)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: 17. the GitHub emulator's Try: line works

    @Test("the Try: line of 'sesame emulator github' logs in, and the README gives it")
    func githubEmulatorTryLine() async throws {
        let output = Pipe()
        let process = ChildProcess(
            executableURL: try ProcessRunner.builtExecutable("sesame"), arguments: ["emulator", "github"],
            standardOutput: .pipe(output), standardError: .null)
        try await process.start()
        defer { if process.isRunning { process.terminate() } }
        let banner = await readUntil(output.fileHandleForReading, contains: "Press Ctrl-C to stop.")
        let tryLine = try #require(banner.split(separator: "\n").first { $0.hasPrefix("Try: ") })
        let match = try #require(
            tryLine.firstMatch(of: #/Try: SESAME_GITHUB_URL=(\S+) sesame login github --client-id (\S+)$/#))
        let (base, clientID) = (String(match.1), String(match.2))

        let cli = try CLIHarness()
        let environment = ["SESAME_GITHUB_URL": base]
        let login = try await cli.start(
            "sesame", ["login", "github", "--client-id", clientID], environment: environment)
        let printed = try await login.waitForError(matching: #"enter the code\n\n\s+[A-Z0-9-]{4,}\n"#)
        let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z0-9-]{4,})\s*\n/#).map { String($0.1) })
        let approved = try await CurlTransport().send(
            HTTPRequest(
                method: .post, url: URL(string: "\(base)/__sesame/device")!,
                headers: ["Content-Type": "application/json"],
                body: Data(JSONValue.object(["user_code": .string(code)]).jsonText.utf8)))
        #expect(approved.status == 200)
        let result = await login.finish()
        #expect(result.status == 0, "\(result.standardError)")
        let token = try await cli.run("sesame", ["token", "github"], environment: environment)
        #expect(token.status == 0, "\(token.standardError)")

        process.terminate()
        _ = await readToEnd(output.fileHandleForReading)
        _ = await process.exitStatus()

        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appending(path: "README.md"), encoding: .utf8)
        #expect(readme.contains("`SESAME_GITHUB_URL=http://127.0.0.1:8766 sesame login github --client-id"))
    }
}

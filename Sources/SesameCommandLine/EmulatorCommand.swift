import Foundation
import Sesame
import SesameEmulator

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `sesame emulator`: runs the local Facebook until interrupted.
package struct EmulatorCommand: Sendable, Equatable {
    /// The port on 127.0.0.1; 0 picks a free one.
    package var port: Int
    /// The app id to serve instead of the default one.
    package var appID: String?
    /// Scenarios active from the start.
    package var scenarios: [ScenarioSetting]
    /// Where to keep the emulator's state; `nil` keeps it in memory only.
    package var stateFile: String?
    /// Whether to print a line per request on standard error.
    package var logsRequests: Bool
    /// `--oidc`: run a local OpenID provider instead of the Facebook one.
    package var oidc: Bool
    /// `--github`: run a local GitHub instead of the Facebook one.
    package var github: Bool = false

    package init(
        port: Int = 0, appID: String? = nil, scenarios: [ScenarioSetting] = [], stateFile: String?,
        logsRequests: Bool = false, oidc: Bool = false
    ) {
        self.oidc = oidc
        self.port = port
        self.appID = appID
        self.scenarios = scenarios
        self.stateFile = stateFile
        self.logsRequests = logsRequests
    }

    /// The command's spec: its options and help.
    package static let spec = CommandSpec(
        name: "emulator",
        summary: "Run a local Facebook (login dialog, Graph API, scenarios) until interrupted.",
        synopses: [
            "[--port N] [--app-id ID] [--scenario NAME[,key=value...]]...",
            " [--state-file PATH | --in-memory] [--log]",
            "--oidc [--port N]",
            "--github [--port N]",
        ],
        discussion: """
            Serves Facebook's login dialog, Graph API, device login and test-user API on
            127.0.0.1, prints their URLs, and runs until Ctrl-C (SIGINT) or SIGTERM; then it
            answers the requests in flight, saves its state and exits 0.

            People, tokens, grants and posts are kept in $XDG_STATE_HOME/sesame/emulator.json
            (~/.local/state/sesame/emulator.json), so a token from one run still works in the
            next; --in-memory forgets them at exit. The admin API under /__sesame/ sets
            scenarios, approves logins without a browser and moves time.

            \(wrapped("Scenarios: " + EmulatorScenario.allCases.map(\.rawValue).joined(separator: ", ") + "."))
            Options after the name: user=ID, count=N, delayMs=N, permission=NAME,
            regainAccessMinutes=N.

            --oidc runs a local OpenID provider instead (discovery, JWKS, consent page, device
            login, refresh with rotation, userinfo, RFC 7009 revocation), in memory only, and
            prints its issuer and public client id for 'sesame login oidc --issuer URL
            --client-id ID'. Its device page approves a code in the browser; POST
            {"user_code": "..."} to ISSUER/__sesame/device approves one without it.

            --github runs a local GitHub instead (device flow with its HTTP-200 errors,
            /api/v3/user, /api/v3/user/repos paged with Link, rate-limit headers, scenarios
            bad-credentials, primary-rate-limit, secondary-rate-limit, sso-required,
            scope-missing, device-flow-disabled), in memory only, laid out as a GitHub
            Enterprise Server at http://127.0.0.1:PORT.
            """,
        options: [
            OptionSpec("port", value: "N", "The port on 127.0.0.1 (default 0: any free port)."),
            OptionSpec("app-id", value: "ID", "Serve this app id (digits) instead of the default 1234567890123456."),
            OptionSpec(
                "scenario", value: "NAME", repeatable: true,
                "Activate a scenario from the start, such as transient,count=2. Repeatable."),
            OptionSpec("state-file", value: "PATH", "Keep the state in this file instead of the default one."),
            OptionSpec("in-memory", "Keep the state in memory only."),
            OptionSpec("log", "Print a line per request (method, path, status; never the query) on stderr."),
            OptionSpec("oidc", "Run a local OpenID Connect provider instead of Facebook."),
            OptionSpec("github", "Run a local GitHub (device flow, REST API, scenarios) instead of Facebook."),
        ],
        examples: [
            ("sesame emulator", "A local Facebook on a free port"),
            (
                "sesame emulator --port 8765 --scenario app-throttled,count=3 --scenario slow,delayMs=200",
                "Throttle the next three calls, and answer everything slowly"
            ),
            ("sesame emulator --oidc --port 8765", "A local OpenID provider at http://127.0.0.1:8765"),
            ("sesame emulator --github --port 8766", "A local GitHub at http://127.0.0.1:8766"),
        ]
    )

    /// The command's place in the tree.
    package static let definition = CommandDefinition(name: "emulator", spec: spec) { parsed throws(UsageError) in
        .emulator(try EmulatorCommand(parsed))
    }

    /// Checks the parsed arguments.
    package init(
        _ parsed: ParsedArguments, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        throws(UsageError)
    {
        func fail(_ message: String) -> UsageError { UsageError(message, command: Self.spec.name) }
        if let extra = parsed.positionals.first { throw fail("unexpected argument '\(extra)'") }
        if parsed.flags.contains("oidc"), parsed.flags.contains("github") {
            throw fail("--oidc and --github each choose an emulator; give one of them")
        }
        for mode in ["oidc", "github"] where parsed.flags.contains(mode) {
            for option in ["app-id", "scenario", "state-file"] where parsed.values[option] != nil {
                throw fail("--\(option) is for the Facebook emulator; with --\(mode) give only --port")
            }
            for flag in ["in-memory", "log"] where parsed.flags.contains(flag) {
                throw fail("--\(flag) is for the Facebook emulator; with --\(mode) give only --port")
            }
        }
        var port = 0
        if let text = parsed.value("port") {
            guard let value = Int(text), (0...65_535).contains(value) else {
                throw fail("--port must be a port number from 0 to 65535; '\(text)' is not one")
            }
            port = value
        }
        let appID = parsed.value("app-id")
        if let appID, appID.isEmpty || appID.count > 20 || !appID.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw fail("--app-id must be a Facebook app id: 1 to 20 digits; '\(appID)' is not one")
        }
        var scenarios: [ScenarioSetting] = []
        for text in parsed.values["scenario"] ?? [] {
            do { scenarios.append(try ScenarioSetting(argument: text)) } catch {
                throw fail("--scenario \(text): \(error)")
            }
        }
        let inMemory = parsed.flags.contains("in-memory")
        if inMemory, parsed.value("state-file") != nil {
            throw fail("--state-file and --in-memory contradict each other; give one of them")
        }
        let stateFile =
            inMemory
            ? nil
            : parsed.value("state-file") ?? EmulatorConfiguration.defaultStateFileURL(environment: environment).path
        let oidc = parsed.flags.contains("oidc")
        let github = parsed.flags.contains("github")
        self.init(
            port: port, appID: appID, scenarios: scenarios, stateFile: oidc || github ? nil : stateFile,
            logsRequests: parsed.flags.contains("log"), oidc: oidc)
        self.github = github
    }

    /// The emulator's configuration.
    package func configuration(io: CommandIO) -> EmulatorConfiguration {
        var configuration = EmulatorConfiguration()
        configuration.port = port
        if let appID { configuration.apps = [.sesameDefault(id: appID)] }
        configuration.scenarios = scenarios
        configuration.stateFileURL = stateFile.map { URL(fileURLWithPath: $0) }
        if logsRequests { configuration.requestLog = { io.writeError("\($0)\n") } }
        return configuration
    }

    /// Runs the emulator until SIGINT or SIGTERM.
    package func run(io: CommandIO, signals: [Int32] = [SIGINT, SIGTERM]) async -> Int32 {
        if oidc { return await runOIDC(io: io, signals: signals) }
        if github { return await runGitHub(io: io, signals: signals) }
        let configuration = configuration(io: io)
        if let stateFile, let problem = Self.unwritable(stateFile) {
            io.writeError(
                "sesame emulator: its state cannot be kept in \(stateFile): \(problem). Give another file with "
                    + "--state-file, or set XDG_STATE_HOME to a writable directory.\n")
            return ExitStatus.cannotCreate
        }
        let emulator: Emulator
        do { emulator = try Emulator(configuration: configuration) } catch {
            io.writeError("sesame emulator: \(error)\n")
            return ExitStatus.failure
        }
        let app = configuration.defaultApp
        let scenarios = scenarios
        let stateFile = stateFile
        do {
            let signal = try await emulator.serve(untilSignals: signals) { endpoints in
                var text =
                    "Sesame emulator (a local Facebook, not the real one) on \(endpoints.baseURL.absoluteString)\n"
                text += endpoints.description.split(separator: "\n").map { "  \($0)\n" }.joined()
                text += "  App id:       \(app.id) (its secret and client token: GET /__sesame/apps)\n"
                if !scenarios.isEmpty {
                    text += "  Scenarios:    \(scenarios.map(\.scenario.rawValue).joined(separator: ", "))\n"
                }
                text += "  State:        \(stateFile ?? "in memory only")\n"
                text += "Press Ctrl-C to stop.\n"
                io.write(text)
            }
            return Self.stopped(by: signal, io: io, stateFile: stateFile)
        } catch {
            io.writeError("sesame emulator: \(error)\n")
            return ExitStatus.failure
        }
    }
}

extension EmulatorCommand {
    /// Runs the OpenID emulator until one of `signals`.
    func runOIDC(io: CommandIO, signals: [Int32]) async -> Int32 {
        let waiter = SignalWaiter(signals)
        defer { waiter.cancel() }
        do {
            // Two seconds between device polls: a person trying it by hand should not wait five.
            let emulator = try OIDCEmulator(devicePollInterval: 2)
            let endpoints = try await emulator.start(port: port)
            io.write(
                """
                Sesame OIDC emulator (a local OpenID provider, not a real one) on \(endpoints.issuer)
                  Issuer:       \(endpoints.issuer)
                  Discovery:    \(endpoints.issuer)/.well-known/openid-configuration
                  Client id:    \(OIDCEmulator.defaultClientID) (public: PKCE, no secret)
                  People:       Alice Example (248289761001), Bob Example (248289761002)
                  Admin API:    \(endpoints.adminURL.absoluteString) (POST /device {"user_code": "..."} approves)
                  State:        in memory only
                Try: sesame login oidc --issuer \(endpoints.issuer) --client-id \(OIDCEmulator.defaultClientID)
                Press Ctrl-C to stop.

                """)
            let signal = await waiter.wait()
            await emulator.stop()
            return Self.stopped(by: signal, io: io, stateFile: nil)
        } catch {
            io.writeError("sesame emulator: \(error)\n")
            return ExitStatus.failure
        }
    }
}

extension EmulatorCommand {
    /// Runs the GitHub emulator until one of `signals`.
    func runGitHub(io: CommandIO, signals: [Int32]) async -> Int32 {
        let waiter = SignalWaiter(signals)
        defer { waiter.cancel() }
        do {
            let emulator = GitHubEmulator(devicePollInterval: 2)
            let endpoints = try await emulator.start(port: port)
            let base = endpoints.baseURL.absoluteString
            io.write(
                """
                Sesame GitHub emulator (a local GitHub, not the real one) on \(base)
                  OAuth:        \(base)/login/device/code, \(base)/login/oauth/access_token
                  API:          \(endpoints.apiURL.absoluteString)
                  Host name:    \(endpoints.hostname)
                  Client id:    \(GitHubEmulator.defaultClientID) (device flow, no secret)
                  Users:        octocat (583231), hubot (480938)
                  Admin API:    \(endpoints.adminURL.absoluteString) (POST /device {"user_code": "..."} approves,
                                POST /tokens {"user": "octocat"} issues a personal access token)
                  Scenarios:    \(GitHubScenario.allCases.map(\.rawValue).joined(separator: ", "))
                  State:        in memory only
                Press Ctrl-C to stop.

                """)
            let signal = await waiter.wait()
            await emulator.stop()
            return Self.stopped(by: signal, io: io, stateFile: nil)
        } catch {
            io.writeError("sesame emulator: \(error)\n")
            return ExitStatus.failure
        }
    }
}

/// `text` broken at spaces into lines of at most `width` characters.
private func wrapped(_ text: String, width: Int = 80) -> String {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ") {
        if !line.isEmpty, line.count + 1 + word.count > width {
            lines.append(line)
            line = ""
        }
        line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    return lines.joined(separator: "\n")
}

extension EmulatorCommand {
    /// Says which signal stopped the emulator; a state file that was not written is a failure.
    static func stopped(by signal: Int32, io: CommandIO, stateFile: String?) -> Int32 {
        io.write("Stopped (\(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)")).\n")
        if let stateFile, !FileManager.default.fileExists(atPath: stateFile) {
            io.writeError("sesame emulator: its state could not be saved to \(stateFile); the changes are lost.\n")
            return ExitStatus.cannotCreate
        }
        return ExitStatus.success
    }

    /// Why `stateFile` cannot be written, or `nil` when its directory takes a new file.
    static func unwritable(_ stateFile: String) -> String? {
        let directory = URL(fileURLWithPath: stateFile).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return "its directory \(directory.path) cannot be created"
        }
        let probe = directory.appendingPathComponent(".sesame-write-check-\(getpid())").path
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            return "its directory \(directory.path) is not writable (\(String(cString: strerror(errno))))"
        }
        close(descriptor)
        unlink(probe)
        return nil
    }
}

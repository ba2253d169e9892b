import Foundation
import Sesame
import SesameDesktop
import SesameEmulator
import SesameGitHubEmulator

#if canImport(Glibc)
    import Glibc
#endif

/// Sesame's GitHub emulator as a program registers it
/// (`Desktop.bootstrap(..., emulators: [GitHubEmulatorPlugin()])`): the built-in one for logins
/// when nothing is configured, and `sesame emulator github`.
public struct GitHubEmulatorPlugin: EmulatorPlugin {
    /// Creates the registration.
    public init() {}

    public var provider: String { "github" }

    /// Sesame's GitHub emulator, started in-process when the program allows it and nothing is
    /// configured (no client id, no host), with the tokens it issued kept in
    /// `$XDG_STATE_HOME/sesame/github-emulator.json`. A command that does not log in gets one that
    /// starts on its first request.
    public var builtIn: BuiltInEmulator? {
        BuiltInEmulator(
            start: { try await GitHubEmulatorHooks.github(environment: $0) },
            prepare: { try GitHubEmulatorHooks.preparedGitHub(environment: $0) })
    }
}

enum GitHubEmulatorHooks {
    /// The GitHub emulator, in-process, with the tokens it issued kept in
    /// `$XDG_STATE_HOME/sesame/github-emulator.json` (0600) between runs. Scenarios come from
    /// `SESAME_GITHUB_EMULATOR_SCENARIO` (`name[,count=N][,seconds=N][,scope=S]`, several separated
    /// by `;`).
    static func github(environment: [String: String]) async throws -> RunningEmulator {
        let stateFile = githubStateFile(environment: environment)
        let scenarios = try githubScenarios(environment["SESAME_GITHUB_EMULATOR_SCENARIO"] ?? "")
        // Held until it stops, as the Facebook emulator's: another command's emulator then reads
        // what this one saved.
        // An emulator in memory (for logins in memory) keeps no file and needs no hold.
        let keepsState = environment[BuiltInEmulators.inMemoryVariable] == nil
        let hold =
            keepsState
            ? try await EmulatorStateHold.take(
                stateFile: stateFile, name: "the built-in GitHub emulator",
                terminal: .current(environment: environment)) : nil
        // A demo should not make people wait GitHub's five seconds between device polls.
        let emulator = GitHubEmulator(devicePollInterval: 2)
        if keepsState, let data = FileManager.default.contents(atPath: stateFile.path) {
            do {
                try emulator.restoreState(from: data)
            } catch let error as EmulatorError {
                hold?.release()
                throw DesktopError(
                    "\(stateFile.path): \(error.message) Remove the file to start the GitHub emulator afresh.",
                    status: .config)
            }
        }
        for scenario in scenarios { await emulator.activate(scenario) }
        let endpoints: GitHubEmulatorEndpoints
        do {
            endpoints = try await emulator.start()
        } catch {
            hold?.release()
            throw DesktopError("The built-in GitHub emulator could not start: \(error.sentence)", status: .unavailable)
        }
        return RunningEmulator(
            endpoints: ["base": endpoints.baseURL, "api": endpoints.apiURL], appID: GitHubEmulator.defaultClientID,
            clientCredential: nil, stateFile: stateFile, personName: "octocat",
            approveDevice: { code in try await emulator.approveDevice(userCode: code) },
            approveDialog: { _ in
                throw DesktopError("The GitHub emulator has no browser login.", status: .usage)
            },
            stop: {
                await emulator.stop()
                defer { hold?.release() }
                guard keepsState else { return }
                // Tokens another run saved meanwhile are kept too.
                if let data = FileManager.default.contents(atPath: stateFile.path) {
                    try? emulator.restoreState(from: data)
                } else if !emulator.hasIssuedTokens {
                    return  // nothing to keep: no file for a run that issued nothing
                }
                try EmulatorStateHold.save(emulator.stateData(), to: stateFile, name: "the built-in GitHub emulator")
            })
    }

    /// The built-in GitHub emulator, described but not started: its client id and host name are
    /// fixed, and it starts (reading its state, binding a port) on the first request sent through
    /// ``RunningEmulator/route`` or the first device approval. Its scenarios are checked now, so
    /// that a mistyped one is reported by any command.
    static func preparedGitHub(environment: [String: String]) throws -> RunningEmulator {
        _ = try githubScenarios(environment["SESAME_GITHUB_EMULATOR_SCENARIO"] ?? "")
        let emulator = LazyEmulator { try await github(environment: environment) }
        let placeholder = LazyEmulator.placeholderOrigin
        return RunningEmulator(
            endpoints: ["base": placeholder, "api": placeholder.appendingPathComponent("api/v3")],
            appID: GitHubEmulator.defaultClientID, clientCredential: nil,
            stateFile: githubStateFile(environment: environment),
            personName: "octocat",
            approveDevice: { code in try await emulator.running().approveDevice(code) },
            approveDialog: { _ in throw DesktopError("The GitHub emulator has no browser login.", status: .usage) },
            stop: { try await emulator.stopIfStarted() },
            route: { transport in LazyEmulatorTransport(emulator: emulator, transport: transport) })
    }

    /// Where the GitHub emulator keeps the tokens it issued between runs.
    static func githubStateFile(environment: [String: String]) -> URL {
        XDG.stateFile("github-emulator.json", environment: environment)
    }

    /// `name[,count=N][,seconds=N][,scope=S]`, several separated by `;`.
    static func githubScenarios(_ text: String) throws -> [GitHubScenarioSetting] {
        try text.split(separator: ";").map { item in
            let parts = item.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = parts.first, let scenario = GitHubScenario(rawValue: name) else {
                throw DesktopError(
                    "SESAME_GITHUB_EMULATOR_SCENARIO: '\(String(item).sanitizedForTerminal)' is not a GitHub scenario; "
                        + "use one of \(GitHubScenario.allCases.map(\.rawValue).joined(separator: ", ")).",
                    status: .config)
            }
            var setting = GitHubScenarioSetting(scenario)
            for part in parts.dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
                switch (pair.first, pair.count == 2 ? pair[1] : nil) {
                case ("count", let value?) where Int(value).map({ $0 > 0 }) == true: setting.count = Int(value)
                case ("seconds", let value?) where Int(value).map({ $0 >= 0 }) == true: setting.seconds = Int(value)
                case ("scope", let value?) where !value.isEmpty: setting.scope = value
                default:
                    throw DesktopError(
                        "SESAME_GITHUB_EMULATOR_SCENARIO: '\(part.sanitizedForTerminal)' is not count=N, seconds=N or "
                            + "scope=NAME.", status: .config)
                }
            }
            return setting
        }
    }
}

extension GitHubEmulatorPlugin {
    /// `sesame emulator github`: a local GitHub in the foreground.
    public var foreground: (any ForegroundEmulator)? { GitHubForegroundEmulator() }
}

/// The GitHub emulator as `sesame emulator github` runs it.
struct GitHubForegroundEmulator: ForegroundEmulator {
    var summary: String {
        "a local GitHub: device flow with its HTTP-200 errors, /api/v3/user and /user/repos paged with Link, "
            + "rate-limit headers, scenarios."
    }

    var discussion: String {
        """
        It keeps its state in memory only and is laid out as a GitHub Enterprise Server at
        http://127.0.0.1:PORT. Scenarios: \(GitHubScenario.allCases.map(\.rawValue).joined(separator: ", ")).
        """
    }

    var examples: [(command: String, comment: String)] {
        [("\(Desktop.programName) emulator github --port 8766", "A local GitHub at http://127.0.0.1:8766")]
    }

    func serve(_ request: EmulatorServeRequest) async throws -> Int32 {
        let waiter = SignalWaiter(request.signals)
        defer { waiter.cancel() }
        let emulator = GitHubEmulator(devicePollInterval: 2)
        let endpoints = try await emulator.start(port: request.port)
        let base = endpoints.baseURL.absoluteString
        request.write(
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
            Try: SESAME_GITHUB_URL=\(base) \(Desktop.programName) login github --client-id \(GitHubEmulator.defaultClientID)
            Press Ctrl-C to stop.

            """)
        let signal = await waiter.wait()
        await emulator.stop()
        return signal
    }
}

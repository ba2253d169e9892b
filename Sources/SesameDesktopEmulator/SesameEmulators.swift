import Foundation
import Sesame
import SesameDesktop
import SesameEmulator

extension BuiltInEmulators {
    /// Sesame's own emulators, started in-process on a free loopback port with their state under
    /// `$XDG_STATE_HOME/sesame/`: what the `sesame` command and the examples use when no app is
    /// configured. Scenarios come from `SESAME_EMULATOR_SCENARIO` (`name[,key=value...]`, several
    /// separated by `;`).
    ///
    /// A command that does not log in gets an emulator that starts on its first request
    /// (``BuiltInEmulators/prepare``): `sesame token` reads the store and never starts it.
    public static let sesame = BuiltInEmulators(
        start: { provider, environment in
            switch provider {
            case "facebook": try await SesameEmulators.facebook(environment: environment)
            case "github": try await SesameEmulators.github(environment: environment)
            default: nil
            }
        },
        prepare: { provider, environment in
            switch provider {
            case "facebook": try SesameEmulators.preparedFacebook(environment: environment)
            case "github": try SesameEmulators.preparedGitHub(environment: environment)
            default: nil
            }
        })
}

enum SesameEmulators {
    /// The built-in Facebook emulator's configuration, from the environment; reads no file.
    static func facebookConfiguration(environment: [String: String]) throws -> EmulatorConfiguration {
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = XDG.stateFile("emulator.json", environment: environment)
        // A demo should not make people wait Facebook's five seconds between device polls.
        configuration.devicePollInterval = 2
        do {
            configuration.scenarios = try (environment["SESAME_EMULATOR_SCENARIO"] ?? "")
                .split(separator: ";").map { try ScenarioSetting(argument: String($0)) }
        } catch let error as EmulatorError {
            throw DesktopError("SESAME_EMULATOR_SCENARIO: \(error.message)", status: .config)
        }
        return configuration
    }

    /// The built-in Facebook emulator, described but not started: its app is known from its
    /// configuration, and it starts (reading its state, binding a port) on the first request sent
    /// through ``RunningEmulator/route`` or the first approval.
    static func preparedFacebook(environment: [String: String]) throws -> RunningEmulator {
        let configuration = try facebookConfiguration(environment: environment)
        let app = configuration.defaultApp
        let emulator = LazyEmulator { try await facebook(environment: environment) }
        let placeholder = LazyEmulator.placeholderOrigin
        return RunningEmulator(
            endpoints: ["base": placeholder, "graph": placeholder], appID: app.id, clientCredential: app.clientToken,
            stateFile: configuration.stateFileURL ?? placeholder,
            personName: configuration.users.first?.name ?? "the emulator's person",
            approveDevice: { code in try await emulator.running().approveDevice(code) },
            approveDialog: { url in
                let running = try await emulator.running()
                return try await running.approveDialog(LazyEmulator.resolve(url, in: running))
            },
            stop: { try await emulator.stopIfStarted() },
            route: { transport in LazyEmulatorTransport(emulator: emulator, transport: transport) })
    }

    static func facebook(environment: [String: String]) async throws -> RunningEmulator {
        let configuration = try facebookConfiguration(environment: environment)
        let stateFile = XDG.stateFile("emulator.json", environment: environment)
        do {
            try FileManager.default.createDirectory(
                at: stateFile.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            guard FileManager.default.isWritableFile(atPath: stateFile.deletingLastPathComponent().path) else {
                throw CocoaError(.fileWriteNoPermission)
            }
        } catch {
            throw DesktopError(
                "The built-in Facebook emulator cannot keep its state: \(stateFile.deletingLastPathComponent().path) "
                    + "is not a writable directory. Make it writable, or set XDG_STATE_HOME to one that is.",
                status: .cannotCreate)
        }
        let emulator: Emulator
        let endpoints: EmulatorEndpoints
        do {
            emulator = try Emulator(configuration: configuration)
            endpoints = try await emulator.start()
        } catch let error as EmulatorError {
            throw DesktopError("The built-in Facebook emulator could not start: \(error.message)", status: .unavailable)
        }
        let app = emulator.configuration.defaultApp
        return RunningEmulator(
            endpoints: ["base": endpoints.baseURL, "graph": endpoints.graphURL], appID: app.id,
            clientCredential: app.clientToken, stateFile: stateFile,
            personName: emulator.configuration.users.first?.name ?? "the emulator's person",
            approveDevice: { code in try await emulator.approveDevice(userCode: code) },
            approveDialog: { url in try await emulator.approveDialog(url: url) },
            stop: { await emulator.stop() })
    }
}

/// An emulator that starts on first use, once, however many callers ask at the same time.
actor LazyEmulator {
    /// The origin a prepared emulator's endpoints use until it runs; `.invalid` never resolves
    /// (RFC 6761), so nothing sent there by mistake leaves the machine.
    static let placeholderOrigin = URL(string: "http://sesame-emulator.invalid")!

    private let start: @Sendable () async throws -> RunningEmulator
    private var starting: Task<RunningEmulator, any Error>?

    init(start: @escaping @Sendable () async throws -> RunningEmulator) { self.start = start }

    /// The running emulator, started by the first caller.
    func running() async throws -> RunningEmulator {
        if let starting { return try await starting.value }
        let task = Task { try await start() }
        starting = task
        return try await task.value
    }

    /// Stops it if it was started; nothing otherwise.
    func stopIfStarted() async throws {
        guard let starting else { return }
        self.starting = nil
        guard let emulator = try? await starting.value else { return }
        try await emulator.stop()
    }

    /// `url` with the placeholder origin replaced by the running emulator's; other URLs as they are.
    static func resolve(_ url: URL, in running: RunningEmulator) -> URL {
        guard url.host == placeholderOrigin.host, let base = running.endpoints["base"],
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        components.scheme = base.scheme
        components.host = base.host
        components.port = base.port
        return components.url ?? url
    }
}

/// Sends requests for a prepared emulator's placeholder origin to the emulator, starting it first.
struct LazyEmulatorTransport: HTTPTransport {
    let emulator: LazyEmulator
    let transport: any HTTPTransport

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.url.host == LazyEmulator.placeholderOrigin.host else { return try await transport.send(request) }
        var request = request
        request.url = LazyEmulator.resolve(request.url, in: try await emulator.running())
        return try await transport.send(request)
    }
}

extension SesameEmulators {
    /// The GitHub emulator, in-process, with the tokens it issued kept in
    /// `$XDG_STATE_HOME/sesame/github-emulator.json` (0600) between runs. Scenarios come from
    /// `SESAME_GITHUB_EMULATOR_SCENARIO` (`name[,count=N][,seconds=N][,scope=S]`, several separated
    /// by `;`).
    static func github(environment: [String: String]) async throws -> RunningEmulator {
        let stateFile = githubStateFile(environment: environment)
        let scenarios = try githubScenarios(environment["SESAME_GITHUB_EMULATOR_SCENARIO"] ?? "")
        // A demo should not make people wait GitHub's five seconds between device polls.
        let emulator = GitHubEmulator(devicePollInterval: 2)
        if let data = FileManager.default.contents(atPath: stateFile.path) {
            do {
                try emulator.restoreState(from: data)
            } catch let error as EmulatorError {
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
            throw DesktopError("The built-in GitHub emulator could not start: \(error)", status: .unavailable)
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
                // Tokens another run saved meanwhile are kept too.
                if let data = FileManager.default.contents(atPath: stateFile.path) {
                    try? emulator.restoreState(from: data)
                } else if !emulator.hasIssuedTokens {
                    return  // nothing to keep: no file for a run that issued nothing
                }
                try save(emulator.stateData(), to: stateFile)
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

    /// Writes `data` to `url` with mode 0600, replacing the file at once.
    static func save(_ data: Data, to url: URL) throws {
        let directory = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
            guard
                FileManager.default.createFile(
                    atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteNoPermission) }
            guard rename(temporary.path, url.path) == 0 else {
                try? FileManager.default.removeItem(at: temporary)
                throw CocoaError(.fileWriteUnknown)
            }
        } catch {
            throw DesktopError(
                "The built-in GitHub emulator's tokens could not be kept in \(url.path): make \(directory.path) "
                    + "writable, or set XDG_STATE_HOME to a directory that is.", status: .cannotCreate)
        }
    }
}

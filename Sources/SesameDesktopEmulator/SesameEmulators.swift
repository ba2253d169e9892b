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
            default: nil
            }
        },
        prepare: { provider, environment in
            switch provider {
            case "facebook": try SesameEmulators.preparedFacebook(environment: environment)
            default: nil
            }
        })
}

enum SesameEmulators {
    /// The built-in Facebook emulator's configuration, from the environment; reads no file.
    static func facebookConfiguration(environment: [String: String]) throws -> EmulatorConfiguration {
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = XDG.stateDirectory(environment: environment).appendingPathComponent(
            "emulator.json")
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
        let stateFile = XDG.stateDirectory(environment: environment).appendingPathComponent("emulator.json")
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

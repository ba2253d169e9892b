import Foundation
import Sesame
import SesameDesktop
import SesameEmulator
import SesameFacebookEmulator

/// Sesame's Facebook emulator as a program registers it
/// (`Desktop.bootstrap(..., emulators: [FacebookEmulatorPlugin()])`, or
/// `Desktop.facebook(emulators: BuiltInEmulators([FacebookEmulatorPlugin()]))`): the built-in one
/// for logins when no app is configured, and `sesame emulator facebook`.
public struct FacebookEmulatorPlugin: EmulatorPlugin {
    /// Creates the registration.
    public init() {}

    public var provider: String { "facebook" }

    /// Sesame's Facebook emulator, started in-process on a free loopback port with its state in
    /// `$XDG_STATE_HOME/sesame/emulator.json`, when the program allows it and no app is
    /// configured. Scenarios come from `SESAME_EMULATOR_SCENARIO` (`name[,key=value...]`, several
    /// separated by `;`). A command that does not log in gets one that starts on its first
    /// request: `sesame token` reads the store and never starts it.
    public var builtIn: BuiltInEmulator? {
        BuiltInEmulator(
            start: { try await FacebookEmulatorHooks.facebook(environment: $0) },
            prepare: { try FacebookEmulatorHooks.preparedFacebook(environment: $0) })
    }
}

enum FacebookEmulatorHooks {
    /// The built-in Facebook emulator's configuration, from the environment; reads no file.
    static func facebookConfiguration(environment: [String: String]) throws -> EmulatorConfiguration {
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL =
            environment[BuiltInEmulators.inMemoryVariable] == nil
            ? XDG.stateFile("emulator.json", environment: environment) : nil
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
        // Held until it stops: another command's emulator reads the state this one saves. An
        // emulator in memory (for logins in memory) keeps no file and needs no hold.
        var hold: EmulatorStateHold?
        if configuration.stateFileURL != nil {
            do {
                try PrivateFiles.makeDirectories(stateFile.deletingLastPathComponent().path)
                guard FileManager.default.isWritableFile(atPath: stateFile.deletingLastPathComponent().path) else {
                    throw CocoaError(.fileWriteNoPermission)
                }
            } catch {
                throw DesktopError(
                    "The built-in Facebook emulator cannot keep its state: "
                        + "\(stateFile.deletingLastPathComponent().path) is not a writable directory. Make it "
                        + "writable, or set XDG_STATE_HOME to one that is.", status: .cannotCreate)
            }
            hold = try await EmulatorStateHold.take(
                stateFile: stateFile, name: "the built-in Facebook emulator",
                terminal: .current(environment: environment))
        }
        let held = hold
        let emulator: Emulator
        let endpoints: EmulatorEndpoints
        do {
            emulator = try Emulator(configuration: configuration)
            endpoints = try await emulator.start()
        } catch let error as EmulatorError {
            held?.release()
            throw DesktopError("The built-in Facebook emulator could not start: \(error.message)", status: .unavailable)
        } catch {
            held?.release()
            throw error
        }
        let app = emulator.configuration.defaultApp
        return RunningEmulator(
            endpoints: ["base": endpoints.baseURL, "graph": endpoints.graphURL], appID: app.id,
            clientCredential: app.clientToken, stateFile: stateFile,
            personName: emulator.configuration.users.first?.name ?? "the emulator's person",
            approveDevice: { code in try await emulator.approveDevice(userCode: code) },
            approveDialog: { url in try await emulator.approveDialog(url: url) },
            stop: {
                await emulator.stop()
                held?.release()
            })
    }
}

extension FacebookEmulatorPlugin {
    /// `sesame emulator facebook`: the local Facebook in the foreground.
    public var foreground: (any ForegroundEmulator)? { FacebookForegroundEmulator() }
}

/// The Facebook emulator as `sesame emulator facebook` runs it.
struct FacebookForegroundEmulator: ForegroundEmulator {
    var summary: String { "a local Facebook: login dialog, Graph API, device login, test users, scenarios." }

    var discussion: String {
        """
        People, tokens, grants and posts are kept in $XDG_STATE_HOME/sesame/emulator.json, so a token
        from one run still works in the next; --in-memory forgets them at exit. The admin API under
        /__sesame/ sets scenarios, approves logins without a browser and moves time. Scenarios:
        \(EmulatorScenario.allCases.map(\.rawValue).joined(separator: ", ")); options after the name:
        user=ID, count=N, delayMs=N, permission=NAME, regainAccessMinutes=N.
        """
    }

    var options: [EmulatorOption] {
        [
            EmulatorOption("app-id", value: "ID", "Serve this app id (digits) instead of the default one."),
            EmulatorOption(
                "scenario", value: "NAME", repeatable: true,
                "Activate a scenario from the start, such as transient,count=2. Repeatable."),
            EmulatorOption("state-file", value: "PATH", "Keep the state in this file instead of the default one."),
            EmulatorOption("in-memory", "Keep the state in memory only."),
            EmulatorOption("log", "Print a line per request (method, path, status; never the query) on stderr."),
        ]
    }

    var examples: [(command: String, comment: String)] {
        [
            ("\(Desktop.programName) emulator", "A local Facebook on a free port"),
            (
                "\(Desktop.programName) emulator facebook --port 8765 --scenario app-throttled,count=3 --scenario slow,delayMs=200",
                "Throttle the next three calls, and answer everything slowly"
            ),
        ]
    }

    func serve(_ request: EmulatorServeRequest) async throws -> Int32 {
        var configuration = EmulatorConfiguration()
        configuration.port = request.port
        if let appID = request.value("app-id") {
            guard !appID.isEmpty, appID.count <= 20, appID.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw DesktopError(
                    "--app-id must be a Facebook app id: 1 to 20 digits; '\(appID.sanitizedForTerminal)' is not one.",
                    status: .usage)
            }
            configuration.apps = [.sesameDefault(id: appID)]
        }
        for text in request.options["scenario"] ?? [] {
            do {
                configuration.scenarios.append(try ScenarioSetting(argument: text))
            } catch {
                throw DesktopError("--scenario \(text.sanitizedForTerminal): \(error)", status: .usage)
            }
        }
        if request.flag("in-memory"), request.value("state-file") != nil {
            throw DesktopError("--state-file and --in-memory contradict each other; give one of them.", status: .usage)
        }
        let stateFile =
            request.flag("in-memory")
            ? nil
            : request.value("state-file")
                ?? EmulatorConfiguration.defaultStateFileURL(environment: request.environment).path
        if let stateFile, let problem = EmulatorStateFile.unwritable(stateFile) {
            throw DesktopError(
                "its state cannot be kept in \(stateFile): \(problem). Give another file with --state-file, or set "
                    + "XDG_STATE_HOME to a writable directory.", status: .cannotCreate)
        }
        configuration.stateFileURL = stateFile.map { URL(fileURLWithPath: $0) }
        if request.flag("log") {
            let writeError = request.writeError
            configuration.requestLog = { writeError("\($0)\n") }
        }
        let emulator = try Emulator(configuration: configuration)
        let app = configuration.defaultApp
        let scenarios = configuration.scenarios
        let write = request.write
        let signal = try await emulator.serve(untilSignals: request.signals) { endpoints in
            var text = "Sesame emulator (a local Facebook, not the real one) on \(endpoints.baseURL.absoluteString)\n"
            text += endpoints.description.split(separator: "\n").map { "  \($0)\n" }.joined()
            text += "  App id:       \(app.id) (its secret and client token: GET /__sesame/apps)\n"
            if !scenarios.isEmpty {
                text += "  Scenarios:    \(scenarios.map(\.scenario.rawValue).joined(separator: ", "))\n"
            }
            text += "  State:        \(stateFile ?? "in memory only")\n"
            text += "Try: \(Desktop.programName) login facebook "
            text += "(with no app id configured it uses the built-in emulator; "
            text += "point a real-app setup here with SESAME_FACEBOOK_GRAPH_URL and SESAME_FACEBOOK_DIALOG_URL)\n"
            text += "Press Ctrl-C to stop.\n"
            write(text)
        }
        if let stateFile, !FileManager.default.fileExists(atPath: stateFile) {
            throw DesktopError(
                "its state could not be saved to \(stateFile); the changes are lost.", status: .cannotCreate)
        }
        return signal
    }
}

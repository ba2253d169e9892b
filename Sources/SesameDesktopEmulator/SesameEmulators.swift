import Foundation
import Sesame
import SesameDesktop
import SesameEmulator

extension BuiltInEmulators {
    /// Sesame's own emulators, started in-process on a free loopback port with their state under
    /// `$XDG_STATE_HOME/sesame/`: what the `sesame` command and the examples use when no app is
    /// configured. Scenarios come from `SESAME_EMULATOR_SCENARIO` (`name[,key=value...]`, several
    /// separated by `;`).
    public static let sesame = BuiltInEmulators { provider, environment in
        switch provider {
        case "facebook": try await SesameEmulators.facebook(environment: environment)
        default: nil
        }
    }
}

enum SesameEmulators {
    static func facebook(environment: [String: String]) async throws -> RunningEmulator {
        var configuration = EmulatorConfiguration()
        let stateFile = XDG.stateDirectory(environment: environment).appendingPathComponent("emulator.json")
        configuration.stateFileURL = stateFile
        // A demo should not make people wait Facebook's five seconds between device polls.
        configuration.devicePollInterval = 2
        do {
            configuration.scenarios = try (environment["SESAME_EMULATOR_SCENARIO"] ?? "")
                .split(separator: ";").map { try ScenarioSetting(argument: String($0)) }
        } catch let error as EmulatorError {
            throw DesktopError("SESAME_EMULATOR_SCENARIO: \(error.message)", status: .config)
        }
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

import AcmeEmulator
import Foundation
import Sesame
import SesameDesktop
import SesameEmulator

#if canImport(Glibc)
    import Glibc
#endif

enum AcmeEmulatorHooks {
    /// Where the built-in emulator keeps the tokens it issued.
    static func stateFile(environment: [String: String]) -> URL {
        XDG.stateFile("acme-emulator.json", environment: environment)
    }

    /// The emulator, started now, with the state earlier runs saved.
    static func start(environment: [String: String]) async throws -> RunningEmulator {
        let file = stateFile(environment: environment)
        // A demo should not make people wait five seconds between device polls.
        let emulator = AcmeEmulator(devicePollInterval: 1)
        if let data = FileManager.default.contents(atPath: file.path) {
            do {
                try emulator.restoreState(from: data)
            } catch {
                throw DesktopError(
                    "\(file.path): \(error) Remove the file to start the Acme emulator afresh.", status: .config)
            }
        }
        let base: URL
        do {
            base = try emulator.start()
        } catch {
            throw DesktopError("The built-in Acme emulator could not start: \(error)", status: .unavailable)
        }
        return RunningEmulator(
            endpoints: ["base": base], appID: AcmeEmulator.defaultClientID, clientCredential: nil, stateFile: file,
            personName: AcmeEmulator.users[0].name,
            approveDevice: { code in try emulator.approveDevice(userCode: code) },
            approveDialog: { dialog in try emulator.approveAuthorization(dialog) },
            stop: {
                await emulator.stop()
                // Tokens another run saved meanwhile are kept too.
                if let data = FileManager.default.contents(atPath: file.path) {
                    try? emulator.restoreState(from: data)
                } else if !emulator.hasIssuedTokens {
                    return  // nothing to keep: no file for a run that issued nothing
                }
                try EmulatorStateHold.save(emulator.stateData(), to: file, name: "the built-in Acme emulator")
            })
    }

    /// The emulator, described but not started: it starts on the first request sent through
    /// ``RunningEmulator/route`` (or the first approval).
    static func prepared(environment: [String: String]) -> RunningEmulator {
        let emulator = LazyEmulator { try await start(environment: environment) }
        return RunningEmulator(
            endpoints: ["base": LazyEmulator.placeholderOrigin], appID: AcmeEmulator.defaultClientID,
            clientCredential: nil, stateFile: stateFile(environment: environment),
            personName: AcmeEmulator.users[0].name,
            approveDevice: { code in try await emulator.running().approveDevice(code) },
            approveDialog: { dialog in try await emulator.running().approveDialog(dialog) },
            stop: { try await emulator.stopIfStarted() },
            route: { transport in LazyEmulatorTransport(emulator: emulator, transport: transport) })
    }
}

/// The Acme emulator as `sesame emulator acme` runs it: in memory, until a signal.
struct AcmeForegroundEmulator: ForegroundEmulator {
    var summary: String {
        "a local Acme OAuth 2.0 server: consent page with PKCE, device login, refresh tokens rotated on use, /api/me."
    }

    var discussion: String {
        """
        It keeps its state in memory only. Its admin API is under /__acme: POST /__acme/device
        {"user_code": "..."} approves a device login, POST /__acme/clock {"advance": SECONDS} moves
        its clock, GET /__acme/stats counts tokens.
        """
    }

    var examples: [(command: String, comment: String)] {
        [("\(Desktop.programName) emulator acme --port 8767", "A local Acme server at http://127.0.0.1:8767")]
    }

    func serve(_ request: EmulatorServeRequest) async throws -> Int32 {
        let waiter = SignalWaiter(request.signals)
        defer { waiter.cancel() }
        let emulator = AcmeEmulator(devicePollInterval: 2)
        let base: URL
        do {
            base = try emulator.start(port: request.port)
        } catch {
            throw DesktopError("The Acme emulator could not start: \(error)", status: .unavailable)
        }
        let url = base.absoluteString
        request.write(
            """
            Sesame Acme emulator (a local Acme server, not a real one) on \(url)
              OAuth:        \(url)/oauth/authorize, \(url)/oauth/token, \(url)/oauth/device
              API:          \(url)/api/me
              Client id:    \(AcmeEmulator.defaultClientID) (public client, PKCE)
              Users:        \(AcmeEmulator.users.map { "\($0.login) (\($0.id))" }.joined(separator: ", "))
              Admin API:    \(url)/__acme (POST /device {"user_code": "..."} approves a device login)
              State:        in memory only
            Try: SESAME_ACME_URL=\(url) SESAME_ACME_CLIENT_ID=\(AcmeEmulator.defaultClientID) \(Desktop.programName) login acme
            Press Ctrl-C to stop.

            """)
        let signal = await waiter.wait()
        await emulator.stop()
        return signal
    }
}

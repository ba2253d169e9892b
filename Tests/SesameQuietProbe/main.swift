// sesame-quiet-probe: a small library app for the test that the library never writes to the app's
// standard output or error by itself. It prints nothing; its exit status says what went wrong:
//
//   sesame-quiet-probe presenter   a login from explicit values with the app's device presenter,
//                                  then a Graph call, against an emulator it starts (0: done)
//   sesame-quiet-probe built-in    Desktop.facebook with the built-in emulator and no terminal
//                                  (0: done; XDG_STATE_HOME and HOME from the environment)
import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameFacebookEmulator
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin

/// A GUI app's device-login presenter: it approves the code in the emulator, as the person would.
struct ApprovingPresenter: DeviceCodePresenter {
    let emulator: Emulator
    func present(_ authorization: DeviceAuthorization) async {
        try? await emulator.approveDevice(userCode: authorization.userCode)
    }
}

func presenterLogin() async -> Int32 {
    var configuration = EmulatorConfiguration()
    configuration.stateFileURL = nil
    configuration.devicePollInterval = 1
    guard let emulator = try? Emulator(configuration: configuration),
        let endpoints = try? await emulator.start()
    else { return 3 }
    let app = configuration.defaultApp
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-quiet-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: state) }
    let facebook = Desktop.facebook(
        provider: FacebookProvider(
            appID: app.id, clientToken: app.clientToken, dialogBaseURL: endpoints.baseURL,
            graphBaseURL: endpoints.graphURL, allowedInsecureHosts: ["127.0.0.1"]),
        store: InMemoryCredentialStore(), stateDirectory: state)
    let session = facebook.session(loginUI: facebook.deviceLogin(presenter: ApprovingPresenter(emulator: emulator)))
    var status: Int32 = 0
    do {
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
        let name = try await session.graph.get("me", parameters: ["fields": "name"])["name"]?.stringValue
        if name == nil || name != configuration.users.first?.name { status = 5 }
    } catch {
        status = 4
    }
    await facebook.shutdown()
    await emulator.stop()
    return status
}

func builtInEmulator() async -> Int32 {
    do {
        let facebook = try await Desktop.facebook(emulators: BuiltInEmulators([FacebookEmulatorPlugin()]))
        let emulated = facebook.isEmulated
        await facebook.shutdown()
        return emulated ? 0 : 7
    } catch {
        return 6
    }
}

switch CommandLine.arguments.dropFirst().first {
case "presenter": exit(await presenterLogin())
case "built-in": exit(await builtInEmulator())
default: exit(2)
}

// sesame-quiet-probe: a small library app for the test that the library never writes to the app's
// standard output or error by itself. It prints nothing; its exit status says what went wrong:
//
//   sesame-quiet-probe presenter   a login from explicit values with the app's device presenter,
//                                  then a Graph call, against an emulator it starts (0: done)
//   sesame-quiet-probe built-in    Desktop.facebook with the built-in emulator and no terminal
//                                  (0: done; XDG_STATE_HOME and HOME from the environment)
//   sesame-quiet-probe no-presenter  a device login from explicit values with no presenter: it
//                                  must fail at once, saying to supply one (0: so; 9: it waited)
//   sesame-quiet-probe oidc-presenter / github-presenter  as `presenter`, with Desktop.oidc(provider:…)
//                                  and Desktop.github(clientID:…) against their emulators
import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameFacebook
import SesameFacebookEmulator
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin
import SesameGitHub
import SesameGitHubEmulator
import SesameGitHubPlugin
import SesameOIDC
import SesameOIDCEmulator
import SesameOIDCPlugin

/// A GUI app's device-login presenter: it approves the code in the emulator, as the person would.
struct ApprovingPresenter: DeviceCodePresenter {
    let emulator: Emulator
    func present(_ authorization: DeviceAuthorization) async {
        try? await emulator.approveDevice(userCode: authorization.userCode)
    }
}

/// Runs `body` with a Facebook emulator it starts (state in memory) and a `Desktop.facebook` built
/// from explicit values for its app, and stops both afterwards; 3 when the emulator does not start.
func withFacebook(
    _ body: (Emulator, EmulatorConfiguration, DesktopFacebook) async -> Int32
) async -> Int32 {
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
    let status = await body(emulator, configuration, facebook)
    await facebook.shutdown()
    await emulator.stop()
    return status
}

func presenterLogin() async -> Int32 {
    await withFacebook { emulator, configuration, facebook in
        let session = facebook.session(
            loginUI: facebook.deviceLogin(presenter: ApprovingPresenter(emulator: emulator)))
        do {
            try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
            let name = try await session.graph.get("me", parameters: ["fields": "name"])["name"]?.stringValue
            return name == nil || name != configuration.users.first?.name ? 5 : 0
        } catch {
            return 4
        }
    }
}

/// A device login with no presenter of the app's: the session's default login on the silent
/// terminal. It must end at once with the error that says to supply one, never poll until the code
/// expires (seven minutes on the emulator): after 20 s the probe gives up with 9.
func noPresenter() async -> Int32 {
    await withFacebook { _, _, facebook in
        let session = facebook.session()
        return await withTaskGroup(of: Int32.self) { group in
            group.addTask {
                do {
                    try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
                    return 10
                } catch let error as AuthError {
                    return error.loginFailedReason == .noPresenter && error.message.contains("presenter") ? 0 : 8
                } catch {
                    return 8
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return 9
            }
            let first = await group.next() ?? 2
            group.cancelAll()
            return first
        }
    }
}

/// The code approved at an emulator's admin API, as the person would after reading it.
struct AdminApprover: DeviceCodePresenter {
    let approve: @Sendable (String) async throws -> Void
    func present(_ authorization: DeviceAuthorization) async { try? await approve(authorization.userCode) }
}

func oidcPresenterLogin() async -> Int32 {
    guard let emulator = try? OIDCEmulator(devicePollInterval: 1), let endpoints = try? await emulator.start() else {
        return 3
    }
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-quiet-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: state) }
    var status: Int32 = 0
    do {
        let transport = CurlTransport()
        let provider = try await OIDCProvider.discover(
            OIDCConfiguration(issuer: endpoints.issuer, clientID: OIDCEmulator.defaultClientID), transport: transport)
        let oidc = Desktop.oidc(
            provider: provider, store: InMemoryCredentialStore(), stateDirectory: state, transport: transport)
        let login = try oidc.deviceLogin(presenter: AdminApprover { try await emulator.approveDevice(userCode: $0) })
        let session = oidc.session(loginUI: login)
        _ = try await session.open(scopes: ["openid", "profile"], allowLoginUI: true)
        if try await session.userInfo()["sub"]?.stringValue == nil { status = 5 }
    } catch {
        status = 4
    }
    await emulator.stop()
    return status
}

func gitHubPresenterLogin() async -> Int32 {
    let emulator = GitHubEmulator(devicePollInterval: 1)
    guard let endpoints = try? await emulator.start() else { return 3 }
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-quiet-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: state) }
    let github = Desktop.github(
        clientID: GitHubEmulator.defaultClientID,
        host: GitHubHost(hostname: endpoints.hostname, oauthBaseURL: endpoints.baseURL, apiBaseURL: endpoints.apiURL),
        store: InMemoryCredentialStore(), stateDirectory: state)
    let session = github.session(
        loginUI: github.deviceLogin(presenter: AdminApprover { try await emulator.approveDevice(userCode: $0) }))
    var status: Int32 = 0
    do {
        _ = try await session.open(scopes: ["repo"], allowLoginUI: true)
        if try await session.client().user().login.isEmpty { status = 5 }
    } catch {
        status = 4
    }
    await github.shutdown()
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
case "no-presenter": exit(await noPresenter())
case "oidc-presenter": exit(await oidcPresenterLogin())
case "github-presenter": exit(await gitHubPresenterLogin())
default: exit(2)
}

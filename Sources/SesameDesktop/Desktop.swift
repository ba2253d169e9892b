import Foundation
import Sesame
import SesameCurl
import SesameEmulator
import SesameFacebook
import SesameHTTPServer

/// The desktop defaults in one call.
///
/// ```swift
/// let facebook = try await Desktop.facebook()          // flags, environment, config file
/// let session = facebook.session()                      // the active account, device login
/// try await session.openActiveSession(allowLoginUI: true)
/// print(try await session.graph.get("me")["name"] ?? "")
/// await facebook.shutdown()                             // stops the built-in emulator, if any
/// ```
public enum Desktop {
    /// The Facebook defaults: ``DesktopConfiguration`` resolved from `overrides`, the environment
    /// and the config file; `CurlTransport`; the store ``DesktopStorage`` selects; and, with no app
    /// id configured anywhere, the built-in emulator started on a free loopback port with its
    /// state under `$XDG_STATE_HOME/sesame/`, announced in one line on standard error.
    ///
    /// - Parameters:
    ///   - overrides: values from the command line.
    ///   - environment: the environment to read.
    ///   - terminal: the terminal to talk to.
    ///   - keyring: opens the keyring store (default: the Secret Service).
    ///   - announce: whether to print the one line about the built-in emulator.
    /// - Throws: ``DesktopError`` for a bad configuration, a missing keyring (unless the file is
    ///   opted in), or an emulator that cannot start.
    public static func facebook(
        overrides: DesktopConfiguration.Overrides = .init(),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        terminal: Terminal? = nil, keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService,
        announce: Bool = true
    ) async throws -> DesktopFacebook {
        let terminal = terminal ?? .current(environment: environment)
        let configuration = try DesktopConfiguration.resolve(overrides: overrides, environment: environment)
        let storage = try await DesktopStorage.select(configuration.storage, keyring: keyring, environment: environment)
        let transport = CurlTransport()
        var emulator: Emulator?
        let provider: FacebookProvider
        if let appID = configuration.facebookAppID {
            provider = FacebookProvider(
                appID: appID.value,
                graphVersion: configuration.facebookGraphVersion?.value ?? FacebookProvider.defaultGraphVersion,
                clientToken: configuration.facebookClientToken?.value,
                dialogBaseURL: configuration.facebookDialogURL?.value ?? FacebookProvider.facebookDialogBaseURL,
                graphBaseURL: configuration.facebookGraphURL?.value ?? FacebookProvider.facebookGraphBaseURL)
        } else {
            let started = try await startEmulator(environment: environment)
            emulator = started.emulator
            let app = started.emulator.configuration.defaultApp
            provider = FacebookProvider(
                appID: app.id, clientToken: app.clientToken, dialogBaseURL: started.endpoints.baseURL,
                graphBaseURL: started.endpoints.graphURL)
            if announce {
                terminal.say(
                    terminal.dim(
                        "Using Sesame's built-in Facebook emulator at \(started.endpoints.baseURL.absoluteString) "
                            + "(no app id is configured; its state is in \(started.stateFile.path)); set "
                            + "SESAME_FACEBOOK_APP_ID to use a real app.") + "\n")
            }
        }
        return DesktopFacebook(
            configuration: configuration, provider: provider, transport: transport, storage: storage,
            terminal: terminal, emulator: emulator, accounts: AccountState(environment: environment),
            environment: environment)
    }

    /// Starts the built-in emulator: a free loopback port, state in `$XDG_STATE_HOME/sesame/emulator.json`,
    /// scenarios from `SESAME_EMULATOR_SCENARIO` (`name[,key=value...]`, several separated by `;`).
    static func startEmulator(
        environment: [String: String]
    ) async throws -> (emulator: Emulator, endpoints: EmulatorEndpoints, stateFile: URL) {
        var configuration = EmulatorConfiguration()
        let stateFile = XDG.stateDirectory(environment: environment).appendingPathComponent("emulator.json")
        configuration.stateFileURL = stateFile
        // A demo should not make people wait Facebook's five seconds between device polls.
        configuration.devicePollInterval = 2
        do {
            configuration.scenarios = try (environment["SESAME_EMULATOR_SCENARIO"] ?? "")
                .split(separator: ";").map { try ScenarioSetting(argument: String($0)) }
            try FileManager.default.createDirectory(
                at: stateFile.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            let emulator = try Emulator(configuration: configuration)
            return (emulator, try await emulator.start(), stateFile)
        } catch let error as EmulatorError {
            throw DesktopError(
                "The built-in Facebook emulator could not start: \(error.message)", status: .unavailable)
        } catch {
            throw DesktopError(
                "The built-in Facebook emulator could not start: \(error). Check that \(stateFile.path) can be written.",
                status: .cannotCreate)
        }
    }
}

/// A Facebook app with the desktop defaults: what ``Desktop/facebook(overrides:environment:terminal:keyring:announce:)``
/// returns.
public struct DesktopFacebook: Sendable {
    /// The resolved configuration.
    public let configuration: DesktopConfiguration
    /// The app (the built-in emulator's default app when none is configured).
    public let provider: FacebookProvider
    /// The HTTP transport (`CurlTransport`).
    public let transport: any HTTPTransport
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The terminal.
    public let terminal: Terminal
    /// The built-in emulator, when no app is configured.
    public let emulator: Emulator?
    /// The active account and the last usage seen.
    public let accounts: AccountState
    /// The environment the configuration came from.
    public let environment: [String: String]

    /// Whether this runs against the built-in emulator.
    public var isEmulated: Bool { emulator != nil }

    /// The account to use: `account` when given, else the active one.
    public func account(_ account: String? = nil) -> String {
        account ?? accounts.activeAccount(for: .facebook)
    }

    /// The built-in emulator's approval step (`SESAME_EMULATOR_APPROVE=auto|prompt|off`; by
    /// default a prompt on a terminal, nothing otherwise); `nil` for a real app.
    public var emulatorApproval: EmulatorApproval? {
        guard let emulator else { return nil }
        let mode =
            environment["SESAME_EMULATOR_APPROVE"].flatMap(EmulatorApproval.Mode.init(rawValue:))
            ?? (terminal.inputIsInteractive ? .prompt : .off)
        return EmulatorApproval(emulator: emulator, mode: mode, terminal: terminal, transport: transport)
    }

    /// Facebook Login for Devices with the code, a spinner and (for the emulator) its approval step
    /// on the terminal.
    public func deviceLogin() -> DeviceLoginFlow {
        FacebookSession.deviceLogin(
            provider: provider, transport: transport,
            presenter: TerminalLoginPresenter(
                terminal: terminal, providerName: isEmulated ? "the Facebook emulator" : "Facebook",
                emulatorApproval: emulatorApproval))
    }

    /// Browser login: the loopback receiver, PKCE, and the system browser (or only the printed
    /// address with `openBrowser` false).
    public func browserLogin(openBrowser: Bool = true) -> BrowserLoginFlow {
        let system = SystemBrowserOpener(mode: openBrowser ? .automatic : .printOnly, environment: environment)
        return FacebookSession.browserLogin(
            provider: provider, transport: transport,
            receiver: LoopbackRedirectReceiver(appName: isEmulated ? "Sesame (emulator)" : "Sesame"),
            opener: DesktopBrowserOpener(system: system, emulatorApproval: emulatorApproval))
    }

    /// A session for `account` (the active one by default), logging in with `loginUI` (device
    /// login by default), its refreshes kept apart from other processes by a lock file per
    /// credential in `RefreshLock.defaultDirectory(environment:)`.
    public func session(
        account: String? = nil, loginUI: (any LoginUI)? = nil,
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil,
        recoveryPolicy: RecoveryPolicy = RecoveryPolicy()
    ) -> FacebookSession {
        FacebookSession(
            provider: provider, transport: transport, store: storage.store, account: self.account(account),
            loginUI: loginUI ?? deviceLogin(),
            configuration: .init(refreshLocking: .directory(RefreshLock.defaultDirectory(environment: environment))),
            recoveryDelegate: recoveryDelegate, recoveryPolicy: recoveryPolicy)
    }

    /// Keeps the last rate-limit usage `session`'s Graph calls saw, for `sesame status`.
    public func recordUsage(of session: FacebookSession) {
        guard let usage = session.governor.lastUsage else { return }
        try? accounts.recordUsage(usage.json, for: session.key)
    }

    /// Stops the built-in emulator (writing its state file). Call before exiting.
    public func shutdown() async {
        await emulator?.stop()
    }
}

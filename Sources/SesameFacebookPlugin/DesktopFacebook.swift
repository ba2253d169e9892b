import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameFacebook
import SesameHTTPServer

extension Desktop {
    /// The Facebook defaults: ``DesktopConfiguration`` resolved from `appID`, the environment and
    /// the config file; `CurlTransport`; the store ``DesktopStorage`` selects; a refresh lock
    /// file per account; device login with the code on `terminal`.
    ///
    /// With no app id configured anywhere this is a configuration error, unless `emulators`
    /// offers a built-in Facebook emulator (`BuiltInEmulators([FacebookEmulatorPlugin()])` from
    /// `SesameFacebookEmulatorDesktop`, which the examples use).
    ///
    /// Nothing is written to standard output or error unless `terminal` is given (a command-line
    /// app passes `.current()`); a GUI app logs in with `DesktopFacebook.browserLogin(opener:)`
    /// or `DesktopFacebook.deviceLogin(presenter:)` instead.
    ///
    /// - Parameters:
    ///   - appID: an app id from the app's own command line, which wins over the rest.
    ///   - overrides: values from the command line.
    ///   - environment: the environment to read.
    ///   - terminal: the terminal to talk to; `nil` says nothing (``Terminal/silent``).
    ///   - keyring: opens the keyring store (default: the Secret Service).
    ///   - emulators: the built-in emulators the app allows; none by default.
    /// - Throws: ``DesktopError`` for a bad or missing configuration, a missing keyring (unless
    ///   the file is opted in), or an emulator that cannot start.
    public static func facebook(
        appID: String? = nil, overrides: DesktopConfiguration.Overrides = .init(),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        terminal: Terminal? = nil, keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService,
        emulators: BuiltInEmulators? = nil
    ) async throws -> DesktopFacebook {
        let (setup, connection) = try await DesktopSetup.connecting(
            instance: "facebook", flags: ["app-id": appID], overrides: overrides, environment: environment,
            terminal: terminal, keyring: keyring, emulators: emulators, FacebookPlugin().connection)
        return DesktopFacebook(
            provider: connection.provider, context: connection.context, emulatorName: FacebookConnection.emulatorName,
            setup: setup, activeAccount: await setup.accounts.activeAccount(for: .facebook))
    }
}

extension Desktop {
    /// A Facebook app from explicit values only: reads no environment variable and no config
    /// file, starts no emulator and writes nothing to standard output or error.
    ///
    /// ```swift
    /// let facebook = Desktop.facebook(
    ///     appID: "1234567890", store: try await StoragePolicy.keyring.resolve().store,
    ///     stateDirectory: appSupport.appendingPathComponent("sesame"))
    /// let session = facebook.session(loginUI: facebook.browserLogin(opener: MyWebView()))
    /// ```
    ///
    /// - Parameters:
    ///   - appID: the Facebook app id.
    ///   - clientToken: the app's client token, for device login.
    ///   - store: where logins are kept.
    ///   - stateDirectory: where the refresh locks and the active account are kept.
    ///   - transport: what sends requests (`CurlTransport` by default).
    public static func facebook(
        appID: String, clientToken: String? = nil, store: any CredentialStore, stateDirectory: URL,
        transport: any HTTPTransport = CurlTransport()
    ) -> DesktopFacebook {
        facebook(
            provider: FacebookProvider(appID: appID, clientToken: clientToken), store: store,
            stateDirectory: stateDirectory, transport: transport)
    }

    /// A Facebook app from an explicit `provider` (its app, Graph version, endpoints), as
    /// ``facebook(appID:clientToken:store:stateDirectory:transport:)`` makes one: reads no
    /// environment variable and no config file, and writes nothing to standard output or error.
    public static func facebook(
        provider: FacebookProvider, store: any CredentialStore, stateDirectory: URL,
        transport: any HTTPTransport = CurlTransport()
    ) -> DesktopFacebook {
        DesktopFacebook(
            explicit: provider, emulatorName: FacebookConnection.emulatorName, store: store,
            stateDirectory: stateDirectory, transport: transport)
    }
}

/// A Facebook app with the desktop defaults: what `Desktop/facebook(appID:overrides:environment:terminal:keyring:emulators:)`
/// returns.
public typealias DesktopFacebook = DesktopProvider<FacebookProvider>

extension DesktopProvider where Provider == FacebookProvider {
    var connection: FacebookConnection { FacebookConnection(provider: provider, context: context) }

    /// Facebook Login for Devices with the code, a spinner and (for the emulator) its approval
    /// step on the terminal.
    public func deviceLogin() -> DeviceLoginFlow { connection.deviceLogin() }

    /// Browser login with the app's own presenter: the loopback receiver and PKCE, and `opener`
    /// (a GUI app's web view, or the system browser it starts itself) shows the address. Writes
    /// nothing to standard output or error.
    public func browserLogin(opener: any BrowserOpener) -> BrowserLoginFlow {
        FacebookSession.browserLogin(
            provider: provider, transport: transport,
            receiver: LoopbackRedirectReceiver(appName: isEmulated ? "Sesame (emulator)" : "Sesame"), opener: opener)
    }

    /// Facebook Login for Devices with the app's own presenter, which shows the code and the
    /// address (a GUI app's dialog). Writes nothing to standard output or error.
    public func deviceLogin(presenter: any DeviceCodePresenter) -> DeviceLoginFlow {
        FacebookSession.deviceLogin(provider: provider, transport: transport, presenter: presenter)
    }

    /// Browser login: the loopback receiver, PKCE, and the system browser (or only the printed
    /// address with `openBrowser` false).
    public func browserLogin(openBrowser: Bool = true) -> BrowserLoginFlow {
        connection.browserLogin(openBrowser: openBrowser)
    }

    /// A session for `account` (the active one by default), logging in with `loginUI` (device
    /// login by default), with the cross-process refresh lock file.
    public func session(
        account: String? = nil, loginUI: (any LoginUI)? = nil,
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil,
        recoveryPolicy: RecoveryPolicy = RecoveryPolicy()
    ) -> FacebookSession {
        connection.facebookSession(
            account: self.account(account), store: storage.store, loginUI: loginUI, recoveryDelegate: recoveryDelegate,
            recoveryPolicy: recoveryPolicy)
    }

    /// Keeps the last rate-limit usage `session`'s Graph calls saw, for `sesame status`.
    public func recordUsage(of session: FacebookSession) async {
        guard let usage = session.governor.lastUsage else { return }
        try? await accounts.recordUsage(usage.json, for: session.key)
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameGitHub

extension Desktop {
    /// The GitHub defaults: settings from `hostname`/`clientID` (or the environment and config
    /// file), `CurlTransport`, the store ``DesktopStorage`` selects, device login on the terminal,
    /// and a refresh lock file per account.
    ///
    /// ```swift
    /// let github = try await Desktop.github(clientID: "Iv1.0123456789abcdef")
    /// let session = github.session()
    /// try await session.open(scopes: ["repo"], allowLoginUI: true)
    /// let me = try await session.client().user()
    /// await github.shutdown()
    /// ```
    ///
    /// With nothing configured this is github.com without a client id (device login then says
    /// what to set), unless `emulators` offers a built-in GitHub emulator.
    ///
    /// - Parameters:
    ///   - hostname: the GitHub host (`github.com`, or an Enterprise Server's name).
    ///   - clientID: the OAuth app's or GitHub App's client id, which wins over the rest.
    ///   - overrides: values from the command line.
    ///   - environment: the environment to read.
    ///   - terminal: the terminal to talk to.
    ///   - keyring: opens the keyring store (default: the Secret Service).
    ///   - emulators: the built-in emulators the app allows; none by default.
    /// - Throws: ``DesktopError`` for a bad configuration, a missing keyring (unless the file is
    ///   opted in), or an emulator that cannot start.
    public static func github(
        hostname: String? = nil, clientID: String? = nil, overrides: DesktopConfiguration.Overrides = .init(),
        environment: [String: String] = ProcessInfo.processInfo.environment, terminal: Terminal? = nil,
        keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService,
        emulators: BuiltInEmulators? = nil
    ) async throws -> DesktopGitHub {
        let (setup, connection) = try await DesktopSetup.connecting(
            instance: "github", flags: ["hostname": hostname, "client-id": clientID], overrides: overrides,
            environment: environment, terminal: terminal, keyring: keyring, emulators: emulators,
            GitHubPlugin().gitHubConnection)
        return DesktopGitHub(
            provider: connection.provider, context: connection.context, emulatorName: GitHubConnection.emulatorName,
            setup: setup, activeAccount: await setup.accounts.activeAccount(for: .github, appID: connection.appID))
    }
}

/// A GitHub host with the desktop defaults: what `Desktop/github(hostname:clientID:overrides:environment:terminal:keyring:emulators:)`
/// returns.
public typealias DesktopGitHub = DesktopProvider<GitHubProvider>

extension DesktopProvider where Provider == GitHubProvider {
    var connection: GitHubConnection { GitHubConnection(provider: provider, context: context) }

    /// GitHub's device flow with the code on the terminal.
    public func deviceLogin() -> OAuth2Login { connection.deviceLogin() }

    /// A session for `account` (the active one by default), logging in with `loginUI` (device
    /// login by default), with the cross-process refresh lock file.
    public func session(account: String? = nil, loginUI: (any LoginUI)? = nil) -> GitHubSession {
        connection.githubSession(
            account: self.account(account), store: storage.store, loginUI: loginUI ?? deviceLogin())
    }
}

extension Desktop {
    /// A GitHub app from explicit values only: reads no environment variable and no config file,
    /// starts no emulator and writes nothing to standard output or error.
    ///
    /// ```swift
    /// let github = Desktop.github(clientID: "Iv1.0123456789abcdef", store: store, stateDirectory: appSupport)
    /// let session = github.session(loginUI: github.deviceLogin(presenter: MyCodeDialog()))
    /// ```
    ///
    /// - Parameters:
    ///   - clientID: the OAuth app's or GitHub App's client id.
    ///   - host: github.com (the default) or an Enterprise Server.
    ///   - store: where logins are kept.
    ///   - stateDirectory: where the refresh locks and the active account are kept.
    ///   - transport: what sends requests (`CurlTransport` by default).
    public static func github(
        clientID: String, host: GitHubHost = .github, store: any CredentialStore, stateDirectory: URL,
        transport: any HTTPTransport = CurlTransport()
    ) -> DesktopGitHub {
        DesktopGitHub(
            explicit: GitHubProvider(host: host, clientID: clientID), emulatorName: GitHubConnection.emulatorName,
            store: store, stateDirectory: stateDirectory, transport: transport)
    }
}

extension DesktopGitHub {
    /// GitHub's device flow with the app's own presenter, which shows the code and the address
    /// (a GUI app's dialog). Writes nothing to standard output or error.
    public func deviceLogin(presenter: any DeviceCodePresenter) -> OAuth2Login {
        GitHubSession.deviceLogin(provider: provider, transport: transport, presenter: presenter)
    }
}

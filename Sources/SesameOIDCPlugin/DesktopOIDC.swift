import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameHTTPServer
import SesameOIDC

extension Desktop {
    /// The OpenID Connect defaults for one issuer: settings from `issuer`/`clientID` (or the
    /// environment and config file under `name`), discovery, `CurlTransport`, the store
    /// ``DesktopStorage`` selects, the loopback receiver and system browser, device login on
    /// the terminal, and a refresh lock file per account.
    ///
    /// ```swift
    /// let work = try await Desktop.oidc(issuer: "https://id.example.com", clientID: "desktop")
    /// let session = work.session()
    /// try await session.open(scopes: ["openid", "email"], allowLoginUI: true)
    /// ```
    ///
    /// - Throws: ``DesktopError`` for a missing or wrong setting or keyring; the issuer's
    ///   discovery errors.
    public static func oidc(
        name: String = "oidc", issuer: String? = nil, clientID: String? = nil,
        overrides: DesktopConfiguration.Overrides = .init(),
        environment: [String: String] = ProcessInfo.processInfo.environment, terminal: Terminal? = nil,
        keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService,
        emulators: BuiltInEmulators? = nil
    ) async throws -> DesktopOIDC {
        let (setup, connection) = try await DesktopSetup.connecting(
            instance: name, flags: ["issuer": issuer, "client-id": clientID], overrides: overrides,
            environment: environment, terminal: terminal, keyring: keyring, emulators: emulators,
            OIDCPlugin().connection)
        return DesktopOIDC(
            provider: connection.provider, context: connection.context, emulatorName: connection.label, setup: setup,
            activeAccount: await setup.accounts.activeAccount(for: connection.provider.id))
    }

    /// An OpenID issuer from explicit values only: `provider` as the app made it
    /// (`OIDCProvider.discover(_:transport:now:)`, or known endpoints). Reads no environment
    /// variable and no config file, starts no emulator and writes nothing to standard output or
    /// error.
    ///
    /// ```swift
    /// let provider = try await OIDCProvider.discover(
    ///     OIDCConfiguration(issuer: "https://id.example.com", clientID: "desktop"), transport: transport)
    /// let work = Desktop.oidc(provider: provider, store: store, stateDirectory: appSupport)
    /// let session = work.session(loginUI: work.browserLogin(opener: MyWebView()))
    /// ```
    ///
    /// - Parameters:
    ///   - provider: the issuer and the app's client.
    ///   - store: where logins are kept.
    ///   - stateDirectory: where the refresh locks and the active account are kept.
    ///   - transport: what sends requests (`CurlTransport` by default).
    public static func oidc(
        provider: OIDCProvider, store: any CredentialStore, stateDirectory: URL,
        transport: any HTTPTransport = CurlTransport()
    ) -> DesktopOIDC {
        DesktopOIDC(
            explicit: provider, emulatorName: provider.id.rawValue, store: store, stateDirectory: stateDirectory,
            transport: transport)
    }
}

/// An OpenID issuer with the desktop defaults: what `Desktop/oidc(name:issuer:clientID:overrides:environment:terminal:keyring:emulators:)`
/// returns.
public typealias DesktopOIDC = DesktopProvider<OIDCProvider>

extension DesktopProvider where Provider == OIDCProvider {
    var connection: OIDCConnection { OIDCConnection(provider: provider, context: context) }

    /// Device login when the issuer offers it, else the browser with a loopback redirect; with
    /// no browser on this machine (`openBrowser` false, or `DesktopConfiguration.browser` says
    /// none: an SSH session, no display) the address is printed and, on a terminal, the redirect
    /// address the person's browser ended on may be pasted back (`PastedRedirect` in the core).
    public func login(openBrowser: Bool = true) -> any LoginUI { connection.automaticLogin(openBrowser: openBrowser) }

    /// A session for `account` (the active one by default), logging in with `loginUI` (``login(openBrowser:)``
    /// by default), with the cross-process refresh lock file.
    public func session(account: String? = nil, loginUI: (any LoginUI)? = nil) -> OIDCSession {
        OIDCSession(
            provider: provider, transport: transport, store: storage.store, account: self.account(account),
            loginUI: loginUI ?? login(), configuration: .init(refreshLocking: context.refreshLocking))
    }

    /// Browser login with the app's own presenter: the loopback receiver and PKCE, and `opener`
    /// (a GUI app's web view, or the system browser it starts itself) shows the address. Writes
    /// nothing to standard output or error.
    public func browserLogin(opener: any BrowserOpener) -> OIDCBrowserLogin {
        OIDCBrowserLogin(
            oidc: provider, receiver: LoopbackRedirectReceiver(appName: "Sesame"), opener: opener, transport: transport)
    }

    /// Device login (RFC 8628) with the app's own presenter, which shows the code and the address.
    /// Writes nothing to standard output or error.
    ///
    /// - Throws: `AuthError` when the issuer offers no device login (no
    ///   `device_authorization_endpoint`): use ``browserLogin(opener:)``.
    public func deviceLogin(presenter: any DeviceCodePresenter) throws -> DeviceLoginFlow {
        DeviceLoginFlow(dialect: try OIDCDeviceDialect(oidc: provider), presenter: presenter, transport: transport)
    }
}

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
        let setup = try await DesktopSetup.resolve(
            overrides: overrides, environment: environment, terminal: terminal, keyring: keyring)
        let connection = try await OIDCPlugin().connection(
            setup.loginRequest(instance: name, flags: ["issuer": issuer, "client-id": clientID], emulators: emulators))
        return DesktopOIDC(
            connection: connection, storage: setup.storage, accounts: setup.accounts,
            activeAccount: await setup.accounts.activeAccount(for: connection.provider.id))
    }
}

/// An OpenID issuer with the desktop defaults: what `Desktop/oidc(name:issuer:clientID:overrides:environment:terminal:keyring:emulators:)`
/// returns.
public struct DesktopOIDC: Sendable {
    let connection: OIDCConnection
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The active account per provider.
    public let accounts: AccountState
    /// The account that was active for this issuer when `Desktop/oidc(name:issuer:clientID:overrides:environment:terminal:keyring:emulators:)`
    /// read ``accounts``.
    public let activeAccount: String

    /// The discovered provider.
    public var provider: OIDCProvider { connection.provider }
    /// The HTTP transport (`CurlTransport`).
    public var transport: any HTTPTransport { connection.transport }

    /// Device login when the issuer offers it, else the browser with a loopback redirect; with
    /// no browser on this machine (`openBrowser` false, or `DesktopConfiguration.browser` says
    /// none: an SSH session, no display) the address is printed and, on a terminal, the redirect
    /// address the person's browser ended on may be pasted back (`PastedRedirect` in the core).
    public func login(openBrowser: Bool = true) -> any LoginUI {
        if let dialect = try? OIDCDeviceDialect(oidc: provider) {
            return DeviceLoginFlow(
                dialect: dialect,
                presenter: TerminalLoginPresenter(terminal: connection.terminal, providerName: connection.label),
                transport: transport)
        }
        return connection.browserLogin(openBrowser: openBrowser)
    }

    /// A session for `account` (the active one by default), logging in with `loginUI` (``login(openBrowser:)``
    /// by default), with the cross-process refresh lock file.
    public func session(account: String? = nil, loginUI: (any LoginUI)? = nil) -> OIDCSession {
        let account = account ?? activeAccount
        return OIDCSession(
            provider: provider, transport: transport, store: storage.store, account: account,
            loginUI: loginUI ?? login(),
            configuration: .init(
                refreshLocking: connection.refreshLocking))
    }
}

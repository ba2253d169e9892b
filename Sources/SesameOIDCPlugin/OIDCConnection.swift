import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameHTTPServer
import SesameOIDC

/// An OpenID issuer ready for one command.
struct OIDCConnection: ConnectedProvider {
    var instance: String
    var settings: OIDCPlugin.Settings
    var provider: OIDCProvider
    var transport: any HTTPTransport
    var terminal: Terminal
    var environment: [String: String]
    /// How renewals are kept apart from other processes\' (the storage\'s refresh locking).
    var refreshLocking: RefreshLocking
    /// Whether a browser opens on this machine (`--no-browser`, `SESAME_BROWSER`, an SSH session).
    var browser: LocalBrowser
    var remembered: OIDCRememberedIssuers

    var providerID: ProviderID { provider.id }
    var appID: String { provider.configuration.clientID }
    var issuer: String? { provider.endpoints.issuer }
    var label: String { "\(instance) (\(provider.endpoints.issuer))" }
    var details: [String: String] { ["issuer": provider.endpoints.issuer] }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        if let exchange = settings.tokenExchange {
            return try await machineLogIn(exchange, options, account: account, store: store)
        }
        if settings.clientCredentials {
            return try await machineLogIn(.clientCredentials, options, account: account, store: store)
        }
        let hasDevice = provider.endpoints.deviceAuthorizationEndpoint != nil
        let ui: any LoginUI
        switch options.flow {
        case .existingToken:
            throw DesktopError(
                "An OpenID login does not take --with-token; log in with the device code or --web.", status: .usage)
        case .device where !hasDevice:
            throw DesktopError(
                "\(provider.endpoints.issuer) does not offer device login (no device_authorization_endpoint); log in "
                    + "with --web instead.", status: .unavailable)
        case .browser(let openBrowser):
            ui = browserLogin(openBrowser: openBrowser)
        case .automatic where !hasDevice:
            // No device login: the browser, or with none here the address to paste back.
            ui = browserLogin(openBrowser: true)
        case .automatic, .device:
            ui = DeviceLoginFlow(
                dialect: try OIDCDeviceDialect(oidc: provider),
                presenter: TerminalLoginPresenter(terminal: terminal, providerName: label), transport: transport)
        }
        let scopes = options.scopes.isEmpty ? provider.configuration.scopes : options.scopes
        let token = try await ui.logIn(
            LoginRequest(provider: provider.id, appID: appID, permissions: scopes.map { Permission.read($0) }))
        try await save(token, account: account, store: store)
        let session = OIDCSession(provider: provider, transport: transport, store: store, account: account)
        _ = try? await session.open(allowLoginUI: false)
        let claims = try? await session.userInfo()
        let name = (claims ?? Self.idTokenClaims(token)).flatMap { $0["name"]?.stringValue ?? $0["email"]?.stringValue }
        return LoginResult(token: token, userName: name)
    }

    /// A login with no person (``OIDCMachineLogin``): the grant made now, the login stored with
    /// it, so that any later use renews it by making the grant again.
    func machineLogIn(
        _ grant: MachineGrant, _ options: LoginOptions, account: String, store: any CredentialStore
    ) async throws -> LoginResult {
        if grant == .clientCredentials, provider.clientAuthMethod == .none {
            throw DesktopError(
                "A login with --client-credentials needs the client to authenticate: set its secret "
                    + "(\(OIDCPlugin.variable("CLIENT_SECRET", instance: instance)), or --client-secret-stdin) or its "
                    + "private key (\(OIDCPlugin.variable("CLIENT_KEY_FILE", instance: instance))).",
                status: .config)
        }
        let scopes = options.scopes.isEmpty ? settings.scopes : options.scopes
        let login = OIDCMachineLogin(oidc: provider, grant: grant, transport: transport, environment: environment)
        let token = try await login.logIn(
            LoginRequest(provider: provider.id, appID: appID, permissions: scopes.map { Permission.read($0) }))
        try await save(token, account: account, store: store)
        return LoginResult(
            token: token, userName: grant == .clientCredentials ? "client \(appID)" : "workload of \(appID)")
    }

    /// Saves a login and remembers its issuer and client under the instance's name, so that
    /// later commands need neither.
    func save(_ token: AccessToken, account: String, store: any CredentialStore) async throws {
        try await DesktopLogin.save(token, account: account, issuer: issuer, store: store, label: label)
        let (remembered, instance, issuer, clientID) = (
            remembered, instance, settings.issuer.value, settings.clientID.value
        )
        try? await onOwnThread { try remembered.remember(instance: instance, issuer: issuer, clientID: clientID) }
    }

    func browserLogin(openBrowser: Bool) -> OIDCBrowserLogin {
        OIDCBrowserLogin(
            oidc: provider, receiver: browser.receiver(openBrowser: openBrowser, appName: "Sesame", terminal: terminal),
            opener: browser.opener(openBrowser: openBrowser, environment: environment, terminal: terminal),
            transport: transport)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        OIDCAccountSession(
            session: OIDCSession(
                provider: provider, transport: transport, store: store, account: account,
                configuration: .init(refreshLocking: refreshLocking, environment: environment)
            ),
            canRevoke: provider.endpoints.revocationEndpoint != nil)
    }

    /// The claims of the stored ID token, read for display only (it was checked when it was
    /// received).
    static func idTokenClaims(_ token: AccessToken) -> JSONValue? {
        token.idToken.flatMap { try? JSONWebToken(compact: $0).claims }
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        let name = Self.idTokenClaims(token).flatMap { $0["name"]?.stringValue ?? $0["email"]?.stringValue }
        if credential.key.issuer != issuer {
            // Stored before Sesame recorded issuers: taken over only by the issuer its ID token names.
            guard let recorded = OIDCLegacyLogins.issuer(of: token), recorded == issuer else {
                return AccountCheck(
                    validity: .invalid, userName: name,
                    problem: "This login was stored before Sesame recorded issuers, and it cannot be told to come "
                        + "from \(issuer ?? "this issuer"), so it is not used. Log in again; '\(Desktop.programName) logout' removes "
                        + "the old one.")
            }
            return AccountCheck(
                validity: .notChecked, userName: name,
                problem: "Stored before Sesame recorded issuers; it is taken over for \(recorded) when next used.")
        }
        guard let endpoint = provider.endpoints.userinfoEndpoint else {
            return AccountCheck(validity: .notChecked, userName: name)
        }
        do {
            let response = try await transport.send(
                HTTPRequest(
                    method: .get, url: endpoint,
                    headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]))
            if response.isSuccess {
                let claims = response.json
                return AccountCheck(
                    validity: .valid, userName: claims?["name"]?.stringValue ?? claims?["email"]?.stringValue ?? name)
            }
            let error = provider.taxonomy.classify(response)
            if error.category == .authenticationReopenSession {
                if token.refreshToken != nil {
                    return AccountCheck(
                        validity: .unverified, userName: name,
                        problem: "The issuer refused the access token; the next use tries the refresh token.",
                        tokenRefused: true)
                }
                return AccountCheck(
                    validity: .invalid, userName: name, problem: error.userMessage ?? error.message, tokenRefused: true)
            }
            return AccountCheck(validity: .unverified, userName: name, problem: error.userMessage ?? error.message)
        } catch {
            return AccountCheck(validity: .unverified, userName: name, problem: "\(error.sentence)")
        }
    }
}

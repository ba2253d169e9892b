import Foundation
import Sesame
import SesameDesktop
import SesameOIDC

/// An OpenID issuer ready for one command.
struct OIDCConnection: ConnectedProvider {
    var provider: OIDCProvider
    var context: ConnectionContext
    /// The settings the command resolved; `nil` for a library app's explicit provider.
    var settings: OIDCPlugin.Settings?
    /// Where a login's issuer and client are remembered under the instance's name.
    var remembered: OIDCRememberedIssuers?

    var instance: String { provider.id.rawValue }
    var transport: any HTTPTransport { context.transport }
    var providerID: ProviderID { provider.id }
    var appID: String { provider.configuration.clientID }
    var issuer: String? { provider.endpoints.issuer }
    var label: String { "\(instance) (\(provider.endpoints.issuer))" }
    var details: [String: String] { ["issuer": provider.endpoints.issuer] }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        if let grant = settings?.tokenExchange ?? (settings?.clientCredentials == true ? .clientCredentials : nil) {
            return try await machineLogIn(grant, options, account: account, store: store)
        }
        var options = options
        if options.scopes.isEmpty { options.scopes = provider.configuration.scopes }
        let token = try await logIn(
            options, account: account, store: store,
            existingToken: { _ in
                throw DesktopError(
                    "An OpenID login does not take --with-token; log in with the device code or --web.",
                    status: .usage)
            }, browser: { browserLogin(openBrowser: $0) }
        ) {
            if options.flow == .device, provider.endpoints.deviceAuthorizationEndpoint == nil {
                throw DesktopError(
                    "\(provider.endpoints.issuer) does not offer device login (no device_authorization_endpoint); "
                        + "log in with --web instead.", status: .unavailable)
            }
            return automaticLogin()
        }
        await rememberIssuer()
        let session = OIDCSession(provider: provider, transport: transport, store: store, account: account)
        _ = try? await session.open(allowLoginUI: false)
        let claims = try? await session.userInfo()
        return LoginResult(token: token, userName: Self.name(in: claims ?? Self.idTokenClaims(token)))
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
        let login = OIDCMachineLogin(
            oidc: provider, grant: grant, transport: transport, environment: context.environment)
        let scopes = options.scopes.isEmpty ? settings?.scopes ?? [] : options.scopes
        let token = try await logIn(with: login, scopes: scopes, account: account, store: store)
        await rememberIssuer()
        return LoginResult(
            token: token, userName: grant == .clientCredentials ? "client \(appID)" : "workload of \(appID)")
    }

    /// Remembers the login's issuer and client under the instance's name, so that later commands
    /// need neither.
    func rememberIssuer() async {
        guard let remembered, let settings else { return }
        let (instance, issuer, clientID) = (instance, settings.issuer.value, settings.clientID.value)
        try? await onOwnThread { try remembered.remember(instance: instance, issuer: issuer, clientID: clientID) }
    }

    /// Device login when the issuer offers it, else the browser (with no browser here, the address
    /// to paste back).
    func automaticLogin(openBrowser: Bool = true) -> any LoginUI {
        guard let dialect = try? OIDCDeviceDialect(oidc: provider) else {
            return browserLogin(openBrowser: openBrowser)
        }
        return DeviceLoginFlow(
            dialect: dialect, presenter: context.presenter(providerName: label), transport: transport)
    }

    func browserLogin(openBrowser: Bool) -> OIDCBrowserLogin {
        let (browser, terminal) = (context.browser, context.terminal)
        return OIDCBrowserLogin(
            oidc: provider, receiver: browser.receiver(openBrowser: openBrowser, appName: "Sesame", terminal: terminal),
            opener: browser.opener(openBrowser: openBrowser, environment: context.environment, terminal: terminal),
            transport: transport)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        let session = OIDCSession(
            provider: provider, transport: transport, store: store, account: account,
            configuration: .init(refreshLocking: context.refreshLocking, environment: context.environment))
        return RevokingAccountSession(
            session, advice: "end the session in the provider's account settings",
            unrevoked: provider.endpoints.revocationEndpoint == nil ? OIDCNoRevocationEndpoint() : nil
        ) { try await session.logout(revoke: $0) }
    }

    /// The claims of the stored ID token, read for display only (it was checked when it was
    /// received).
    static func idTokenClaims(_ token: AccessToken) -> JSONValue? {
        token.idToken.flatMap { try? JSONWebToken(compact: $0).claims }
    }

    /// The person's name in `claims`, else their e-mail address.
    static func name(in claims: JSONValue?) -> String? {
        claims?["name"]?.stringValue ?? claims?["email"]?.stringValue
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        let name = Self.name(in: Self.idTokenClaims(token))
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
        var check = await AccountCheck.checking {
            guard let endpoint = provider.endpoints.userinfoEndpoint else { return AccountCheck(validity: .notChecked) }
            let response = try await transport.send(
                HTTPRequest(
                    method: .get, url: endpoint,
                    headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]))
            guard response.isSuccess else { throw provider.taxonomy.classify(response) }
            return AccountCheck(validity: .valid, userName: Self.name(in: response.json))
        } refused: {
            AccountCheck.refusal($0, of: token, by: "The issuer")
        }
        check.userName = check.userName ?? name
        return check
    }
}

/// An issuer that lists no revocation endpoint (RFC 7009) where Sesame looks for one.
struct OIDCNoRevocationEndpoint: Error, CustomStringConvertible {
    var description: String {
        "the issuer lists no revocation_endpoint, neither in its OpenID discovery nor in its RFC 8414 metadata"
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameHTTPServer
import SesameOIDC

/// The generic OpenID Connect provider's desktop adapter: `oidc` (issuer and client given by
/// flags or the environment) and any number of issuers named in the config file, each its own
/// provider id so that their logins never mix.
///
/// | setting | flag | environment (`oidc` / name `work`) | config file |
/// |---|---|---|---|
/// | issuer | `--issuer` | `SESAME_OIDC_ISSUER` / `SESAME_OIDC_WORK_ISSUER` | `oidc.NAME.issuer` |
/// | client id | `--client-id` | `SESAME_OIDC_CLIENT_ID` / `SESAME_OIDC_WORK_CLIENT_ID` | `oidc.NAME.clientID` |
/// | client secret | (never a flag) | `SESAME_OIDC_CLIENT_SECRET` / `SESAME_OIDC_WORK_CLIENT_SECRET` | `oidc.NAME.client_secret` |
/// | client secret, typed | `--client-secret-stdin` (login: read from standard input) | | |
/// | scopes | `--scopes` (per login) | `SESAME_OIDC_SCOPES` / `SESAME_OIDC_WORK_SCOPES` | `oidc.NAME.scopes` |
///
/// Last come the issuer and client of the previous login under the same name, so that
/// `sesame token oidc` works after `sesame login oidc --issuer ...`.
public struct OIDCPlugin: ProviderPlugin {
    /// Creates the plug-in.
    public init() {}

    public var name: String { "oidc" }
    public var displayName: String { "OpenID Connect" }
    public var summary: String {
        "Any OpenID Connect provider by issuer URL and client id (device login or browser with PKCE); "
            + "name several in the config file's \"oidc\" object to use them side by side."
    }
    public var loginFlows: Set<LoginFlowKind> { [.device, .browser] }
    public var errorTaxonomy: any ErrorTaxonomy { OIDCErrorTaxonomy(provider: .oidc) }
    public var errorTable: ErrorRuleTable? { OIDCErrorTaxonomy.table }

    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) {
        (
            """
            OpenID Connect: 'oidc' takes the issuer (discovery at /.well-known/openid-configuration)
            and a client id; device login when the issuer offers it, else the browser. Several
            issuers side by side get names in the config file:
              {"oidc": {"work":   {"issuer": "https://id.example.com", "clientID": "desktop",
                                   "scopes": ["openid", "email"]},
                        "gitlab": {"issuer": "https://gitlab.com", "clientID": "..."}}}
            then 'sesame login work'. Each name's tokens are kept apart; token, logout [--revoke],
            switch and status take the name. Try it offline against 'sesame emulator --oidc'.
            """,
            [
                (
                    "sesame login oidc --issuer http://127.0.0.1:8765 --client-id sesame-desktop",
                    "Log in to the OIDC emulator started by 'sesame emulator --oidc --port 8765'"
                ),
                ("sesame login work --web", "Log in to the issuer named 'work' in the config file, in the browser"),
            ]
        )
    }

    public func newInstanceHint(_ name: String) -> String? {
        guard Self.isValidName(name) else { return nil }
        return "An OpenID issuer gets a name in the config file: "
            + #"{"oidc": {"\#(name)": {"issuer": "https://...", "clientID": "..."}}}"#
    }

    /// The environment variable for `setting` of issuer `name`.
    public static func variable(_ setting: String, instance: String) -> String {
        instance == "oidc"
            ? "SESAME_OIDC_\(setting)"
            : "SESAME_OIDC_\(instance.uppercased().replacingOccurrences(of: "-", with: "_"))_\(setting)"
    }

    public func settings(instance: String) -> [ProviderSetting] {
        [
            ProviderSetting(
                "issuer", value: "URL", kind: .url, environment: Self.variable("ISSUER", instance: instance),
                configKey: "issuer", "The issuer URL (discovery at /.well-known/openid-configuration)."),
            ProviderSetting(
                "client-id", value: "ID", environment: Self.variable("CLIENT_ID", instance: instance),
                configKey: "clientID", "The client id registered with the issuer."),
            ProviderSetting(
                "client-secret", value: "SECRET", secret: true,
                environment: Self.variable("CLIENT_SECRET", instance: instance), configKey: "client_secret",
                "The client secret, for clients the issuer registered with one (never on the command line)."),
            ProviderSetting(
                "client-secret-stdin", kind: .flag,
                "Read the client secret from standard input (a prompt without echo on a terminal)."),
            ProviderSetting(
                "scopes", value: "a,b", kind: .list, flag: false,
                environment: Self.variable("SCOPES", instance: instance),
                configKey: "scopes", "The scopes a login asks for when it names none."),
        ]
    }

    /// Whether `name` can name an issuer: lower-case letters, digits, `-` and `_`, a letter first.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter, first.isLowercase, name.count <= 40 else {
            return false
        }
        return name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" || $0 == "_" }
    }

    public func mayBeInstance(_ instance: String) -> Bool { Self.isValidName(instance) }

    /// The issuers named in the config file's `oidc` object, and those logged in to before.
    public func instanceNames(configuration: DesktopConfiguration) throws -> [String] {
        let configured = try Self.configured(configuration).keys
        let remembered = OIDCRememberedIssuers(stateDirectory: configuration.stateDirectory).read().keys
            .filter(Self.isValidName)
        return Set(configured).union(remembered).subtracting(Desktop.providers.map(\.name)).sorted()
    }

    /// The config file's `oidc` object, by name, each entry checked.
    static func configured(_ configuration: DesktopConfiguration) throws -> [String: [String: JSONValue]] {
        var issuers: [String: [String: JSONValue]] = [:]
        for (name, value) in try configuration.section("oidc") {
            guard isValidName(name), !Desktop.providers.contains(where: { $0.name == name }),
                let entry = value.objectValue
            else {
                throw DesktopError(
                    "\(configuration.configFileDescription) has an oidc entry '\(name.sanitizedForTerminal)' that is not "
                        + "usable: names are lower-case letters, digits, '-' and '_', not a provider's name, and each "
                        + #"is an object such as {"issuer": "https://...", "clientID": "...", "scopes": ["openid"]}."#,
                    status: .config)
            }
            issuers[name] = entry
        }
        return issuers
    }

    /// The resolved settings of one issuer.
    struct Settings {
        var instance: String
        var issuer: Sourced<String>
        var clientID: Sourced<String>
        var clientSecret: Sourced<String>?
        var scopes: [String]

        init(_ request: ProviderConnectionRequest) async throws {
            let instance = request.instance
            let plugin = OIDCPlugin()
            let section = try OIDCPlugin.configured(request.configuration)[instance] ?? [:]
            let remembered = OIDCRememberedIssuers(stateDirectory: request.configuration.stateDirectory).read()[
                instance]
            let path = "oidc.\(instance)"
            let settings = plugin.settings(instance: instance)
            func value(_ index: Int, rememberedKey: String? = nil) throws -> Sourced<String>? {
                let fallback = rememberedKey.flatMap { remembered?[$0]?.stringValue }.map {
                    Sourced($0, source: "the previous 'sesame login \(instance)'")
                }
                return try request.value(of: settings[index], section: section, sectionPath: path, fallback: fallback)
            }
            guard let issuer = try value(0, rememberedKey: "issuer") else {
                throw Self.missing(
                    "issuer URL", flag: "--issuer URL", variable: settings[0].environment!, key: "issuer",
                    request: request)
            }
            guard let clientID = try value(1, rememberedKey: "clientID") else {
                throw Self.missing(
                    "client id", flag: "--client-id ID", variable: settings[1].environment!,
                    key: "clientID", request: request)
            }
            self.instance = instance
            self.issuer = issuer
            self.clientID = clientID
            self.clientSecret = try value(2)
            if request.flags["client-secret-stdin"] != nil {
                guard let readSecret = request.readSecret else {
                    throw DesktopError("This program cannot read a client secret from standard input.", status: .usage)
                }
                let text = await readSecret("Client secret for '\(instance)': ")
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                guard !text.isEmpty, settings[2].problem(with: text) == nil else {
                    throw DesktopError(
                        "Standard input gave no usable client secret; pipe it in, as in "
                            + "'sesame login \(instance) --client-secret-stdin < secret.txt'.", status: .dataError)
                }
                self.clientSecret = Sourced(text, source: "standard input")
            }
            self.scopes = (try value(4)?.value ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        }

        static func missing(
            _ what: String, flag: String, variable: String, key: String, request: ProviderConnectionRequest
        ) -> DesktopError {
            let instance = request.instance
            let elsewhere =
                instance == "oidc"
                ? "set \(variable), as in 'sesame login oidc --issuer https://id.example.com --client-id ID'"
                : "set \(variable), or add \"\(key)\" to oidc.\(instance) in "
                    + request.configuration.configFileDescription
            return DesktopError(
                "No \(what) is configured for '\(instance)'; give \(flag) to 'sesame login \(instance)' or \(elsewhere).",
                status: .usage)
        }
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        try await connection(request)
    }

    func connection(_ request: ProviderConnectionRequest) async throws -> OIDCConnection {
        let settings = try await Settings(request)
        let instance = request.instance
        var configuration = OIDCConfiguration(
            providerID: ProviderID(instance), displayName: instance == "oidc" ? nil : instance,
            issuer: settings.issuer.value, clientID: settings.clientID.value,
            clientSecret: settings.clientSecret.map { ClientSecret($0.value) })
        if !settings.scopes.isEmpty { configuration.scopes = settings.scopes }
        configuration.allowedInsecureHosts = request.allowedInsecureHosts
        // Using a login (token, status, logout) takes the issuer's endpoints as discovered within
        // the last day, with no request: a valid token is printed offline, at once. A login
        // discovers afresh, and so does a use when what was kept is older or gone.
        let cache = OIDCDiscoveryCache(stateDirectory: request.configuration.stateDirectory)
        let issuer = configuration.issuer
        let providerID = configuration.providerID
        if request.purpose == .use {
            configuration.endpoints = await onOwnThread {
                cache.endpoints(for: issuer, provider: providerID, now: Date())
            }
        }
        let discovered = configuration.endpoints == nil
        let provider = try await OIDCProvider.discover(configuration, transport: request.transport)
        if discovered {
            let endpoints = provider.endpoints
            try? await onOwnThread { try cache.remember(endpoints, at: Date()) }
        }
        return OIDCConnection(
            instance: instance, settings: settings, provider: provider, transport: request.transport,
            terminal: request.terminal, environment: request.environment,
            remembered: OIDCRememberedIssuers(stateDirectory: request.configuration.stateDirectory))
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        do {
            let settings = try await Settings(request)
            var lines = [
                DoctorLine(
                    .ok,
                    "OpenID issuer '\(request.instance)': \(settings.issuer.value), from \(settings.issuer.source).")
            ]
            if let url = URL(string: settings.issuer.value + "/.well-known/openid-configuration") {
                lines.append(
                    await DoctorProbe.answers(
                        label: "'\(request.instance)' discovery", url: url, transport: request.transport))
            }
            return lines
        } catch let error as DesktopError where request.instance == "oidc" && error.status == .usage {
            return []
        } catch {
            return [DoctorLine(.problem, "OpenID issuer '\(request.instance)': \(error)")]
        }
    }
}

/// An OpenID issuer ready for one command.
struct OIDCConnection: ConnectedProvider {
    var instance: String
    var settings: OIDCPlugin.Settings
    var provider: OIDCProvider
    var transport: any HTTPTransport
    var terminal: Terminal
    var environment: [String: String]
    var remembered: OIDCRememberedIssuers

    var providerID: ProviderID { provider.id }
    var appID: String { provider.configuration.clientID }
    var issuer: String? { provider.endpoints.issuer }
    var label: String { "\(instance) (\(provider.endpoints.issuer))" }
    var details: [String: String] { ["issuer": provider.endpoints.issuer] }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
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
            ui = browserLogin(openBrowser: true)
        case .automatic, .device:
            ui = DeviceLoginFlow(
                dialect: try OIDCDeviceDialect(oidc: provider),
                presenter: TerminalLoginPresenter(terminal: terminal, providerName: label), transport: transport)
        }
        let scopes = options.scopes.isEmpty ? provider.configuration.scopes : options.scopes
        let token = try await ui.logIn(
            LoginRequest(provider: provider.id, appID: appID, permissions: scopes.map { Permission.read($0) }))
        try await DesktopLogin.save(token, account: account, issuer: issuer, store: store, label: label)
        let (remembered, instance, issuer, clientID) = (
            remembered, instance, settings.issuer.value, settings.clientID.value
        )
        try? await onOwnThread { try remembered.remember(instance: instance, issuer: issuer, clientID: clientID) }
        let session = OIDCSession(provider: provider, transport: transport, store: store, account: account)
        _ = try? await session.open(allowLoginUI: false)
        let claims = try? await session.userInfo()
        let name = (claims ?? Self.idTokenClaims(token)).flatMap { $0["name"]?.stringValue ?? $0["email"]?.stringValue }
        return LoginResult(token: token, userName: name)
    }

    func browserLogin(openBrowser: Bool) -> OIDCBrowserLogin {
        OIDCBrowserLogin(
            oidc: provider, receiver: LoopbackRedirectReceiver(appName: "Sesame"),
            opener: SystemBrowserOpener(mode: openBrowser ? .automatic : .printOnly, environment: environment),
            transport: transport)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        OIDCAccountSession(
            session: OIDCSession(
                provider: provider, transport: transport, store: store, account: account,
                configuration: .init(refreshLocking: .directory(RefreshLock.defaultDirectory(environment: environment)))
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
                        + "from \(issuer ?? "this issuer"), so it is not used. Log in again; 'sesame logout' removes "
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
                        problem: "The issuer refused the access token; the next use tries the refresh token.")
                }
                return AccountCheck(validity: .invalid, userName: name, problem: error.userMessage ?? error.message)
            }
            return AccountCheck(validity: .unverified, userName: name, problem: error.userMessage ?? error.message)
        } catch {
            return AccountCheck(validity: .unverified, userName: name, problem: "\(error)")
        }
    }
}

/// An OpenID session as the generic commands use it.
struct OIDCAccountSession: AccountSession {
    var session: OIDCSession
    var canRevoke: Bool

    var key: CredentialKey { session.key }
    var userID: String? { get async { await session.token?.userID } }

    func open() async throws -> Bool { try await session.open(allowLoginUI: false).isOpen }

    func condition(of credential: StoredCredential) -> LoginCondition { session.session.condition(of: credential) }

    func warning(for token: AccessToken) -> String? { session.session.renewer.expiryWarning(for: token, at: Date()) }

    func validToken() async throws -> AccessToken { try await session.validToken() }

    func logOut(revoke: Bool) async throws -> String? {
        try await RevocationFailed.loggingOut(
            revoke: revoke, advice: "end the session in the provider's account settings"
        ) {
            try await session.logout(revoke: revoke)
        }
        guard revoke else { return nil }
        return canRevoke
            ? "its tokens were revoked" : "the issuer has no revocation endpoint, so nothing was revoked there"
    }
}

/// The issuer and client of the last login under each name: `$XDG_STATE_HOME/sesame/oidc-issuers.json`,
/// replaced atomically. No secrets.
struct OIDCRememberedIssuers: Sendable {
    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("oidc-issuers.json"))
    }

    func read() -> [String: JSONValue] { file.read() }

    func remember(instance: String, issuer: String, clientID: String) throws {
        try file.modify { all in
            all[instance] = .object(["issuer": .string(issuer), "clientID": .string(clientID)])
        }
    }
}

/// The issuers' endpoints as last discovered, with when: `oidc-discovery.json` in the state
/// directory, keyed by issuer. Endpoints come back only when they are younger than ``maxAge``
/// and name the issuer they are kept under; `OIDCProvider.discover` then checks them as it
/// checks a discovery document (https, or http to loopback or an allowed host).
struct OIDCDiscoveryCache: Sendable {
    /// How long kept endpoints are used without asking the issuer again.
    static let maxAge: TimeInterval = 24 * 3600

    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("oidc-discovery.json"))
    }

    /// The endpoints kept for `issuer`, when discovered no more than ``maxAge`` before `now`.
    func endpoints(for issuer: String, provider: ProviderID, now: Date) -> OIDCEndpoints? {
        guard let entry = file.read()[issuer], let fetched = entry["fetched_at"]?.doubleValue else { return nil }
        let age = now.timeIntervalSince1970 - fetched
        guard age >= 0, age <= Self.maxAge,
            let endpoints = try? OIDCEndpoints(discoveryDocument: entry["document"], provider: provider),
            endpoints.issuer == issuer
        else { return nil }
        return endpoints
    }

    /// Keeps `endpoints`, discovered at `date`, under their issuer.
    func remember(_ endpoints: OIDCEndpoints, at date: Date) throws {
        try file.modify { all in
            all[endpoints.issuer] = .object([
                "fetched_at": .number(date.timeIntervalSince1970.rounded()), "document": endpoints.discoveryDocument,
            ])
        }
    }
}

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
        let terminal = terminal ?? .current(environment: environment)
        let configuration = try DesktopConfiguration.resolve(overrides: overrides, environment: environment)
        let storage = try await DesktopStorage.select(configuration.storage, keyring: keyring, environment: environment)
        var flags: [String: String] = [:]
        flags["issuer"] = issuer
        flags["client-id"] = clientID
        let connection = try await OIDCPlugin().connection(
            ProviderConnectionRequest(
                instance: name, flags: flags, configuration: configuration, environment: environment,
                terminal: terminal, transport: CurlTransport(), emulators: emulators, purpose: .login))
        let accounts = AccountState(environment: environment)
        return DesktopOIDC(
            connection: connection, storage: storage, accounts: accounts,
            activeAccount: await accounts.activeAccount(for: connection.provider.id))
    }
}

/// An OpenID issuer with the desktop defaults: what ``Desktop/oidc(name:issuer:clientID:overrides:environment:terminal:keyring:emulators:)``
/// returns.
public struct DesktopOIDC: Sendable {
    let connection: OIDCConnection
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The active account per provider.
    public let accounts: AccountState
    /// The account that was active for this issuer when ``Desktop/oidc(name:issuer:clientID:overrides:environment:terminal:keyring:emulators:)``
    /// read ``accounts``.
    public let activeAccount: String

    /// The discovered provider.
    public var provider: OIDCProvider { connection.provider }
    /// The HTTP transport (`CurlTransport`).
    public var transport: any HTTPTransport { connection.transport }

    /// Device login when the issuer offers it, else the browser with a loopback redirect.
    public func login(openBrowser: Bool = true) -> any LoginUI {
        if let dialect = try? OIDCDeviceDialect(oidc: provider) {
            return DeviceLoginFlow(
                dialect: dialect,
                presenter: TerminalLoginPresenter(terminal: connection.terminal, providerName: connection.label),
                transport: transport)
        }
        return OIDCBrowserLogin(
            oidc: provider, receiver: LoopbackRedirectReceiver(appName: "Sesame"),
            opener: SystemBrowserOpener(
                mode: openBrowser ? .automatic : .printOnly, environment: connection.environment),
            transport: transport)
    }

    /// A session for `account` (the active one by default), logging in with `loginUI` (``login(openBrowser:)``
    /// by default), with the cross-process refresh lock file.
    public func session(account: String? = nil, loginUI: (any LoginUI)? = nil) -> OIDCSession {
        let account = account ?? activeAccount
        return OIDCSession(
            provider: provider, transport: transport, store: storage.store, account: account,
            loginUI: loginUI ?? login(),
            configuration: .init(
                refreshLocking: .directory(RefreshLock.defaultDirectory(environment: connection.environment))))
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameGitHub

/// GitHub's desktop adapter: github.com or a GitHub Enterprise Server (`--hostname`), device
/// login with an OAuth app's client id or a token from standard input, the built-in GitHub
/// emulator when nothing is configured (and the program allows it), and its status, doctor and
/// `git credential` answers.
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | host | `--hostname` | `SESAME_GITHUB_HOSTNAME` | `github.hostname` |
/// | client id | `--client-id` | `SESAME_GITHUB_CLIENT_ID` | `github.client_id` |
/// | client secret | (never a flag) | `SESAME_GITHUB_CLIENT_SECRET` | `github.client_secret` |
/// | server address | (no flag) | `SESAME_GITHUB_URL` | `github.url` |
///
/// Logins are stored under provider `github` with the host name as the app id, so each host's
/// logins are kept apart and changing the OAuth app loses none of them.
public struct GitHubPlugin: ProviderPlugin {
    /// Creates the plug-in.
    public init() {}

    public var name: String { "github" }
    public var displayName: String { "GitHub" }
    public var summary: String {
        "GitHub or a GitHub Enterprise Server (device login with an OAuth app's client id, or a token from "
            + "standard input); answers git's credential questions; the built-in emulator when nothing is configured."
    }
    public var loginFlows: Set<LoginFlowKind> { [.device, .existingToken] }
    public var errorTaxonomy: any ErrorTaxonomy { GitHubErrorTaxonomy() }
    public var errorTable: ErrorRuleTable? { GitHubErrorTaxonomy.table }

    static let hostname = ProviderSetting(
        "hostname", value: "HOST", environment: "SESAME_GITHUB_HOSTNAME", configKey: "hostname",
        "The GitHub host: github.com (the default) or a GitHub Enterprise Server's name.")
    static let clientID = ProviderSetting(
        "client-id", value: "ID", environment: "SESAME_GITHUB_CLIENT_ID", configKey: "client_id",
        "The client id of a GitHub OAuth app or GitHub App with device flow enabled.")
    static let clientSecret = ProviderSetting(
        "client-secret", value: "SECRET", secret: true, environment: "SESAME_GITHUB_CLIENT_SECRET",
        configKey: "client_secret", "A GitHub App's client secret, when it needs one to refresh expiring tokens.")
    static let serverURL = ProviderSetting(
        "url", value: "URL", kind: .url, flag: false, environment: "SESAME_GITHUB_URL", configKey: "url",
        "The address of a GitHub laid out as an Enterprise Server (login pages at its root, the API under "
            + "/api/v3) when it is not https://HOST: a local emulator or test server.")

    /// The host name logins against the built-in emulator are kept under: the same on every
    /// run, whatever port the emulator gets.
    public static let emulatorHostname = "github-emulator.localhost"

    public func settings(instance: String) -> [ProviderSetting] {
        [Self.hostname, Self.clientID, Self.clientSecret, Self.serverURL]
    }

    /// The resolved settings.
    struct Settings {
        var hostname: Sourced<String>?
        var clientID: Sourced<String>?
        var clientSecret: Sourced<String>?
        var serverURL: Sourced<String>?

        init(_ request: ProviderConnectionRequest) throws {
            let value = try request.settingReader(section: "github")
            hostname = try value(GitHubPlugin.hostname)
            clientID = try value(GitHubPlugin.clientID)
            clientSecret = try value(GitHubPlugin.clientSecret)
            serverURL = try value(GitHubPlugin.serverURL)
            // Nothing names a host: the previous login's host (and its client id) are used, as a
            // unit, so that 'sesame token github' works after 'sesame login github --client-id ...'.
            if hostname == nil, serverURL == nil {
                let remembered = GitHubRememberedLogin(stateDirectory: request.configuration.stateDirectory).read()
                let source = GitHubRememberedLogin.source
                func checked(_ setting: ProviderSetting, _ key: String) -> Sourced<String>? {
                    guard let text = remembered[key]?.stringValue, setting.problem(with: text) == nil else {
                        return nil
                    }
                    return Sourced(text, source: source)
                }
                hostname = checked(GitHubPlugin.hostname, "hostname")
                serverURL = checked(GitHubPlugin.serverURL, "url")
                if hostname != nil, clientID == nil { clientID = checked(GitHubPlugin.clientID, "client_id") }
            }
        }

        /// Nothing says which GitHub to use.
        var isEmpty: Bool { hostname == nil && clientID == nil && serverURL == nil }

        /// The host the settings name.
        func host() throws -> GitHubHost {
            do {
                if let serverURL, let url = URL(string: serverURL.value.trimmingSuffix("/")) {
                    // Tokens travel to it: in clear text only to this machine.
                    if url.scheme?.lowercased() == "http",
                        !["127.0.0.1", "::1", "localhost"].contains(url.host?.lowercased() ?? "")
                    {
                        throw DesktopError(
                            "\(serverURL.source) is \(serverURL.value.sanitizedForTerminal), plain http to another "
                                + "machine, which would send GitHub tokens in clear text; use https (http is allowed "
                                + "only for 127.0.0.1, ::1 and localhost).", status: .config)
                    }
                    let named = try hostname.map { try GitHubHost(hostname: $0.value).hostname }
                    let own = url.host.map { host in url.port.map { "\(host):\($0)" } ?? host } ?? "localhost"
                    return GitHubHost(
                        hostname: named ?? own, oauthBaseURL: url, apiBaseURL: url.appendingPathComponent("api/v3"))
                }
                return try hostname.map { try GitHubHost(hostname: $0.value) } ?? .github
            } catch let error as AuthError {
                throw DesktopError(
                    "\(hostname?.source ?? "The GitHub host"): \(error.message)", status: .config)
            }
        }

        func checkedClientID() throws -> String? {
            guard let clientID else { return nil }
            do {
                return try GitHubProvider.checkedClientID(clientID.value)
            } catch let error as AuthError {
                throw DesktopError("\(clientID.source): \(error.message)", status: .config)
            }
        }
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        try await gitHubConnection(request)
    }

    func gitHubConnection(_ request: ProviderConnectionRequest) async throws -> GitHubConnection {
        let settings = try Settings(request)
        guard settings.isEmpty, let emulators = request.emulators else {
            return try connection(settings, request: request)
        }
        // `sesame status` with no GitHub login sends it nothing, so it never starts.
        guard
            let emulator = try await emulators.emulator(
                for: name, purpose: request.purpose, environment: request.environment),
            let base = emulator.endpoints["base"], let api = emulator.endpoints["api"]
        else { return try connection(settings, request: request) }
        let approvalMode = try EmulatorApproval.mode(environment: request.environment, terminal: request.terminal)
        let provider = GitHubProvider(
            host: GitHubHost(hostname: Self.emulatorHostname, oauthBaseURL: base, apiBaseURL: api),
            clientID: emulator.appID)
        if request.purpose == .login {
            request.terminal.say(
                request.terminal.dim(
                    "Using Sesame's built-in GitHub emulator (no GitHub client id or host is configured; its state "
                        + "is in \(emulator.stateFile.path)); set SESAME_GITHUB_CLIENT_ID (or give --client-id, or "
                        + "--hostname github.com for a token login) to use real GitHub.") + "\n")
        }
        return GitHubConnection(
            provider: provider, hasClientID: true, transport: emulator.route(request.transport),
            terminal: request.terminal, emulator: emulator, approvalMode: approvalMode,
            environment: request.environment)
    }

    /// A connection to the host the settings name, never the emulator.
    func connection(_ settings: Settings, request: ProviderConnectionRequest) throws -> GitHubConnection {
        let clientID = try settings.checkedClientID()
        let provider = GitHubProvider(
            host: try settings.host(), clientID: clientID ?? "",
            clientSecret: settings.clientSecret.map { ClientSecret($0.value) })
        var connection = GitHubConnection(
            provider: provider, hasClientID: clientID != nil, transport: request.transport,
            terminal: request.terminal, emulator: nil, approvalMode: .off, environment: request.environment)
        connection.remembered = GitHubRememberedLogin(stateDirectory: request.configuration.stateDirectory)
        connection.serverURL = settings.serverURL?.value
        return connection
    }

    /// GitHub answers git for every host: its logins are stored with the host name as the app
    /// id, so a host without a login simply has none. Never starts the emulator.
    public func connect(
        _ request: ProviderConnectionRequest, credentialHost host: String
    ) async throws -> (any ConnectedProvider)? {
        // A name that cannot be a GitHub host has no GitHub login.
        guard (try? GitHubHost(hostname: host)) != nil else { return nil }
        var settings = try Settings(request)
        // The configured server address applies only to the host it names.
        if let configured = try? settings.host(), configured.hostname != host.lowercased() {
            settings.serverURL = nil
            // The previous login's client id belongs to the previous login's host.
            if settings.clientID?.source == GitHubRememberedLogin.source { settings.clientID = nil }
        }
        if settings.serverURL == nil { settings.hostname = Sourced(host, source: "git's request") }
        return try connection(settings, request: request)
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        let settings: Settings
        let host: GitHubHost
        do {
            settings = try Settings(request)
            host = try settings.host()
            _ = try settings.checkedClientID()
        } catch {
            return [DoctorLine(.problem, "GitHub configuration: \(error)")]
        }
        guard !settings.isEmpty else {
            return [
                DoctorLine(
                    .info,
                    "GitHub: nothing is configured, so the sesame command uses the built-in GitHub emulator",
                    fix: "to use github.com, set SESAME_GITHUB_CLIENT_ID to an OAuth app's client id (device login) "
                        + "or log in with '--hostname github.com --with-token'")
            ]
        }
        var lines: [DoctorLine] = []
        if let clientID = settings.clientID {
            lines.append(DoctorLine(.ok, "GitHub client id \(clientID.value), from \(clientID.source)."))
        } else {
            lines.append(
                DoctorLine(
                    .warning, "GitHub: no client id is configured, so only token logins (--with-token) work.",
                    fix: "set SESAME_GITHUB_CLIENT_ID to an OAuth app's client id with device flow enabled"))
        }
        let provider = GitHubProvider(host: host, clientID: settings.clientID?.value ?? "")
        if let error = await provider.probe(transport: request.transport, timeout: .seconds(3)) {
            lines.append(
                DoctorLine(
                    .problem,
                    "GitHub API at \(host.apiBaseURL.absoluteString) does not answer as GitHub: \(error.message)",
                    fix: "check the network, a proxy (HTTPS_PROXY), or the host name (--hostname)"))
        } else {
            lines.append(DoctorLine(.ok, "GitHub API at \(host.apiBaseURL.absoluteString) answers."))
        }
        return lines
    }
}

/// A GitHub host ready for one command.
struct GitHubConnection: ConnectedProvider {
    var provider: GitHubProvider
    /// Whether a client id was configured (device login and refresh need one).
    var hasClientID: Bool
    var transport: any HTTPTransport
    var terminal: Terminal
    var emulator: RunningEmulator?
    var approvalMode: EmulatorApproval.Mode
    var environment: [String: String]
    /// Where a login's host is remembered (not for the emulator).
    var remembered: GitHubRememberedLogin?
    /// The configured server address, when there is one.
    var serverURL: String?

    var providerID: ProviderID { .github }
    var appID: String { provider.credentialAppID }
    var label: String { emulator == nil ? provider.displayName : "the GitHub emulator" }
    var isEmulated: Bool { emulator != nil }
    var details: [String: String] { ["host": provider.host.hostname] }

    func githubSession(
        account: String, store: any CredentialStore, loginUI: (any LoginUI)? = nil
    ) -> GitHubSession {
        GitHubSession(
            provider: provider, transport: transport, store: store, account: account, loginUI: loginUI,
            refreshLocking: .directory(RefreshLock.defaultDirectory(environment: environment)))
    }

    /// GitHub's device flow with the code (and, for the emulator, its approval step) on the terminal.
    func deviceLogin() -> DeviceLoginFlow {
        let approval = emulator.map {
            EmulatorApproval(emulator: $0, mode: approvalMode, terminal: terminal, transport: transport)
        }
        return DeviceLoginFlow(
            dialect: GitHubDeviceDialect(github: provider, transport: transport),
            presenter: TerminalLoginPresenter(terminal: terminal, providerName: label, emulatorApproval: approval),
            transport: transport)
    }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        let ui: any LoginUI
        switch options.flow {
        case .existingToken(let text):
            ui = GitHubTokenLogin(github: provider, transport: transport) { text }
        case .browser:
            throw DesktopError(
                "GitHub logins use the device code (the default) or --with-token; leave out --web and --no-browser.",
                status: .usage)
        case .automatic, .device:
            guard hasClientID else {
                throw DesktopError(
                    "No GitHub client id is configured, and device login needs one: set SESAME_GITHUB_CLIENT_ID (or "
                        + "give --client-id) to the client id of an OAuth app with device flow enabled, or log in "
                        + "with a token: 'gh auth token | sesame login github --with-token'.", status: .config)
            }
            ui = deviceLogin()
        }
        let token = try await ui.logIn(
            LoginRequest(
                provider: .github, appID: provider.credentialAppID, permissions: options.scopes.map(Permission.read)))
        try await DesktopLogin.save(token, account: account, store: store, label: label)
        if let remembered {
            let hostname = provider.host.hostname
            let clientID = hasClientID ? provider.clientID : nil
            try? await onOwnThread {
                try remembered.remember(hostname: hostname, clientID: clientID, url: serverURL)
            }
        }
        let user = try? await provider.user(token: token.tokenString, transport: transport)
        return LoginResult(token: token, userName: user?.name)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        GitHubAccountSession(session: githubSession(account: account, store: store), host: provider.host)
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        // A fixed-token client without retries: status reads, it never changes what is stored.
        let governor = GitHubRateLimitGovernor()
        let client = GitHubClient(
            github: provider, transport: transport, token: token.tokenString, policy: nil, governor: governor)
        return await AccountCheck.checking {
            let user = try await client.user()
            return AccountCheck(validity: .valid, userName: user.name, usage: Self.usage(governor, scopes: user.scopes))
        } refused: { error in
            // GitHub keeps a refused login stored (closesSession is false), but it needs a new login.
            let refused = error.closesSession || error.category == .authenticationReopenSession
            return AccountCheck(
                validity: refused ? .invalid : .unverified, problem: error.userMessage ?? error.message,
                usage: Self.usage(governor, scopes: nil))
        }
    }

    /// The rate limit GitHub reported and the token's scopes, as `status` shows them.
    static func usage(_ governor: GitHubRateLimitGovernor, scopes: [String]?) -> JSONValue? {
        guard let limit = governor.lastLimit() else { return nil }
        var usage: [String: JSONValue] = [
            "limit": .number(Double(limit.limit)), "remaining": .number(Double(limit.remaining)),
            "reset": .number(limit.reset.timeIntervalSince1970.rounded()),
        ]
        if let used = limit.used { usage["used"] = .number(Double(used)) }
        if let resource = limit.resource { usage["resource"] = .string(resource) }
        if let scopes { usage["scopes"] = .array(scopes.map { .string($0) }) }
        return .object(usage)
    }

    func shutdown() async { await emulator?.stop(named: "built-in GitHub emulator", telling: terminal) }
}

/// The host, client id and server address of the last GitHub login (never a secret), in
/// `$XDG_STATE_HOME/sesame/github.json`.
struct GitHubRememberedLogin: Sendable {
    /// Where remembered values say they come from, in messages.
    static let source = "the previous 'sesame login github'"
    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("github.json"))
    }

    func read() -> [String: JSONValue] { file.read() }

    func remember(hostname: String, clientID: String?, url server: String?) throws {
        var object: [String: JSONValue] = ["hostname": .string(hostname)]
        if let clientID { object["client_id"] = .string(clientID) }
        if let server { object["url"] = .string(server) }
        try file.write(object)
    }
}

/// A GitHub session as the generic commands use it.
struct GitHubAccountSession: AccountSession {
    var session: GitHubSession
    var host: GitHubHost

    var key: CredentialKey { session.key }
    var userID: String? { get async { await session.token?.userID } }

    func open() async throws -> Bool { try await session.open(allowLoginUI: false).isOpen }

    func condition(of credential: StoredCredential) -> LoginCondition { session.session.condition(of: credential) }

    func warning(for token: AccessToken) -> String? { session.session.renewer.expiryWarning(for: token, at: Date()) }

    func validToken() async throws -> AccessToken { try await session.validToken() }

    /// Where the person can take back what the login was granted.
    var revocationAdvice: String {
        let base = host.isGitHubDotCom ? "https://github.com" : host.oauthBaseURL.absoluteString.trimmingSuffix("/")
        return "GitHub keeps the app's grant: revoke it at \(base)/settings/applications (or delete a personal token "
            + "at \(base)/settings/tokens)"
    }

    func logOut(revoke: Bool) async throws -> String? {
        try await session.logOut()
        guard revoke else { return revocationAdvice }
        // Revoking a grant needs the app's client secret (DELETE /applications/{client_id}/grant),
        // which a desktop app does not have.
        throw RevocationFailed(
            underlying: SendableErrorBox(GitHubCannotRevoke()),
            advice: revocationAdvice.replacingOccurrences(of: "GitHub keeps the app's grant: r", with: "R"))
    }
}

/// GitHub lets only the app's server (with the client secret) revoke a grant.
struct GitHubCannotRevoke: Error, CustomStringConvertible {
    var description: String { "GitHub lets only an app's server, with its client secret, revoke a grant" }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

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
        let terminal = terminal ?? .current(environment: environment)
        let configuration = try DesktopConfiguration.resolve(overrides: overrides, environment: environment)
        let storage = try await DesktopStorage.select(configuration.storage, keyring: keyring, environment: environment)
        var flags: [String: String] = [:]
        flags["hostname"] = hostname
        flags["client-id"] = clientID
        let connection = try await GitHubPlugin().gitHubConnection(
            ProviderConnectionRequest(
                instance: "github", flags: flags, configuration: configuration, environment: environment,
                terminal: terminal, transport: CurlTransport(), emulators: emulators, purpose: .login))
        let accounts = AccountState(environment: environment)
        return DesktopGitHub(
            connection: connection, storage: storage, accounts: accounts,
            activeAccount: await accounts.activeAccount(for: .github, appID: connection.appID))
    }
}

/// A GitHub host with the desktop defaults: what ``Desktop/github(hostname:clientID:overrides:environment:terminal:keyring:emulators:)``
/// returns.
public struct DesktopGitHub: Sendable {
    let connection: GitHubConnection
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The active account per provider.
    public let accounts: AccountState
    /// The account that was active for this host when ``Desktop/github(hostname:clientID:overrides:environment:terminal:keyring:emulators:)``
    /// read ``accounts``.
    public let activeAccount: String

    /// The host and app.
    public var provider: GitHubProvider { connection.provider }
    /// The HTTP transport (`CurlTransport`).
    public var transport: any HTTPTransport { connection.transport }
    /// Whether this runs against a built-in emulator.
    public var isEmulated: Bool { connection.isEmulated }

    /// GitHub's device flow with the code on the terminal.
    public func deviceLogin() -> DeviceLoginFlow { connection.deviceLogin() }

    /// A session for `account` (the active one by default), logging in with `loginUI` (device
    /// login by default), with the cross-process refresh lock file.
    public func session(account: String? = nil, loginUI: (any LoginUI)? = nil) -> GitHubSession {
        connection.githubSession(
            account: account ?? activeAccount, store: storage.store, loginUI: loginUI ?? deviceLogin())
    }

    /// Stops the built-in emulator (writing its state file). Call before exiting.
    public func shutdown() async { await connection.shutdown() }
}

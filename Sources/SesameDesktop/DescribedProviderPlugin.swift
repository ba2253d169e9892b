import Foundation
import Sesame

/// A plug-in whose facts come from its provider's `OAuth2Description`: its name, display name,
/// login flows and error table. ``DescribedProviderPlugin`` is one; so is a plug-in that keeps its
/// own connection where its provider differs (GitHub's hosts and git).
public protocol DescribedPlugin: ProviderPlugin {
    /// The provider.
    var described: OAuth2Description { get }
}

extension DescribedPlugin {
    public var name: String { described.id.rawValue }
    public var displayName: String { described.displayName }
    public var loginFlows: Set<LoginFlowKind> { described.supportedLoginFlows }
    public var errorTaxonomy: any ErrorTaxonomy { described.classifier ?? OAuth2ErrorTaxonomy(described) }
    public var errorTable: ErrorRuleTable? { described.errorRows ?? .base }
}

/// The desktop plug-in of a provider said as an `OAuth2Description`: settings, login (device,
/// browser with PKCE, a pasted redirect), status through the identity, token, logout with
/// revocation, doctor and explain-error, with no code from the provider's author.
///
/// ```swift
/// Desktop.bootstrap([FacebookPlugin(), DescribedProviderPlugin(dropbox)])
/// ```
///
/// For a provider called `dropbox`:
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | client id | `--client-id` | `SESAME_DROPBOX_CLIENT_ID` | `dropbox.client_id` |
/// | client secret | `--client-secret-stdin` (a public one: `--client-secret`) | `SESAME_DROPBOX_CLIENT_SECRET` | `dropbox.client_secret` |
/// | server (``Server/optional`` or ``Server/required``) | `--url` | `SESAME_DROPBOX_URL` | `dropbox.url` |
/// | an endpoint | `--dropbox-token-url`, … | `SESAME_DROPBOX_TOKEN_URL`, … | `dropbox.token_url`, … |
/// | scopes | (`--scopes` per login) | `SESAME_DROPBOX_SCOPES` | `dropbox.scopes` |
///
/// The flags are the OpenID presets' (`login dropbox --client-id ID`, as `login google --client-id
/// ID`); the provider's own spellings (`--dropbox-client-id`, `--dropbox-client-secret`,
/// `--dropbox-url`) are still taken.
///
/// Where a provider differs, its plug-in sets the hooks below (a built-in emulator, help text);
/// everything else comes from the description.
public struct DescribedProviderPlugin: DescribedPlugin {
    /// Whether the provider's address is configured, for a provider people run themselves.
    public enum Server: Sendable, Hashable {
        /// The description's endpoints are the provider's (Dropbox).
        case fixed
        /// The endpoints are the description's unless a server address is given (GitLab's host).
        case optional
        /// A server address must be given (or the built-in emulator stands in).
        case required
    }

    /// The provider.
    public var described: OAuth2Description
    /// Whether a server address is configured; the description's endpoints are then moved onto it.
    public var server: Server
    /// One line for the providers list; by default the display name and the login flows.
    public var summary: String
    /// What `login --help` says about this provider.
    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)])
    /// Example command lines of `explain-error` for this provider.
    public var explainErrorExamples: [(command: String, comment: String)]
    /// The provider's built-in emulator, used when nothing is configured and the program allows it.
    public var builtInEmulator: BuiltInEmulator?
    /// What `emulator NAME` runs in the foreground.
    public var foregroundEmulator: (any ForegroundEmulator)?

    /// The plug-in of `described`.
    public init(_ described: OAuth2Description, server: Server = .fixed) {
        self.described = described
        self.server = server
        let flows = described.supportedLoginFlows.map(\.rawValue).sorted().joined(separator: " or ")
        summary = "\(described.displayName) (OAuth 2.0: \(flows) login)."
        loginHelp = ("", [])
        explainErrorExamples = []
    }

    /// A setting whose variable and config key are named after `suffix`, and its flag too,
    /// after the provider's name unless `shared` (`--client-id`, as every provider spells it).
    private func setting(
        _ suffix: String, shared: Bool = false, value: String = "VALUE", kind: ProviderSetting.Kind = .text,
        flag: Bool = true, secret: Bool = false, _ summary: String
    ) -> ProviderSetting {
        let key = suffix.replacingOccurrences(of: "-", with: "_")
        return ProviderSetting(
            shared ? suffix : "\(name)-\(suffix)", value: value, kind: kind, flag: flag, secret: secret,
            environment: environmentVariable(key.uppercased(), instance: name), configKey: key, summary)
    }

    public func settings(instance: String) -> [ProviderSetting] {
        var settings = [
            setting("client-id", shared: true, value: "ID", "The client id of an app registered with \(displayName)."),
            setting(
                "client-secret", shared: true, value: "SECRET", secret: !described.clientSecretIsPublic,
                described.clientSecretIsPublic
                    ? "The app's client secret, which \(displayName) does not keep secret for desktop apps."
                    : "The app's client secret, for an app registered with one (never on the command line)."),
            ProviderSetting(
                "client-secret-stdin", kind: .flag,
                "Read the client secret from standard input (a prompt without echo on a terminal)."),
            setting(
                "scopes", value: "a,b", kind: .list, flag: false, "The scopes a login asks for when it names none."),
        ]
        if server != .fixed {
            settings.append(
                setting(
                    "url", shared: true, value: "URL", kind: .url,
                    "\(displayName)'s address: https, or http to a loopback address."))
        }
        // The provider's own spellings of the shared flags, as earlier versions took them.
        for shared in settings where shared.isFlag && ["client-id", "client-secret", "url"].contains(shared.name) {
            settings.append(
                ProviderSetting(
                    "\(name)-\(shared.name)", value: shared.valueName, kind: shared.kind,
                    "The same as --\(shared.name)."))
        }
        for (endpoint, url) in described.endpoints.named {
            settings.append(
                setting(
                    Self.override(endpoint), value: "URL", kind: .url,
                    "The \(endpoint), instead of \(url.absoluteString)."))
        }
        return settings
    }

    /// The setting that overrides `endpoint` ("token endpoint"), without the provider's name: `token-url`.
    static func override(_ endpoint: String) -> String {
        endpoint.replacingOccurrences(of: " endpoint", with: "").replacingOccurrences(of: " ", with: "-") + "-url"
    }

    /// The settings as resolved for one command.
    struct Settings {
        var clientID: Sourced<String>?
        var clientSecret: Sourced<String>?
        var server: Sourced<String>?
        var scopes: [String]
        var described: OAuth2Description

        init(_ plugin: DescribedProviderPlugin, _ request: ProviderConnectionRequest) async throws {
            let section = try request.configuration.section(plugin.name)
            var values: [String: Sourced<String>] = [:]
            for setting in plugin.settings(instance: plugin.name) {
                values[setting.name] = try request.value(of: setting, section: section, sectionPath: plugin.name)
            }
            let name = plugin.name
            // The shared flag, else the provider's spelling of it, else the variable or config key.
            func value(_ flag: String) -> Sourced<String>? {
                request.flags[flag] == nil ? values["\(name)-\(flag)"] ?? values[flag] : values[flag]
            }
            clientID = value("client-id")
            clientSecret = value("client-secret")
            server = value("url")
            scopes = (values["\(name)-scopes"]?.value ?? "").split(whereSeparator: { $0 == "," || $0 == " " })
                .map(String.init)
            described = plugin.described
            if let server, let base = URL(string: server.value) {
                described.endpoints = described.endpoints.rebased(onto: base)
            }
            for (endpoint, _) in plugin.described.endpoints.named {
                if let given = values["\(name)-\(DescribedProviderPlugin.override(endpoint))"],
                    let url = URL(string: given.value)
                {
                    described.endpoints.set(endpoint, to: url)
                }
            }
            if request.flags["client-secret-stdin"] != nil {
                guard let readSecret = request.readSecret else {
                    throw DesktopError("This program cannot read a client secret from standard input.", status: .usage)
                }
                let text = try await readSecret("Client secret for '\(name)': ")
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                guard !text.isEmpty else {
                    throw DesktopError("Standard input gave no client secret; pipe it in.", status: .dataError)
                }
                clientSecret = Sourced(text, source: "standard input")
            }
        }

        /// Nothing says which server or app to use.
        var isEmpty: Bool { server == nil && clientID == nil }

        /// The provider the settings describe.
        ///
        /// - Throws: ``DesktopError`` (78) for a setting that is missing or not allowed.
        func provider(
            _ plugin: DescribedProviderPlugin, transport: any HTTPTransport, insecure: Set<String>
        ) throws -> OAuth2Provider {
            let variable = { plugin.environmentVariable($0, instance: plugin.name) }
            if plugin.server == .required, server == nil {
                throw DesktopError(
                    "No \(plugin.displayName) server is configured: set \(variable("URL")) (or give --url, "
                        + "or \"url\" in the config file's \"\(plugin.name)\" object) to its address.", status: .config)
            }
            if let server, let url = URL(string: server.value) {
                do {
                    try EndpointSecurity.check(
                        url, role: "The \(plugin.displayName) server", provider: described.id,
                        allowingInsecureHosts: insecure)
                } catch { throw DesktopError("\(server.source): \(error.message)", status: .config) }
            }
            guard let clientID else {
                throw DesktopError(
                    "No \(plugin.displayName) client id is configured: set \(variable("CLIENT_ID")) (or give "
                        + "--client-id, or \"client_id\" in the config file's \"\(plugin.name)\" object).",
                    status: .config)
            }
            var described = described
            if !scopes.isEmpty { described.defaultScopes = scopes }
            do {
                return try OAuth2Provider(
                    described, clientID: clientID.value, clientSecret: clientSecret.map { ClientSecret($0.value) },
                    transport: transport, allowingInsecureHosts: insecure)
            } catch { throw DesktopError("\(error.message)", status: .config) }
        }
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        let settings = try await Settings(self, request)
        guard settings.isEmpty, builtInEmulator != nil, let emulators = request.emulators,
            let emulator = try await emulators.emulator(
                of: self, purpose: request.purpose, environment: request.environment),
            let base = emulator.endpoints["base"]
        else {
            let provider = try settings.provider(
                self, transport: request.transport, insecure: request.allowedInsecureHosts)
            return DescribedConnection(
                plugin: self, provider: provider, request: request, emulator: nil, server: settings.server?.value)
        }
        var described = described
        described.endpoints = described.endpoints.rebased(onto: base)
        // An emulator that starts on first use is addressed by a placeholder until then; its
        // transport sends those requests to 127.0.0.1.
        let provider = try OAuth2Provider(
            described, clientID: emulator.appID, transport: emulator.route(request.transport),
            allowingInsecureHosts: Set([LazyEmulator.placeholderOrigin.host].compactMap { $0 }))
        if request.purpose == .login {
            request.terminal.say(
                request.terminal.dim(
                    "Using the built-in \(displayName) emulator (no \(displayName) server is configured; its state is "
                        + "in \(emulator.stateFile.path)); set \(configuredVariables) to use a real \(displayName) "
                        + "server.") + "\n")
        }
        return DescribedConnection(
            plugin: self, provider: provider, request: request, emulator: emulator, server: nil)
    }

    /// "an" before a display name that starts with a vowel, else "a".
    private var article: String { "AEIOU".contains(displayName.prefix(1).uppercased()) ? "an" : "a" }

    /// The variables that configure a real server, for messages.
    private var configuredVariables: String {
        let names = (server == .fixed ? [] : ["URL"]) + ["CLIENT_ID"]
        return names.map { environmentVariable($0, instance: name) }.joined(separator: " and ")
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        let provider: OAuth2Provider
        let settings: Settings
        do {
            settings = try await Settings(self, request)
            if settings.isEmpty, builtInEmulator != nil {
                return [
                    DoctorLine(
                        .info, "\(displayName): nothing is configured, so the built-in \(displayName) emulator is used",
                        fix: "to use \(server == .fixed ? displayName : "\(article) \(displayName) server"), set "
                            + configuredVariables)
                ]
            }
            if settings.isEmpty {
                // An optional provider nobody asked for: nothing to check, and nothing wrong.
                return [
                    DoctorLine(.info, "\(displayName): not configured", fix: "to use it, set \(configuredVariables)")
                ]
            }
            provider = try settings.provider(self, transport: request.transport, insecure: request.allowedInsecureHosts)
        } catch {
            return [DoctorLine(.problem, "\(displayName) configuration: \(error)")]
        }
        let probe =
            settings.server.flatMap { URL(string: $0.value) }.map { ("The \(displayName) server", $0) }
            ?? ("\(displayName)'s token endpoint", provider.described.endpoints.token)
        return [
            DoctorLine(.ok, "\(displayName) client id \(Terminal.printable(provider.clientID))."),
            await DoctorProbe.answers(label: probe.0, url: probe.1, transport: request.transport),
        ]
    }
}

/// A described provider ready for one command.
struct DescribedConnection: ConnectedProvider {
    var plugin: DescribedProviderPlugin
    var provider: OAuth2Provider
    var request: ProviderConnectionRequest
    /// The built-in emulator, when it stands in for the provider.
    var emulator: RunningEmulator?
    /// The configured server address, when there is one.
    var server: String?

    var providerID: ProviderID { provider.id }
    var appID: String { provider.clientID }
    var label: String {
        emulator == nil
            ? "\(plugin.displayName) (\(provider.described.endpoints.token.host ?? "?"))"
            : "the \(plugin.displayName) emulator"
    }
    var isEmulated: Bool { emulator != nil }
    var details: [String: String] { server.map { ["server": $0] } ?? [:] }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        let terminal = request.terminal
        let approval = try emulator.map {
            EmulatorApproval(
                emulator: $0, mode: try EmulatorApproval.mode(environment: request.environment, terminal: terminal),
                terminal: terminal, transport: provider.transport)
        }
        let flow: any LoginUI
        switch options.flow {
        case .existingToken(let text):
            let (token, user) = try await OAuth2TokenLogin(provider: provider) { text }.logInIdentified(
                LoginRequest(provider: provider.id, appID: appID, permissions: options.scopes.map { .read($0) }))
            try await DesktopLogin.save(token, account: account, store: store, label: label)
            return LoginResult(token: token, userName: user?.name ?? user?.login)
        case .browser(let openBrowser):
            guard let dialect = provider.browserDialect else { throw unsupported("browser") }
            let browser = request.configuration.browser
            flow = BrowserLoginFlow(
                dialect: dialect,
                receiver: browser.receiver(
                    openBrowser: openBrowser, appName: isEmulated ? "Sesame (\(label))" : "Sesame", terminal: terminal,
                    emulatorApproval: approval),
                opener: browser.opener(
                    openBrowser: openBrowser, environment: request.environment, emulatorApproval: approval),
                transport: provider.transport)
        case .automatic, .device:
            guard let dialect = provider.deviceDialect else {
                guard case .automatic = options.flow else { throw unsupported("device") }
                return try await logIn(
                    LoginOptions(flow: .browser(openBrowser: true), scopes: options.scopes), account: account,
                    store: store)
            }
            flow = DeviceLoginFlow(
                dialect: dialect,
                presenter: TerminalLoginPresenter(terminal: terminal, providerName: label, emulatorApproval: approval),
                transport: provider.transport)
        }
        let scopes = options.scopes.isEmpty ? provider.described.defaultScopes : options.scopes
        let (token, user) = try await provider.login(flow).logInIdentified(
            LoginRequest(provider: provider.id, appID: appID, permissions: scopes.map { Permission.read($0) }))
        try await DesktopLogin.save(token, account: account, store: store, label: label)
        return LoginResult(token: token, userName: user?.name ?? user?.login)
    }

    private func unsupported(_ flow: String) -> DesktopError {
        DesktopError("\(plugin.displayName) has no \(flow) login; log in another way.", status: .usage)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        DescribedAccountSession(
            session: OAuth2Session(
                provider: provider, store: store, account: account, refreshLocking: request.refreshLocking),
            displayName: plugin.displayName)
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        return await AccountCheck.checking {
            guard let account = try await provider.account(of: token) else {
                return AccountCheck(validity: .notChecked)
            }
            return AccountCheck(validity: .valid, userName: account.name ?? account.login)
        } refused: {
            .refused($0, token: token, by: plugin.displayName)
        }
    }

    func shutdown() async {
        await emulator?.stop(named: "built-in \(plugin.displayName) emulator", telling: request.terminal)
    }
}

/// A described provider's session as the generic commands use it.
struct DescribedAccountSession: ProviderAccountSession {
    var session: OAuth2Session
    var displayName: String
    var providerSession: OAuth2Session { session }

    func logOut(revoke: Bool) async throws -> String? {
        let session = session
        var revoked = false
        try await RevocationFailed.loggingOut(
            revoke: revoke, advice: "remove the app in your \(displayName) account's settings"
        ) { revoked = try await session.logOut(revoke: revoke) }
        return revoked ? "its tokens were revoked" : nil
    }
}

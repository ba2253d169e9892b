import Foundation
import Sesame
import SesameCurl
import SesameDesktop
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
public struct GitHubPlugin: DescribedPlugin {
    /// Creates the plug-in.
    public init() {}

    /// GitHub's description on github.com, which gives the plug-in's name, display name and error table.
    public var described: OAuth2Description { GitHubProvider(clientID: "").described }
    public var summary: String {
        "GitHub or a GitHub Enterprise Server (device login with an OAuth app's client id, or a token from "
            + "standard input); answers git's credential questions; the built-in emulator when nothing is configured."
    }
    public var loginFlows: Set<LoginFlowKind> { [.device, .existingToken] }

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

    /// "rate limit 4997/5000 (core), resets 04:15; scopes repo, read:org".
    public func describeUsage(_ usage: JSONValue) -> String? {
        var parts: [String] = []
        if let limit = usage["limit"]?.doubleValue, let remaining = usage["remaining"]?.doubleValue {
            var text = "rate limit \(UsageText.number(remaining))/\(UsageText.number(limit))"
            if let resource = usage["resource"]?.stringValue { text += " (\(resource))" }
            if let reset = usage["reset"]?.doubleValue {
                text += ", resets \(UsageText.time(Date(timeIntervalSince1970: reset)))"
            }
            parts.append(text)
        }
        if let scopes = usage["scopes"]?.arrayValue?.compactMap(\.stringValue) {
            parts.append(scopes.isEmpty ? "no scopes" : "scopes " + scopes.joined(separator: ", "))
        }
        return parts.isEmpty ? UsageText.pairs(usage) : parts.joined(separator: "; ")
    }

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
            let values = try request.settingValues(GitHubPlugin().settings(instance: "github"), section: "github")
            (hostname, clientID) = (values[GitHubPlugin.hostname], values[GitHubPlugin.clientID])
            (clientSecret, serverURL) = (values[GitHubPlugin.clientSecret], values[GitHubPlugin.serverURL])
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
                of: self, purpose: request.purpose, environment: request.environment,
                storage: request.configuration.storage.value),
            let base = emulator.endpoints["base"], let api = emulator.endpoints["api"]
        else { return try connection(settings, request: request) }
        let provider = GitHubProvider(
            host: GitHubHost(hostname: Self.emulatorHostname, oauthBaseURL: base, apiBaseURL: api),
            clientID: emulator.appID)
        if request.purpose == .login {
            request.terminal.say(
                request.terminal.dim(
                    "Using Sesame's built-in GitHub emulator (no GitHub client id or host is configured; its state "
                        + "is \(Self.stateDescription(emulator, request))); set SESAME_GITHUB_CLIENT_ID (or give --client-id, or "
                        + "--hostname github.com for a token login) to use real GitHub.") + "\n")
        }
        return GitHubConnection(provider: provider, context: try ConnectionContext(request, emulator: emulator))
    }

    /// A connection to the host the settings name, never the emulator.
    func connection(_ settings: Settings, request: ProviderConnectionRequest) throws -> GitHubConnection {
        let clientID = try settings.checkedClientID()
        let provider = GitHubProvider(
            host: try settings.host(), clientID: clientID ?? "",
            clientSecret: settings.clientSecret.map { ClientSecret($0.value) })
        var connection = GitHubConnection(provider: provider, context: try ConnectionContext(request))
        connection.hasClientID = clientID != nil
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
            return [.problem("GitHub configuration", error)]
        }
        guard !settings.isEmpty else {
            return [
                DoctorLine(
                    .info,
                    "GitHub: nothing is configured, so \(Desktop.programName) uses the built-in GitHub emulator",
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
        let error = await provider.probe(transport: request.transport, timeout: .seconds(3))
        if let refused = error?.underlyingError as? TransportError, refused.kind == .certificateRejected {
            // Who presented the refused certificate, and which setting trusts its CA.
            lines.append(
                await DoctorProbe.answers(label: "GitHub API", url: host.apiBaseURL, transport: request.transport))
        } else if let error {
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

extension GitHubPlugin {
    /// Where the built-in emulator keeps its state, for the line that announces it.
    static func stateDescription(_ emulator: RunningEmulator, _ request: ProviderConnectionRequest) -> String {
        request.configuration.storage.value == .memory ? "in memory only" : "in \(emulator.stateFile.path)"
    }
}

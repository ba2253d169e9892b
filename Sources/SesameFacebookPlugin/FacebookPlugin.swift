import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameHTTPServer

/// Facebook's desktop adapter: its settings, the built-in emulator when no app is configured
/// (and the program allows it), device, browser and existing-token login, and its status and
/// doctor checks.
public struct FacebookPlugin: ProviderPlugin {
    /// Creates the plug-in.
    public init() {}

    public var name: String { "facebook" }
    public var displayName: String { "Facebook" }
    public var summary: String {
        "Facebook Login (device login, browser with loopback redirect, or an existing token) and the Graph API; "
            + "the built-in emulator when no app id is configured."
    }
    public var loginFlows: Set<LoginFlowKind> { [.device, .browser, .existingToken] }
    public var errorTaxonomy: any ErrorTaxonomy { FacebookErrorTaxonomy() }
    public var errorTable: ErrorRuleTable? { FacebookErrorTaxonomy.table }
    public var permissionSupport: PermissionSupport { [.list, .request, .revoke] }
    public var permissionOptions: [ProviderSetting] {
        [
            ProviderSetting(
                "audience", value: "WHO", kind: .choice(["everyone", "friends", "only-me"]),
                "Who sees what is published with publish permissions: everyone, friends (the default) or only-me.")
        ]
    }

    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) {
        (
            """
            With no Facebook app id configured, the login goes to Sesame's built-in Facebook
            emulator. Its approval step is offered on the terminal; SESAME_EMULATOR_APPROVE=auto
            approves at once (for scripts).
            """,
            [
                (
                    "\(Desktop.programName) login facebook",
                    "Log in with device login (the built-in emulator when nothing is configured)"
                ),
                ("\(Desktop.programName) login facebook --with-token < token.txt", "Store a token you already have"),
            ]
        )
    }

    public var explainErrorExamples: [(command: String, comment: String)] {
        [
            (
                "\(Desktop.programName) explain-error --provider facebook --status 400 \\\n"
                    + "      --body '{\"error\":{\"code\":190,\"error_subcode\":458,\"type\":\"OAuthException\"}}'",
                "The person removed the app"
            ),
            (
                "\(Desktop.programName) explain-error --provider facebook --status 503 --body-file - --json < response.html",
                "A body from standard input, answered in JSON"
            ),
        ]
    }

    /// The Graph error's type and transient flag, its trace id and the rate-limit usage.
    public func explanationFacts(of error: AuthError) -> ErrorExplanationFacts {
        guard let graph = error.details(as: GraphErrorDetails.self) else { return ErrorExplanationFacts() }
        var rows: [(label: String, value: String)] = []
        if let trace = graph.traceID { rows.append(("trace id", trace)) }
        if let usage = graph.usage { rows.append(("rate-limit usage", usage.description)) }
        return ErrorExplanationFacts(errorType: graph.type, isTransient: graph.isTransient, rows: rows)
    }

    static let appID = ProviderSetting(
        "app-id", value: "ID", kind: .digits, environment: "SESAME_FACEBOOK_APP_ID", configKey: "app_id",
        "The Facebook app id, from the App Dashboard.")
    static let clientToken = ProviderSetting(
        "client-token", value: "TOKEN", secret: true, environment: "SESAME_FACEBOOK_CLIENT_TOKEN",
        configKey: "client_token", "The app's client token (App Dashboard → Settings → Advanced), for device login.")
    static let graphURL = ProviderSetting(
        "graph-url", value: "URL", kind: .url, flag: false, environment: "SESAME_FACEBOOK_GRAPH_URL",
        configKey: "graph_url", "The Graph API origin, when not https://graph.facebook.com.")
    static let dialogURL = ProviderSetting(
        "dialog-url", value: "URL", kind: .url, flag: false, environment: "SESAME_FACEBOOK_DIALOG_URL",
        configKey: "dialog_url", "The login dialog's origin, when not https://www.facebook.com.")
    static let graphVersion = ProviderSetting(
        "graph-version", value: "vN.N", kind: .version, flag: false, environment: "SESAME_FACEBOOK_GRAPH_VERSION",
        configKey: "graph_version",
        "The Graph API version to pin, such as \(GraphAPIVersions.tested); one that has ended is refused.")

    static let configID = ProviderSetting(
        "config-id", value: "ID", kind: .digits, environment: "SESAME_FACEBOOK_CONFIG_ID", configKey: "config_id",
        "A Facebook Login for Business configuration id: the login asks for what it sets, instead of --scopes.")

    /// "app: 12% of calls, 3% CPU time, 5% total time" (Facebook reports each as a percentage
    /// of its limit), and the same for the page and each business use case.
    public func describeUsage(_ usage: JSONValue) -> String? {
        func counters(_ value: JSONValue?) -> String? {
            guard let value else { return nil }
            let parts = [("call_count", "of calls"), ("total_cputime", "CPU time"), ("total_time", "total time")]
                .compactMap { key, label in value[key]?.doubleValue.map { "\(UsageText.number($0))% \(label)" } }
            return parts.isEmpty ? nil : parts.joined(separator: ", ")
        }
        var parts: [String] = []
        if let app = counters(usage["app"]) { parts.append("app: \(app)") }
        if let page = counters(usage["page"]) { parts.append("page: \(page)") }
        for entry in usage["business_use_cases"]?.arrayValue ?? [] {
            var text = "business \(entry["id"]?.stringValue ?? "?")"
            if let type = entry["type"]?.stringValue { text += " (\(type))" }
            text += ": " + (counters(entry) ?? "no counters")
            if let minutes = entry["estimated_time_to_regain_access"]?.doubleValue, minutes > 0 {
                text += ", access back in \(UsageText.number(minutes)) min"
            }
            parts.append(text)
        }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    public func settings(instance: String) -> [ProviderSetting] {
        [Self.appID, Self.clientToken, Self.graphURL, Self.dialogURL, Self.graphVersion, Self.configID]
    }

    /// The settings as `request` resolves them.
    func resolvedSettings(_ request: ProviderConnectionRequest) throws -> SettingValues {
        try request.settingValues(settings(instance: name), section: name)
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        try await connection(request)
    }

    func connection(_ request: ProviderConnectionRequest) async throws -> FacebookConnection {
        let settings = try resolvedSettings(request)
        if let pinned = settings[Self.graphVersion] {
            do {
                try GraphAPIVersions.checkPinned(pinned.value, at: Date())
            } catch {
                throw DesktopError("\(error.message) (The version is set by \(pinned.source).)", status: .config)
            }
        }
        if let appID = settings[Self.appID] {
            var provider = FacebookProvider(
                appID: appID.value,
                graphVersion: settings[Self.graphVersion]?.value ?? FacebookProvider.defaultGraphVersion,
                clientToken: settings[Self.clientToken]?.value,
                dialogBaseURL: settings[Self.dialogURL].flatMap { URL(string: $0.value) }
                    ?? FacebookProvider.facebookDialogBaseURL,
                graphBaseURL: settings[Self.graphURL].flatMap { URL(string: $0.value) }
                    ?? FacebookProvider.facebookGraphBaseURL,
                allowedInsecureHosts: request.allowedInsecureHosts)
            provider.loginConfigurationID = settings[Self.configID]?.value
            return FacebookConnection(
                provider: provider,
                context: try ConnectionContext(
                    request, rateLimitBudget: request.rateLimitBudget(provider: .facebook, appID: appID.value)))
        }
        guard let emulators = request.emulators else {
            throw DesktopError(
                "No Facebook app id is configured; set SESAME_FACEBOOK_APP_ID (or \"app_id\" under \"facebook\" in "
                    + "\(request.configuration.configFileDescription)), or ask for the built-in emulator.",
                status: .config)
        }
        guard
            let emulator = try await emulators.emulator(
                of: self, purpose: request.purpose, environment: request.environment,
                storage: request.configuration.storage.value),
            let base = emulator.endpoints["base"], let graph = emulator.endpoints["graph"]
        else {
            throw DesktopError(
                "No Facebook app id is configured and this program has no built-in Facebook emulator; set "
                    + "SESAME_FACEBOOK_APP_ID.", status: .config)
        }
        let context = try ConnectionContext(
            request, emulator: emulator,
            rateLimitBudget: request.rateLimitBudget(provider: .facebook, appID: emulator.appID))
        // The emulator is on loopback; a prepared one's placeholder host is never resolved (its
        // transport routes it to the emulator once started), so it may be named over plain http.
        var provider = FacebookProvider(
            appID: emulator.appID, clientToken: emulator.clientCredential, dialogBaseURL: base, graphBaseURL: graph,
            allowedInsecureHosts: Set([base.host, graph.host].compactMap { $0 }))
        provider.loginConfigurationID = settings[Self.configID]?.value
        if request.purpose == .login {
            request.terminal.say(
                request.terminal.dim(
                    "Using Sesame's built-in Facebook emulator (no app id is configured; its state is "
                        + "\(Self.stateDescription(emulator, request))); set SESAME_FACEBOOK_APP_ID to use a real app."
                ) + "\n")
        }
        return FacebookConnection(provider: provider, context: context)
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        let settings: SettingValues
        do {
            settings = try resolvedSettings(request)
        } catch {
            return [.problem("Facebook configuration", error)]
        }
        guard let appID = settings[Self.appID] else {
            return [
                DoctorLine(
                    .info,
                    "Facebook: no app id is configured, so \(Desktop.programName) uses the built-in emulator (state in "
                        + "\(XDG.stateDirectory(environment: request.environment).path))",
                    fix: "to use a real app, set SESAME_FACEBOOK_APP_ID (or facebook.app_id in the config file)")
            ]
        }
        var lines = [DoctorLine(.ok, "Facebook app id \(appID.value), from \(appID.source).")]
        if let pinned = settings[Self.graphVersion] {
            lines.append(Self.doctorLine(pinnedVersion: pinned.value, source: pinned.source, at: Date()))
        }
        if settings[Self.clientToken] == nil {
            lines.append(
                DoctorLine(
                    .warning, "Facebook: no client token is configured, so device login cannot work.",
                    fix: "set SESAME_FACEBOOK_CLIENT_TOKEN (App Dashboard → Settings → Advanced → Client token)"))
        }
        let graph = settings[Self.graphURL].flatMap { URL(string: $0.value) } ?? FacebookProvider.facebookGraphBaseURL
        let dialog =
            settings[Self.dialogURL].flatMap { URL(string: $0.value) } ?? FacebookProvider.facebookDialogBaseURL
        for (label, url) in [("Graph API", graph), ("login dialog", dialog)] {
            lines.append(await DoctorProbe.answers(label: "Facebook \(label)", url: url, transport: request.transport))
        }
        return lines
    }
}

extension FacebookPlugin {
    /// What `doctor` says of a pinned Graph version at `date`: a problem once it has ended, a
    /// warning in the six months before, a note when it is newer than Sesame knows.
    public static func doctorLine(pinnedVersion name: String, source: String, at date: Date) -> DoctorLine {
        let newest = GraphAPIVersions.newest(at: date).name
        let fix = "pin \(newest) or remove the pin (\(source)) to use \(GraphAPIVersions.tested)"
        guard FacebookProvider.isValidVersion(name) else {
            return DoctorLine(
                .problem, "Facebook: '\(name)' (from \(source)) is not a Graph API version.", fix: fix, status: .config)
        }
        switch GraphAPIVersions.standing(of: name, at: date) {
        case .available:
            return DoctorLine(.ok, "Facebook Graph API \(name), pinned by \(source).")
        case .endsSoon(let until):
            return DoctorLine(
                .warning,
                "Facebook Graph API \(name), pinned by \(source), stops being available on "
                    + "\(GraphAPIVersions.dayText(until)).", fix: fix)
        case .ended(let until):
            let when = until.map { " on \(GraphAPIVersions.dayText($0))" } ?? ""
            return DoctorLine(
                .problem, "Facebook Graph API \(name), pinned by \(source), stopped being available\(when).",
                fix: fix)
        case .newerThanKnown:
            return DoctorLine(
                .info,
                "Facebook Graph API \(name), pinned by \(source), is newer than the versions this Sesame knows "
                    + "(it was tested against \(GraphAPIVersions.tested)).")
        }
    }

    /// Where the built-in emulator keeps its state, for the line that announces it.
    static func stateDescription(_ emulator: RunningEmulator, _ request: ProviderConnectionRequest) -> String {
        request.configuration.storage.value == .memory ? "in memory only" : "in \(emulator.stateFile.path)"
    }
}

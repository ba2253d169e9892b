import Foundation
import Sesame
import SesameDesktop
import SesameOIDC

/// The generic OpenID Connect provider's desktop adapter: `oidc` (issuer and client given by
/// flags or the environment) and any number of issuers named in the config file, each its own
/// provider id so that their logins never mix.
///
/// | setting | flag | environment (`oidc` / name `work`) | config file |
/// |---|---|---|---|
/// | issuer | `--issuer` | `SESAME_OIDC_ISSUER` / `SESAME_OIDC_WORK_ISSUER` | `oidc.NAME.issuer` |
/// | client id | `--client-id` | `SESAME_OIDC_CLIENT_ID` / `SESAME_OIDC_WORK_CLIENT_ID` | `oidc.NAME.client_id` (`clientID`, the old spelling, is still read) |
/// | client secret | (never a flag) | `SESAME_OIDC_CLIENT_SECRET` / `SESAME_OIDC_WORK_CLIENT_SECRET` | `oidc.NAME.client_secret` |
/// | client secret, typed | `--client-secret-stdin` (login: read from standard input) | | |
/// | scopes | `--scopes` (per login) | `SESAME_OIDC_SCOPES` / `SESAME_OIDC_WORK_SCOPES` | `oidc.NAME.scopes` |
///
/// Last come the issuer and client of the previous login under the same name, so that
/// `sesame token oidc` works after `sesame login oidc --issuer ...`.
public struct OIDCPlugin: ProviderPlugin {
    /// The OpenID provider Sesame knows by name that this plug-in is, or `nil` for any issuer.
    public let preset: OIDCPreset?

    /// Creates the plug-in for any issuer (`oidc` and the config file's named issuers).
    public init() { preset = nil }

    /// Creates the plug-in of a provider Sesame knows: `sesame login google --client-id …`, its
    /// settings under its own name (`--client-id`, `SESAME_GOOGLE_CLIENT_ID`, `google.client_id`),
    /// the issuer, scopes and authorization parameters from `preset`.
    public init(preset: OIDCPreset) { self.preset = preset }

    /// The plug-ins of every OpenID preset Sesame ships (Google, Microsoft, GitLab).
    public static var presets: [OIDCPlugin] { OIDCPreset.all.map(OIDCPlugin.init(preset:)) }

    public var name: String { preset?.name ?? "oidc" }
    public var displayName: String { preset?.displayName ?? "OpenID Connect" }
    public var summary: String {
        preset?.summary
            ?? "Any OpenID Connect provider by issuer URL and client id (device login or browser with PKCE); "
            + "name several in the config file's \"oidc\" object to use them side by side."
    }
    public var loginFlows: Set<LoginFlowKind> { preset?.deviceLogin == false ? [.browser] : [.device, .browser] }
    public var errorTaxonomy: any ErrorTaxonomy { OIDCErrorTaxonomy.openID() }
    public var errorTable: ErrorRuleTable? { OIDCErrorTaxonomy.openIDTable }

    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) {
        if let preset { return Self.help(preset) }
        return (
            """
            OpenID Connect: 'oidc' takes the issuer (discovery at /.well-known/openid-configuration)
            and a client id; device login when the issuer offers it (its discovery lists
            device_authorization_endpoint), else the browser. Register the client as a native app
            with the redirect URI http://127.0.0.1/callback, any port (RFC 8252 §7.3: Sesame
            listens on a free one for each login). Several
            issuers side by side get names in the config file:
              {"oidc": {"work":   {"issuer": "https://id.example.com", "client_id": "desktop",
                                   "scopes": ["openid", "email"]},
                        "gitlab": {"issuer": "https://gitlab.com", "client_id": "..."}}}
            then '\(Desktop.programName) login work'. Each name's tokens are kept apart; token, logout [--revoke],
            switch and status take the name. Try it offline against '\(Desktop.programName) emulator oidc'.
            """,
            [
                (
                    "\(Desktop.programName) login oidc --issuer http://127.0.0.1:8765 --client-id sesame-desktop",
                    "Log in to the OIDC emulator started by '\(Desktop.programName) emulator oidc --port 8765'"
                ),
                (
                    "\(Desktop.programName) login work --web",
                    "Log in to the issuer named 'work' in the config file, in the browser"
                ),
            ]
        )
    }

    public func newInstanceHint(_ name: String) -> String? {
        guard preset == nil, Self.isValidName(name) else { return nil }
        return "An OpenID issuer gets a name in the config file: "
            + #"{"oidc": {"\#(name)": {"issuer": "https://...", "client_id": "..."}}}"#
    }

    /// The environment variable for `setting` of issuer `name`.
    public static func variable(_ setting: String, instance: String) -> String {
        instance == "oidc"
            ? "SESAME_OIDC_\(setting)"
            : "SESAME_OIDC_\(instance.uppercased().replacingOccurrences(of: "-", with: "_"))_\(setting)"
    }

    public func settings(instance: String) -> [ProviderSetting] {
        let secretIsPublic = preset?.clientSecretIsPublic ?? false
        var settings = [
            ProviderSetting(
                "issuer", value: "URL", kind: .url, environment: environmentVariable("ISSUER", instance: instance),
                configKey: "issuer",
                preset.map { "The issuer URL, instead of \($0.issuer)." }
                    ?? "The issuer URL (discovery at /.well-known/openid-configuration)."),
            ProviderSetting(
                "client-id", value: "ID", environment: environmentVariable("CLIENT_ID", instance: instance),
                configKey: "client_id", "The client id registered with the issuer."),
            ProviderSetting(
                "client-secret", value: "SECRET", secret: !secretIsPublic,
                environment: environmentVariable("CLIENT_SECRET", instance: instance), configKey: "client_secret",
                secretIsPublic
                    ? "The client secret \(displayName) gives a desktop app, which it does not keep secret."
                    : "The client secret, for clients the issuer registered with one (never on the command line)."),
            ProviderSetting(
                "client-secret-stdin", kind: .flag,
                "Read the client secret from standard input (a prompt without echo on a terminal)."),
            ProviderSetting(
                "scopes", value: "a,b", kind: .list, flag: false,
                environment: environmentVariable("SCOPES", instance: instance),
                configKey: "scopes", "The scopes a login asks for when it names none."),
            ProviderSetting(
                "client-credentials", kind: .flag,
                "Log in as the client itself, with no person (the client credentials grant); renewed by making "
                    + "the grant again. The client authenticates with its secret or private key."),
            ProviderSetting(
                "client-auth", value: "METHOD",
                kind: .choice(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]),
                environment: Self.variable("CLIENT_AUTH", instance: instance), configKey: "client_auth",
                "How the client authenticates at the token endpoint; by default private_key_jwt with a key file, "
                    + "else what discovery lists for the secret."),
            ProviderSetting(
                "client-key-file", value: "PATH", environment: Self.variable("CLIENT_KEY_FILE", instance: instance),
                configKey: "client_key_file",
                "The client's private key (PEM, RSA or P-256; yours and 0600, as libpq asks) for private_key_jwt."),
            ProviderSetting(
                "client-key-id", value: "KID", environment: Self.variable("CLIENT_KEY_ID", instance: instance),
                configKey: "client_key_id", "The key id (kid) the issuer knows the client's key by."),
            ProviderSetting(
                "subject-token", value: "SOURCE", environment: Self.variable("SUBJECT_TOKEN", instance: instance),
                configKey: "subject_token",
                "Where --token-exchange reads the workload's identity token: github-actions, kubernetes, or "
                    + "file:PATH (read afresh at each renewal; never stored)."),
            ProviderSetting(
                "subject-token-audience", value: "AUD",
                environment: Self.variable("SUBJECT_TOKEN_AUDIENCE", instance: instance),
                configKey: "subject_token_audience", "The audience GitHub Actions is asked to put in its token."),
            ProviderSetting(
                "subject-token-type", value: "TYPE", kind: .choice(["jwt", "id_token"]),
                environment: Self.variable("SUBJECT_TOKEN_TYPE", instance: instance),
                configKey: "subject_token_type", "The subject token's type: jwt (the default) or id_token."),
            ProviderSetting(
                "token-exchange", kind: .flag,
                "Log in as a workload, with no person and no secret: its identity token (--subject-token) "
                    + "exchanged at the token endpoint (RFC 8693); renewed by exchanging a fresh one."),
        ]
        if let part = preset?.issuerPart {
            settings.append(
                ProviderSetting(
                    part.name, value: part.name.uppercased(),
                    environment: environmentVariable(part.name.uppercased(), instance: instance), configKey: part.name,
                    "The \(part.name) (\(part.defaultValue) unless given): \(part.help)"))
        }
        return settings
    }

    /// Whether `name` can name an issuer: lower-case letters, digits, `-` and `_`, a letter first.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter, first.isLowercase, name.count <= 40 else {
            return false
        }
        return name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" || $0 == "_" }
    }

    public func mayBeInstance(_ instance: String) -> Bool {
        preset.map { $0.name == instance } ?? Self.isValidName(instance)
    }

    /// The issuers named in the config file's `oidc` object, and those logged in to before.
    public func instanceNames(configuration: DesktopConfiguration) throws -> [String] {
        if preset != nil { return [] }
        let configured = try Self.configured(configuration).keys
        let remembered = OIDCRememberedIssuers(stateDirectory: configuration.stateDirectory).read().keys
            .filter(Self.isValidName)
        return Set(configured).union(remembered).subtracting(Desktop.providers.map(\.name)).sorted()
    }

    /// The config file's `oidc` object, by name, each entry checked.
    static func configured(_ configuration: DesktopConfiguration) throws -> [String: [String: JSONValue]] {
        var issuers: [String: [String: JSONValue]] = [:]
        for (name, value) in try configuration.section("oidc") {
            // A preset's name may still name an issuer here, as before the preset: the preset uses it.
            let taken = Desktop.providers.contains { $0.name == name && ($0 as? OIDCPlugin)?.preset == nil }
            guard isValidName(name), !taken,
                let entry = value.objectValue
            else {
                throw DesktopError(
                    "\(configuration.configFileDescription) has an oidc entry '\(name.sanitizedForTerminal)' that is not "
                        + "usable: names are lower-case letters, digits, '-' and '_', not a provider's name, and each "
                        + #"is an object such as {"issuer": "https://...", "client_id": "...", "scopes": ["openid"]}."#,
                    status: .config)
            }
            issuers[name] = entry
        }
        return issuers
    }

    /// A preset's own (`SESAME_GOOGLE_CLIENT_ID`), else ``variable(_:instance:)``.
    public func environmentVariable(_ setting: String, instance: String) -> String {
        guard let preset else { return Self.variable(setting, instance: instance) }
        return "SESAME_\(preset.name.uppercased())_\(setting)"
    }

    /// A named issuer's object in the config file (`oidc.work`), a preset's (`google`); the
    /// unnamed `oidc` has none.
    public func configSection(
        instance: String, configuration: DesktopConfiguration
    ) throws -> (path: String, section: [String: JSONValue]) {
        if let preset {
            // Its own object, or the issuer named after it in the oidc object before there was a preset.
            let own = try configuration.section(preset.name)
            if own.isEmpty, let named = try Self.configured(configuration)[preset.name] {
                return ("oidc.\(preset.name)", named)
            }
            return (preset.name, own)
        }
        return ("oidc.\(instance)", instance == name ? [:] : try Self.configured(configuration)[instance] ?? [:])
    }

    /// Checks every issuer's entry of the `oidc` object: its keys (`clientID` still allowed, for
    /// `client_id`) and their values.
    public func checkConfiguration(_ configuration: DesktopConfiguration) throws {
        if let preset {
            return try ProviderSetting.checkSection(
                try configuration.section(preset.name), path: preset.name, settings: settings(instance: preset.name),
                configuration: configuration)
        }
        for (name, entry) in try Self.configured(configuration) {
            try ProviderSetting.checkSection(
                entry, path: "oidc.\(name)", settings: settings(instance: name), configuration: configuration,
                aliases: [Settings.oldClientIDKey: "client_id"])
        }
    }

    /// The resolved settings of one issuer.
    struct Settings {
        var issuer: Sourced<String>
        var clientID: Sourced<String>
        var clientSecret: Sourced<String>?
        var scopes: [String]
        /// `--client-credentials`: a login with no person.
        var clientCredentials: Bool
        /// `client_auth`, when set.
        var clientAuth: ClientAuthenticationMethod?
        /// `client_key_file`, when set.
        var clientKeyFile: Sourced<String>?
        /// `client_key_id`, when set.
        var clientKeyID: String?
        /// `--token-exchange`: the exchange to make, from the subject token settings.
        var tokenExchange: MachineGrant?

        init(_ request: ProviderConnectionRequest, plugin: OIDCPlugin = OIDCPlugin()) async throws {
            let instance = request.instance
            var (path, section) = try plugin.configSection(instance: instance, configuration: request.configuration)
            if let old = section[Self.oldClientIDKey], section["client_id"] == nil {
                // The spelling before every provider's keys were snake_case: still read, with a word.
                section["client_id"] = old
                request.terminal.say(
                    "\(Desktop.programName): \(request.configuration.configFileDescription): \"oidc.\(instance).clientID\" is the old "
                        + "spelling; write \"client_id\" (the old one will stop working in a later version).\n")
            }
            let remembered = OIDCRememberedIssuers(stateDirectory: request.configuration.stateDirectory).read()[
                instance]
            if plugin.preset == nil { path = "oidc.\(instance)" }
            let settings = plugin.settings(instance: instance)
            func value(_ index: Int, rememberedKey: String? = nil) throws -> Sourced<String>? {
                let fallback = rememberedKey.flatMap { remembered?[$0]?.stringValue }.map {
                    Sourced($0, source: "the previous '\(Desktop.programName) login \(instance)'")
                }
                return try request.value(of: settings[index], section: section, sectionPath: path, fallback: fallback)
            }
            if let preset = plugin.preset {
                // A preset's issuer is its own, with the tenant or host filled in, unless one is given.
                // A tenant or host given now outweighs the issuer the previous login remembered.
                let part = try preset.issuerPart.flatMap { _ in try value(settings.count - 1)?.value }  // appended last
                let given = part == nil ? try value(0, rememberedKey: "issuer") : try value(0)
                do {
                    let issuer = try preset.issuer(given?.value, part: part)
                    self.issuer = Sourced(issuer, source: given?.source ?? "the \(preset.displayName) preset")
                } catch { throw DesktopError("\(error)", status: .usage) }
            } else if let issuer = try value(0, rememberedKey: "issuer") {
                self.issuer = issuer
            } else {
                throw Self.missing(
                    "issuer URL", flag: "--issuer URL", variable: settings[0].environment!, key: "issuer",
                    path: path, request: request)
            }
            guard let clientID = try value(1, rememberedKey: "clientID") else {
                throw Self.missing(
                    "client id", flag: "--client-id ID", variable: settings[1].environment!,
                    key: "client_id", path: path, request: request)
            }
            self.clientID = clientID
            self.clientSecret = try await request.clientSecret(orElse: try value(2), checkedBy: settings[2])
            self.scopes = (try value(4)?.value ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
            self.clientCredentials = request.flags["client-credentials"] != nil
            self.clientAuth = try value(6).map { ClientAuthenticationMethod(rawValue: $0.value) }
            self.clientKeyFile = try value(7)
            self.clientKeyID = try value(8)?.value
            if request.flags["token-exchange"] != nil {
                guard let source = try value(9) else {
                    throw DesktopError(
                        "--token-exchange needs to know where the workload's identity token is: give "
                            + "--subject-token github-actions (or kubernetes, or file:PATH), or set "
                            + "\(settings[9].environment!).", status: .usage)
                }
                let parsed: SubjectTokenSource
                do {
                    parsed = try SubjectTokenSource(parsing: source.value)
                } catch let error as AuthError {
                    throw DesktopError("\(source.source): \(error.message)", status: .usage)
                }
                self.tokenExchange = .tokenExchange(
                    source: parsed,
                    subjectTokenType: try value(11)?.value == "id_token"
                        ? MachineGrant.idTokenType : MachineGrant.jwtTokenType,
                    audience: try value(10)?.value)
            }
            if clientAuth == .privateKeyJWT, clientKeyFile == nil {
                throw DesktopError(
                    "'\(instance)' is set to authenticate with private_key_jwt but names no key: set "
                        + "\(settings[7].environment!), --client-key-file, or \"client_key_file\" in oidc.\(instance).",
                    status: .config)
            }
        }

        /// The old spelling of `client_id` in the config file.
        static let oldClientIDKey = "clientID"

        static func missing(
            _ what: String, flag: String, variable: String, key: String, path: String,
            request: ProviderConnectionRequest
        ) -> DesktopError {
            let instance = request.instance
            let elsewhere =
                instance == "oidc"
                ? "set \(variable), as in '\(Desktop.programName) login oidc --issuer https://id.example.com --client-id ID'"
                : "set \(variable), or add \"\(key)\" to \(path) in "
                    + request.configuration.configFileDescription
            return DesktopError(
                "No \(what) is configured for '\(instance)'; give \(flag) to '\(Desktop.programName) login \(instance)' or \(elsewhere).",
                status: .usage)
        }
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        try await connection(request)
    }

    func connection(_ request: ProviderConnectionRequest) async throws -> OIDCConnection {
        let settings = try await Settings(request, plugin: self)
        let instance = request.instance
        var configuration = OIDCConfiguration(
            providerID: ProviderID(instance), displayName: preset?.displayName ?? (instance == "oidc" ? nil : instance),
            issuer: settings.issuer.value, clientID: settings.clientID.value,
            clientSecret: settings.clientSecret.map { ClientSecret($0.value) })
        if let preset {
            configuration.scopes = preset.scopes
            configuration.extraAuthorizationParameters = preset.authorizationParameters
        }
        if !settings.scopes.isEmpty { configuration.scopes = settings.scopes }
        configuration.clientAuthMethod = settings.clientAuth
        if let keyFile = settings.clientKeyFile, settings.clientAuth == nil || settings.clientAuth == .privateKeyJWT {
            do {
                configuration.clientAssertionSigner = try ClientAssertionSigner(
                    keyFile: keyFile.value, keyID: settings.clientKeyID, setting: keyFile.source)
            } catch let error as AuthError {
                throw DesktopError(error.message, status: .config)
            }
        }
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
        var provider = try await OIDCProvider.discover(configuration, transport: request.transport)
        // A preset whose desktop clients cannot use the issuer's device login (Google's) logs in
        // with the browser.
        if preset?.deviceLogin == false, provider.endpoints.deviceAuthorizationEndpoint != nil {
            var endpoints = provider.endpoints
            endpoints.deviceAuthorizationEndpoint = nil
            provider = try OIDCProvider(
                configuration: configuration, endpoints: endpoints, transport: request.transport)
        }
        if discovered {
            let endpoints = provider.endpoints
            try? await onOwnThread { try cache.remember(endpoints, at: Date()) }
        }
        return OIDCConnection(
            provider: provider, context: try ConnectionContext(request), settings: settings,
            remembered: OIDCRememberedIssuers(stateDirectory: request.configuration.stateDirectory))
    }

    /// The logins stored before Sesame recorded issuers (their key has none), and what to do.
    static func legacyLoginLines(_ request: ProviderConnectionRequest, issuer: String) -> [DoctorLine] {
        let name = request.instance
        return (request.storedLogins ?? []).filter { $0.key.issuer == nil }.map { legacy in
            let account = legacy.key.account.sanitizedForTerminal
            let option = account == "default" ? "" : " --account \(account)"
            if let recorded = OIDCLegacyLogins.issuer(of: legacy.token), recorded == issuer {
                return DoctorLine(
                    .info,
                    "OpenID login '\(account)' of '\(name)' was stored before Sesame recorded issuers; its ID token "
                        + "names \(issuer), so it is taken over for it when next used",
                    fix: "run '\(Desktop.programName) token \(name)\(option)' once")
            }
            return DoctorLine(
                .warning,
                "OpenID login '\(account)' of '\(name)' was stored before Sesame recorded issuers and cannot be told "
                    + "to come from \(issuer), so it is not used.",
                fix:
                    "log in again with '\(Desktop.programName) login \(name)\(option)'; '\(Desktop.programName) logout \(name)\(option)' removes "
                    + "the old one")
        }
    }

    /// Whether the issuer's discovery works as a login would use it: the document is there and
    /// names the issuer exactly. A wrong issuer (the site root, a trailing slash) says which
    /// address failed and to check the issuer.
    static func discoveryLine(
        _ request: ProviderConnectionRequest, issuer: String
    ) async -> (line: DoctorLine, endpoints: OIDCEndpoints?) {
        let url = OIDCEndpoints.discoveryURL(issuer: issuer)
        let address = url?.absoluteString ?? issuer
        let label = "'\(request.instance)' discovery at \(address)"
        do {
            let endpoints = try await OIDCEndpoints.discover(
                issuer: issuer, transport: request.transport, provider: ProviderID(request.instance),
                allowingInsecureHosts: request.allowedInsecureHosts)
            return (DoctorLine(.ok, "\(label) answers, naming the issuer \(issuer)."), endpoints)
        } catch {
            // A refused certificate: who presented it, and the setting that makes Sesame trust its CA.
            if let url,
                let line = await DoctorProbe.certificateLine(
                    label: "'\(request.instance)' discovery", url: url, error: error, transport: request.transport)
            {
                return (line, nil)
            }
            return (Self.discoveryProblem(label, error), nil)
        }
    }

    /// Whether the issuer takes the client authentication this client will use: the method
    /// configured, or chosen (``OIDCProvider/clientAuthMethod``), against the discovery document's
    /// `token_endpoint_auth_methods_supported` (absent: `client_secret_basic` only, Discovery §3).
    /// A public client (`none`) that logs in with a person is not checked: many issuers do not
    /// list `none` though they take it from native apps.
    static func clientAuthenticationLine(
        _ request: ProviderConnectionRequest, settings: Settings, endpoints: OIDCEndpoints
    ) -> DoctorLine? {
        let advertised = endpoints.tokenEndpointAuthMethodsSupported
        let method =
            settings.clientAuth ?? (settings.clientKeyFile != nil ? .privateKeyJWT : nil)
            ?? ClientAuthenticationMethod.chosen(hasSecret: settings.clientSecret != nil, supported: advertised)
        guard method != .none else { return nil }
        let name = request.instance
        let supported = advertised ?? [ClientAuthenticationMethod.clientSecretBasic.rawValue]
        if supported.contains(method.rawValue) {
            return DoctorLine(.ok, "'\(name)' authenticates the client with \(method), which the issuer supports.")
        }
        let listed =
            advertised == nil
            ? "is absent, which means client_secret_basic only" : "lists \(supported.joined(separator: ", "))"
        return DoctorLine(
            .problem,
            "'\(name)' authenticates the client with \(method), but the issuer's "
                + "token_endpoint_auth_methods_supported \(listed).",
            fix: "set client_auth to one of those (with the secret or key it needs), or register the client for "
                + "\(method) at the issuer")
    }

    private static func discoveryProblem(_ label: String, _ error: any Error) -> DoctorLine {
        switch error {
        case let error as AuthError where error.category == .invalid:
            DoctorLine(
                .problem, "\(label): \(error.message)",
                fix: "set the issuer exactly as the provider's discovery document names it")
        default:
            DoctorLine(
                .problem, "\(label) does not answer (\(error.sentence)).",
                fix: "check the network, a proxy (HTTPS_PROXY, or the proxy setting), or the issuer")
        }
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        do {
            let settings = try await Settings(request, plugin: self)
            var lines = [
                DoctorLine(
                    .ok,
                    "OpenID issuer '\(request.instance)': \(settings.issuer.value), from \(settings.issuer.source).")
            ]
            let discovery = await Self.discoveryLine(request, issuer: settings.issuer.value)
            lines.append(discovery.line)
            if let endpoints = discovery.endpoints,
                let line = Self.clientAuthenticationLine(request, settings: settings, endpoints: endpoints)
            {
                lines.append(line)
            }
            lines += Self.legacyLoginLines(request, issuer: settings.issuer.value)
            return lines
        } catch let error as DesktopError where error.status == .usage && (preset != nil || request.instance == "oidc")
        {
            // Nothing says which issuer or client to use: not a problem until someone logs in.
            guard let preset else { return [] }
            return [
                DoctorLine(
                    .info, "\(preset.displayName): not configured",
                    fix:
                        "to use it, set \(environmentVariable("CLIENT_ID", instance: preset.name)) (or give --client-id to a login)"
                )
            ]
        } catch {
            return [.problem("OpenID issuer '\(request.instance)'", error)]
        }
    }

    /// What `login --help` says about a preset.
    static func help(_ preset: OIDCPreset) -> (discussion: String, examples: [(command: String, comment: String)]) {
        let name = preset.name
        var discussion =
            "\(preset.displayName): OpenID Connect at \(preset.issuer), scopes \(preset.scopes.joined(separator: " "))"
        if !preset.authorizationParameters.isEmpty {
            discussion +=
                ", asking " + preset.authorizationParameters.map { "\($0.0)=\($0.1)" }.joined(separator: " and ")
        }
        discussion += ". Register a desktop (native) app with the redirect URI http://127.0.0.1/callback, any port"
        if preset.clientSecretIsPublic {
            discussion += "; its client secret is not secret for a desktop app and may be given with --client-secret"
        }
        if let part = preset.issuerPart { discussion += "; --\(part.name): \(part.help)" }
        var example = "\(Desktop.programName) login \(name) --client-id ID"
        if preset.clientSecretIsPublic { example += " --client-secret SECRET" }
        var examples = [(example, "Log in to \(preset.displayName)")]
        if let part = preset.issuerPart {
            examples.append(
                ("\(Desktop.programName) login \(name) --client-id ID --\(part.name) VALUE", "At another \(part.name)"))
        }
        return (discussion + ".", examples)
    }
}

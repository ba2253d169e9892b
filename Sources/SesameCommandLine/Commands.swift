import Foundation
import Sesame
import SesameCurl
import SesameDesktop

private let storageOption = OptionSpec(
    "storage", value: "MODE",
    "Where logins are kept: keyring (default), keyring-or-file, file (a 0600 file, opt-in) or memory.")
private let accountOption = OptionSpec("account", value: "NAME", "The account (default: the active one).")

private func storageMode(_ parsed: ParsedArguments, command: String) throws(UsageError) -> StorageMode? {
    guard let text = parsed.value("storage") else { return nil }
    guard let mode = StorageMode(rawValue: text) else {
        throw UsageError(
            "--storage must be one of \(StorageMode.allCases.map(\.rawValue).joined(separator: ", ")); "
                + "'\(text)' is not", command: command)
    }
    return mode
}

private func noExtra(_ parsed: ParsedArguments, after count: Int, command: String) throws(UsageError) {
    if parsed.positionals.count > count {
        throw UsageError("unexpected argument '\(parsed.positionals[count])'", command: command)
    }
}

/// The provider commands' specs and builders.
enum ProviderCommands {
    static let login = CommandDefinition(
        spec: CommandSpec(
            name: "login", summary: "Log in to a provider and keep the login in the keyring.",
            synopses: [
                "facebook [--app-id ID] [--scopes a,b] [--device | --web] [--no-browser]",
                " [--with-token] [--account NAME] [--storage MODE]",
                "oidc --issuer URL --client-id ID [--scopes a,b] [--device | --web] [--no-browser]",
                " [--account NAME] [--storage MODE]",
                "NAME [--scopes a,b] [--device | --web] [--no-browser] [--account NAME]",
            ],
            discussion: """
                Device login is the default: a code to enter at an address, on any device. --web logs in
                with the browser and a loopback redirect (PKCE). --with-token reads a token you already
                have from standard input (never from the command line, which other users can see) and
                checks it with the provider before storing it.

                With no app id configured (--app-id, SESAME_FACEBOOK_APP_ID or the config file), the
                login goes to Sesame's built-in Facebook emulator. Its approval step is offered on the
                terminal; SESAME_EMULATOR_APPROVE=auto approves at once (for scripts).

                OpenID Connect: 'oidc' takes the issuer (discovery at /.well-known/openid-configuration)
                and a public client id; device login when the issuer offers it, else the browser.
                Several issuers side by side get names in $XDG_CONFIG_HOME/sesame/config.json:
                  {"oidc": {"work":   {"issuer": "https://id.example.com", "clientID": "desktop",
                                       "scopes": ["openid", "email"]},
                            "gitlab": {"issuer": "https://gitlab.com", "clientID": "..."}}}
                then 'sesame login work'. Flags win over SESAME_OIDC_<NAME>_ISSUER, _CLIENT_ID and
                _SCOPES (SESAME_OIDC_ISSUER... for 'oidc'), which win over the file. Each name's
                tokens are kept apart; token, logout [--revoke], switch and status take the name.
                Try it offline against 'sesame emulator --oidc'.
                """,
            options: [
                OptionSpec("app-id", value: "ID", "The Facebook app id (overrides SESAME_FACEBOOK_APP_ID)."),
                OptionSpec("scopes", value: "a,b", "Permissions to ask for, comma-separated."),
                OptionSpec("device", "Device login: a code to enter on any device (the default)."),
                OptionSpec("web", "Browser login with a loopback redirect."),
                OptionSpec("no-browser", "Print the login address instead of opening a browser."),
                OptionSpec("with-token", "Read an access token from standard input."),
                OptionSpec("issuer", value: "URL", "An OpenID issuer (overrides the environment and config file)."),
                OptionSpec("client-id", value: "ID", "The OpenID client id, a public client (PKCE, no secret)."),
                accountOption, storageOption,
            ],
            examples: [
                (
                    "sesame login facebook",
                    "Log in with device login (the built-in emulator when nothing is configured)"
                ),
                ("pbpaste | sesame login facebook --with-token", "Store a token you already have"),
                (
                    "sesame login oidc --issuer http://127.0.0.1:8765 --client-id sesame-desktop",
                    "Log in to the OIDC emulator started by 'sesame emulator --oidc --port 8765'"
                ),
                ("sesame login work --web", "Log in to the issuer named 'work' in the config file, in the browser"),
            ])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "login")
        try noExtra(parsed, after: 1, command: "login")
        if parsed.flags.contains("device") && parsed.flags.contains("web") {
            throw UsageError("--device and --web choose different logins; give one of them", command: "login")
        }
        if parsed.flags.contains("with-token") && (parsed.flags.contains("web") || parsed.flags.contains("device")) {
            throw UsageError(
                "--with-token reads a token and runs no login; leave out --device and --web", command: "login")
        }
        var login = ProviderCommand.Login()
        login.appID = parsed.value("app-id")
        login.scopes = (parsed.value("scopes") ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
        login.web = parsed.flags.contains("web")
        login.noBrowser = parsed.flags.contains("no-browser")
        login.withToken = parsed.flags.contains("with-token")
        login.device = parsed.flags.contains("device")
        login.issuer = parsed.value("issuer")
        login.clientID = parsed.value("client-id")
        if provider == "facebook", login.issuer != nil || login.clientID != nil {
            throw UsageError(
                "--issuer and --client-id are for OpenID providers, as in 'sesame login oidc --issuer URL "
                    + "--client-id ID'; Facebook takes --app-id", command: "login")
        }
        return .provider(
            ProviderCommand(
                provider: provider, action: .login(login), account: try parsed.account(command: "login"),
                storage: try storageMode(parsed, command: "login")))
    }

    static let token = CommandDefinition(
        spec: CommandSpec(
            name: "token", summary: "Print the access token (the only command that prints a secret).",
            synopses: ["PROVIDER [--account NAME] [--storage MODE]"],
            discussion: "Refreshes it first when it is about to expire. Keep the output out of logs.",
            options: [accountOption, storageOption],
            examples: [("curl -H \"Authorization: Bearer $(sesame token facebook)\" ...", "Use it in a script")])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "token")
        try noExtra(parsed, after: 1, command: "token")
        return .provider(
            ProviderCommand(
                provider: provider, action: .token, account: try parsed.account(command: "token"),
                storage: try storageMode(parsed, command: "token")))
    }

    static let logout = CommandDefinition(
        spec: CommandSpec(
            name: "logout", summary: "Remove a stored login (and with --revoke, the app's access).",
            synopses: ["PROVIDER [--account NAME] [--revoke] [--storage MODE]"],
            options: [
                accountOption,
                OptionSpec(
                    "revoke",
                    "Also revoke the access at the provider (Facebook: DELETE me/permissions; OpenID: RFC 7009 "
                        + "when the issuer advertises it)."),
                storageOption,
            ])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "logout")
        try noExtra(parsed, after: 1, command: "logout")
        return .provider(
            ProviderCommand(
                provider: provider, action: .logout(revoke: parsed.flags.contains("revoke")),
                account: try parsed.account(command: "logout"), storage: try storageMode(parsed, command: "logout")))
    }

    static let switchAccount = CommandDefinition(
        spec: CommandSpec(
            name: "switch", summary: "Make another stored login the active one.",
            synopses: ["PROVIDER ACCOUNT [--storage MODE]"], options: [storageOption])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "switch")
        guard parsed.positionals.count >= 2 else {
            throw UsageError("name the account to switch to, as in 'sesame switch facebook work'", command: "switch")
        }
        try noExtra(parsed, after: 2, command: "switch")
        return .provider(
            ProviderCommand(
                provider: provider,
                action: .switchAccount(
                    try AccountName.validated(parsed.positionals[1], what: "ACCOUNT", command: "switch")), account: nil,
                storage: try storageMode(parsed, command: "switch")))
    }

    static let permissions = CommandDefinition(
        spec: CommandSpec(
            name: "permissions", summary: "List, request or revoke the permissions of a login.",
            synopses: [
                "facebook [list] [--account NAME]",
                " facebook request NAME... [--audience everyone|friends|only-me] [--account NAME]",
                " facebook revoke NAME [--account NAME]",
            ],
            discussion: """
                request asks the person again (auth_type=rerequest); publish permissions such as
                publish_actions carry a default audience (friends unless --audience says otherwise).
                """,
            options: [
                OptionSpec("audience", value: "WHO", "Who sees what is published: everyone, friends or only-me."),
                accountOption, storageOption,
            ])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "permissions")
        let rest = Array(parsed.positionals.dropFirst())
        let action: ProviderCommand.PermissionsAction
        switch rest.first {
        case nil, "list":
            try noExtra(parsed, after: 2, command: "permissions")
            action = .list
        case "request":
            let names = Array(rest.dropFirst())
            guard !names.isEmpty else {
                throw UsageError(
                    "name the permissions to request, as in 'request publish_actions'", command: "permissions")
            }
            let audience: DefaultAudience
            switch parsed.value("audience") {
            case nil, "friends": audience = .friends
            case "everyone": audience = .everyone
            case "only-me": audience = .onlyMe
            case let other?:
                throw UsageError(
                    "--audience must be everyone, friends or only-me; '\(other)' is not", command: "permissions")
            }
            action = .request(names, audience: audience)
        case "revoke":
            guard rest.count == 2 else {
                throw UsageError(
                    "name one permission to revoke, as in 'revoke publish_actions'", command: "permissions")
            }
            action = .revoke(rest[1])
        case let other?:
            throw UsageError("unknown action '\(other)'; use list, request or revoke", command: "permissions")
        }
        if parsed.value("audience") != nil, case .request = action {
        } else if parsed.value("audience") != nil {
            throw UsageError("--audience goes with 'request'", command: "permissions")
        }
        return .provider(
            ProviderCommand(
                provider: provider, action: .permissions(action), account: try parsed.account(command: "permissions"),
                storage: try storageMode(parsed, command: "permissions")))
    }
}

/// `sesame status`.
package struct StatusCommand: Sendable, Equatable {
    package var json: Bool
    package var storage: StorageMode?

    /// The `--json` document's schema version; a change that removes or renames a key bumps it.
    package static let schemaVersion = 1

    static let definition = CommandDefinition(
        spec: CommandSpec(
            name: "status", summary: "Show the stored logins: user, app, permissions, expiry, storage, usage.",
            synopses: ["[--json] [--storage MODE]"],
            discussion: """
                --json prints one JSON object, stable across releases (keys are only ever added):
                  {"version": 1, "providers": [{"provider", "app_id", "emulator" (address or null),
                   "storage": {"backend", "reason"},
                   "accounts": [{"account", "active", "user_id", "user_name", "granted", "declined",
                     "expires_at", "data_access_expires_at" (ISO 8601 or null), "needs_login",
                     "token_valid" (true, false or null when unknown), "problem", "last_usage"}]}]}
                No token appears in it.
                """,
            options: [OptionSpec("json", "Print one JSON object (schema above)."), storageOption])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "status")
        return .status(
            StatusCommand(json: parsed.flags.contains("json"), storage: try storageMode(parsed, command: "status")))
    }

    func run(context: CommandContext) async throws -> Int32 {
        var providers: [JSONValue] = []
        for adapter in ProviderTable.adapters(environment: context.environment) {
            let status = try await adapter.status(storage: storage, context: context)
            if status != .null { providers.append(status) }
        }
        if json {
            context.io.write(
                JSONValue.object(["version": .int(Self.schemaVersion), "providers": .array(providers)]).jsonText + "\n")
            return ExitStatus.success
        }
        // Colour for standard output follows standard output; what came from outside (names a
        // server sent, account and permission names) is printed without control characters.
        let terminal = context.terminal.standardOutput
        let clean = Terminal.printable
        for provider in providers {
            let name = clean(provider["provider"]?.stringValue ?? "?")
            var text = terminal.bold(name) + " (app \(clean(provider["app_id"]?.stringValue ?? "?"))"
            if let emulator = provider["emulator"]?.stringValue { text += ", built-in emulator at \(emulator)" }
            text += ")\n  storage: \(provider["storage"]?["backend"]?.stringValue ?? "?") — "
            text += "\(provider["storage"]?["reason"]?.stringValue ?? "")\n"
            let accounts = provider["accounts"]?.arrayValue ?? []
            if accounts.isEmpty { text += "  not logged in; run 'sesame login \(name)'\n" }
            for account in accounts {
                func list(_ key: String) -> String {
                    (account[key]?.arrayValue ?? []).compactMap(\.stringValue).map(clean).joined(separator: ", ")
                }
                let active = account["active"]?.boolValue == true ? terminal.green("✓ ") : "  "
                let user = [account["user_name"]?.stringValue, account["user_id"]?.stringValue.map { "(\($0))" }]
                    .compactMap { $0.map(clean) }.joined(separator: " ")
                let accountName = clean(account["account"]?.stringValue ?? "?")
                text += "\(active)\(accountName): \(user)\n"
                text += "      granted: \(list("granted"))\n"
                if !list("declined").isEmpty { text += "      declined: \(list("declined"))\n" }
                text += "      expires: \(account["expires_at"]?.stringValue ?? "never"); data access until "
                text += "\(account["data_access_expires_at"]?.stringValue ?? "unknown")\n"
                if account["token_valid"]?.boolValue == false || account["needs_login"]?.boolValue == true {
                    text += "      " + terminal.red("needs a new login")
                    text += ": \(clean(account["problem"]?.stringValue ?? ""))"
                    text += " Run 'sesame login \(name) --account \(accountName)'.\n"
                }
                if let usage = account["last_usage"], usage != .null { text += "      last usage: \(usage.jsonText)\n" }
            }
            context.io.write(text)
        }
        return ExitStatus.success
    }
}

/// `sesame providers`.
enum ProvidersCommand {
    static let definition = CommandDefinition(
        spec: CommandSpec(name: "providers", summary: "List the providers and the settings each reads.", synopses: [""])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "providers")
        return .providers
    }

    static func run(io: CommandIO) -> Int32 {
        for adapter in ProviderTable.all {
            io.write(
                "\(adapter.name)\n  \(adapter.summary)\n  environment: \(adapter.environmentVariables.joined(separator: ", "))\n"
            )
        }
        return ExitStatus.success
    }
}

/// `sesame doctor`.
package struct DoctorCommand: Sendable, Equatable {
    package var storage: StorageMode?

    static let definition = CommandDefinition(
        spec: CommandSpec(
            name: "doctor",
            summary: "Check the D-Bus session, the keyring, the storage policy and the providers' addresses.",
            synopses: ["[--storage MODE]"],
            discussion: "Each line says what was checked; a line that is not fine says what to do. Exits 69 when "
                + "something needed is missing. No check waits longer than 3 s and the whole command ends within "
                + "10 s, so a bus or keyring that never answers is reported, not waited for.",
            options: [storageOption])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "doctor")
        return .doctor(DoctorCommand(storage: try storageMode(parsed, command: "doctor")))
    }

    func run(context: CommandContext) async -> Int32 {
        // The three parts run at once, each probe bounded by DoctorLimits.perProbe and each part by
        // DoctorLimits.overall, so a silent bus or a dead network never makes doctor hang.
        let environment = context.environment
        let storage = self.storage
        async let bus = withTimeLimit(DoctorLimits.overall) { await Self.busLines(environment: environment) }
        async let policy = withTimeLimit(DoctorLimits.overall) {
            await Self.storageLines(storage: storage, context: context)
        }
        async let providers = withTimeLimit(DoctorLimits.overall) {
            await withTaskGroup(of: (Int, [DoctorLine]).self) { group in
                for (index, adapter) in ProviderTable.all.enumerated() {
                    group.addTask { (index, await adapter.doctor(context: context)) }
                }
                var results: [(Int, [DoctorLine])] = []
                for await result in group { results.append(result) }
                return results.sorted { $0.0 < $1.0 }.flatMap(\.1)
            }
        }
        let limit = "\(DoctorLimits.overall.components.seconds) s"
        var lines =
            await bus
            ?? [DoctorLine(.problem, "The D-Bus checks did not finish within \(limit).", fix: "use --storage file")]
        let (storageLines, keyringInUse, storageStatus) =
            await policy
            ?? (
                [DoctorLine(.problem, "The storage check did not finish within \(limit).")], true,
                ExitStatus.unavailable
            )
        if !keyringInUse {
            // The keyring is not in use, so its absence is worth knowing but not a failure.
            lines = lines.map { line in
                var line = line
                if line.level == .problem { line.level = .warning }
                return line
            }
        }
        lines += storageLines
        lines += await providers ?? [DoctorLine(.problem, "The providers' checks did not finish within \(limit).")]
        var status = storageStatus
        let terminal = context.terminal.standardOutput
        for line in lines {
            let mark: String
            switch line.level {
            case .ok: mark = terminal.green("✓")
            case .info: mark = "•"
            case .warning: mark = terminal.yellow("!")
            case .problem:
                mark = terminal.red("✗")
                if status == ExitStatus.success { status = ExitStatus.unavailable }
            }
            let fix = line.fix.map { line.level == .info ? "; \($0)." : " To fix: \($0)." } ?? ""
            context.io.write("\(mark) \(line.text)\(fix)\n")
        }
        return status
    }
}

extension DoctorCommand {
    /// The session bus and the Secret Service on it, each question bounded.
    static func busLines(environment: [String: String]) async -> [DoctorLine] {
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        guard !bus.isEmpty else {
            return [
                DoctorLine(
                    .problem, "No D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set), so there is no keyring.",
                    fix: "log in to a desktop session, or run under 'dbus-run-session', or use --storage file")
            ]
        }
        let address = bus.split(separator: ",").first.map(String.init) ?? bus
        let limit = "\(DoctorLimits.perProbe.components.seconds) s"
        let silent = DoctorLine(
            .problem, "The D-Bus session bus at \(address) accepts connections but did not answer within \(limit).",
            fix: "restart the desktop session (or the bus), or use --storage file")
        var lines: [DoctorLine] = []
        switch await DBusProbe.nameHasOwner("org.freedesktop.secrets", environment: environment) {
        case .answer(true):
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            lines.append(DoctorLine(.ok, "Secret Service (org.freedesktop.secrets) is present."))
            switch await DBusProbe.defaultCollectionLocked(environment: environment) {
            case .answer(false): lines.append(DoctorLine(.ok, "The default keyring collection is unlocked."))
            case .answer(true):
                lines.append(
                    DoctorLine(
                        .warning, "The default keyring collection is locked.",
                        fix: "unlock it (log in to the desktop, or open Passwords and Keys); Sesame will ask"))
            case .noAnswer:
                lines.append(
                    DoctorLine(
                        .problem, "The Secret Service did not answer within \(limit).",
                        fix: "restart gnome-keyring (or the Secret Service in use), or use --storage file"))
            case .failed:
                lines.append(
                    DoctorLine(
                        .warning, "There is no default keyring collection (or it could not be read).",
                        fix: "create a default keyring in Passwords and Keys (seahorse)"))
            }
        case .answer(false):
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            lines.append(
                DoctorLine(
                    .problem, "No Secret Service on the session bus.",
                    fix: "install and start gnome-keyring (or KeePassXC with Secret Service), or use --storage file"))
        case .noAnswer:
            lines.append(silent)
        case .failed:
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            lines.append(
                DoctorLine(
                    .warning, "Could not ask the bus about the Secret Service (dbus-send is missing or failed).",
                    fix: "install the dbus package"))
        }
        return lines
    }

    /// The configuration and the storage it selects: the lines, whether the keyring is in use, and
    /// the status so far.
    static func storageLines(
        storage: StorageMode?, context: CommandContext
    ) async -> ([DoctorLine], keyringInUse: Bool, status: Int32) {
        let configuration: DesktopConfiguration
        do {
            configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: context.environment)
        } catch {
            return ([DoctorLine(.problem, "Configuration: \(error)")], true, ExitStatus.unavailable)
        }
        let keyringInUse = configuration.storage.value != .file && configuration.storage.value != .memory
        var lines: [DoctorLine] = []
        if let file = configuration.configFile { lines.append(DoctorLine(.ok, "Config file: \(file.path).")) }
        let keyring = context.keyring
        let environment = context.environment
        let selected = await withTimeLimit(DoctorLimits.perProbe) { () -> Result<String, any Error> in
            do {
                let selection = try await DesktopStorage.select(
                    configuration.storage, keyring: keyring, environment: environment)
                return .success("Storage: \(selection.backend), because of the \(selection.reason).")
            } catch {
                return .failure(error)
            }
        }
        let cannot = "Storage: \(configuration.storage.value) (from \(configuration.storage.source)) cannot be used"
        switch selected {
        case .success(let text)?:
            lines.append(DoctorLine(.ok, text))
            return (lines, keyringInUse, ExitStatus.success)
        case .failure(let error)?:
            lines.append(DoctorLine(.problem, "\(cannot): \(error)"))
        case nil:
            lines.append(
                DoctorLine(
                    .problem,
                    "\(cannot): the keyring did not answer within \(DoctorLimits.perProbe.components.seconds) s.",
                    fix: "use --storage file, or restart the keyring"))
        }
        return (lines, keyringInUse, ExitStatus.unavailable)
    }
}

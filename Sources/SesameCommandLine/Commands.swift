import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameKeyring

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
                provider: provider, action: .login(login), account: parsed.value("account"),
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
                provider: provider, action: .token, account: parsed.value("account"),
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
                account: parsed.value("account"), storage: try storageMode(parsed, command: "logout")))
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
                provider: provider, action: .switchAccount(parsed.positionals[1]), account: nil,
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
                provider: provider, action: .permissions(action), account: parsed.value("account"),
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
        let terminal = context.terminal
        for provider in providers {
            let name = provider["provider"]?.stringValue ?? "?"
            var text = terminal.bold(name) + " (app \(provider["app_id"]?.stringValue ?? "?")"
            if let emulator = provider["emulator"]?.stringValue { text += ", built-in emulator at \(emulator)" }
            text += ")\n  storage: \(provider["storage"]?["backend"]?.stringValue ?? "?") — "
            text += "\(provider["storage"]?["reason"]?.stringValue ?? "")\n"
            let accounts = provider["accounts"]?.arrayValue ?? []
            if accounts.isEmpty { text += "  not logged in; run 'sesame login \(name)'\n" }
            for account in accounts {
                func list(_ key: String) -> String {
                    (account[key]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
                }
                let active = account["active"]?.boolValue == true ? terminal.green("✓ ") : "  "
                let user = [account["user_name"]?.stringValue, account["user_id"]?.stringValue.map { "(\($0))" }]
                    .compactMap { $0 }.joined(separator: " ")
                text += "\(active)\(account["account"]?.stringValue ?? "?"): \(user)\n"
                text += "      granted: \(list("granted"))\n"
                if !list("declined").isEmpty { text += "      declined: \(list("declined"))\n" }
                text += "      expires: \(account["expires_at"]?.stringValue ?? "never"); data access until "
                text += "\(account["data_access_expires_at"]?.stringValue ?? "unknown")\n"
                if account["token_valid"]?.boolValue == false || account["needs_login"]?.boolValue == true {
                    text += "      " + terminal.red("needs a new login") + ": \(account["problem"]?.stringValue ?? "")"
                    text += " Run 'sesame login \(name) --account \(account["account"]?.stringValue ?? "")'.\n"
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

/// Small network checks for `sesame doctor`.
enum DoctorProbe {
    static let transport = CurlTransport(
        configuration: CurlTransport.Configuration(connectTimeout: .seconds(3), timeout: .seconds(5)))

    /// Whether `url` answers HTTP at all (any status counts: it is there).
    static func answers(label: String, url: URL, transport: any HTTPTransport) async -> DoctorLine {
        do {
            let response = try await transport.send(HTTPRequest(method: .get, url: url))
            return DoctorLine(.ok, "\(label) at \(url.absoluteString) answers (HTTP \(response.status)).")
        } catch {
            return DoctorLine(
                .problem, "\(label) at \(url.absoluteString) does not answer (\(error)).",
                fix: "check the network, a proxy (HTTPS_PROXY), or the configured address")
        }
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
                + "something needed is missing.",
            options: [storageOption])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "doctor")
        return .doctor(DoctorCommand(storage: try storageMode(parsed, command: "doctor")))
    }

    func run(context: CommandContext) async -> Int32 {
        var lines: [DoctorLine] = []
        let environment = context.environment
        // D-Bus session bus.
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        let secretService: Bool?
        if bus.isEmpty {
            lines.append(
                DoctorLine(
                    .problem, "No D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set), so there is no keyring.",
                    fix: "log in to a desktop session, or run under 'dbus-run-session', or use --storage file"))
            secretService = nil
        } else {
            let address = bus.split(separator: ",").first.map(String.init) ?? bus
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            secretService = await DBusProbe.nameHasOwner("org.freedesktop.secrets", environment: environment)
            switch secretService {
            case true?:
                // Who provides it, and advice in that service's terms (SesameKeyring).
                do {
                    let info = try await SecretServiceInfo.probe(busAddress: bus)
                    lines += info.findings.map { finding in
                        let level: DoctorLine.Level =
                            switch finding.level {
                            case .ok: .ok
                            case .warning: .warning
                            case .problem: .problem
                            }
                        return DoctorLine(level, finding.text, fix: finding.fix)
                    }
                } catch {
                    lines.append(DoctorLine(.warning, "The Secret Service could not be asked about itself: \(error)"))
                }
            case false?:
                lines.append(
                    DoctorLine(
                        .problem, "No Secret Service on the session bus.",
                        fix: "install and start gnome-keyring (or KeePassXC with Secret Service), or use --storage file"
                    ))
            case nil:
                lines.append(
                    DoctorLine(
                        .warning, "Could not ask the bus about the Secret Service (dbus-send is missing).",
                        fix: "install the dbus package"))
            }
        }
        // Storage policy.
        var status = ExitStatus.success
        do {
            let configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: environment)
            if configuration.storage.value == .file || configuration.storage.value == .memory {
                // The keyring is not in use, so its absence is worth knowing but not a failure.
                lines = lines.map { line in
                    var line = line
                    if line.level == .problem { line.level = .warning }
                    return line
                }
            }
            if let file = configuration.configFile { lines.append(DoctorLine(.ok, "Config file: \(file.path).")) }
            do {
                let selection = try await DesktopStorage.select(
                    configuration.storage, keyring: context.keyring, environment: environment)
                lines.append(DoctorLine(.ok, "Storage: \(selection.backend), because of the \(selection.reason)."))
            } catch {
                lines.append(
                    DoctorLine(
                        .problem,
                        "Storage: \(configuration.storage.value) (from \(configuration.storage.source)) "
                            + "cannot be used: \(error)"))
                status = ExitStatus.unavailable
            }
        } catch {
            lines.append(DoctorLine(.problem, "Configuration: \(error)"))
            status = ExitStatus.unavailable
        }
        for adapter in ProviderTable.all { lines += await adapter.doctor(context: context) }
        let terminal = context.terminal
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

/// Asks the session bus with `dbus-send`: `NameHasOwner` tells whether a Secret Service is
/// running without starting one, and the collection's `Locked` property without unlocking it.
enum DBusProbe {
    /// Runs `dbus-send` on a thread of its own (it may wait for the reply timeout) and returns
    /// its reply, or nil when it failed.
    private static func dbusSend(_ arguments: [String], environment: [String: String]) async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let output = Pipe()
                let process = ChildProcess(
                    executableURL: URL(fileURLWithPath: "/usr/bin/env"),
                    arguments: ["dbus-send", "--session", "--print-reply", "--reply-timeout=2000"] + arguments,
                    environment: environment, standardInput: .null, standardOutput: .pipe(output),
                    standardError: .null)
                guard (try? process.run()) != nil else { return continuation.resume(returning: nil) }
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(
                    returning: process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil)
            }
        }
    }

    static func nameHasOwner(_ name: String, environment: [String: String]) async -> Bool? {
        guard
            let reply = await dbusSend(
                [
                    "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                    "string:\(name)",
                ], environment: environment)
        else { return nil }
        return reply.contains("boolean true")
    }

    static func defaultCollectionLocked(environment: [String: String]) async -> Bool? {
        guard
            let alias = await dbusSend(
                [
                    "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.ReadAlias", "string:default",
                ], environment: environment),
            let path = alias.split(separator: "\"").dropFirst().first.map(String.init), path != "/"
        else { return nil }
        guard
            let reply = await dbusSend(
                [
                    "--dest=org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties.Get",
                    "string:org.freedesktop.Secret.Collection", "string:Locked",
                ], environment: environment)
        else { return nil }
        return reply.contains("boolean true")
    }
}

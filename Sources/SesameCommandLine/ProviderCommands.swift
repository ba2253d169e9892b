import Foundation
import Sesame
import SesameDesktop

/// The stores the program registered are named with their summaries (read once, after
/// `Desktop.bootstrap`, when the option is first used).
let storageOption = OptionSpec(
    "storage", value: "MODE",
    "Where logins are kept: auto (default: the keyring, else a registered store that is ready), keyring, "
        + "keyring-or-file, file (a 0600 file, opt-in), memory"
        + Desktop.storageBackends.map { "; \($0.name): \($0.summary)" }.joined() + ".")
let accountOption = OptionSpec("account", value: "NAME", "The account (default: the active one).")

func storageMode(_ parsed: ParsedArguments, command: String) throws(UsageError) -> StorageMode? {
    guard let text = parsed.value("storage") else { return nil }
    guard let mode = StorageMode(rawValue: text) else {
        throw UsageError(
            "--storage must be one of \(StorageMode.allCases.map(\.rawValue).joined(separator: ", ")); "
                + "'\(text.sanitizedForTerminal)' is not", command: command)
    }
    return mode
}

func noExtra(_ parsed: ParsedArguments, after count: Int, command: String) throws(UsageError) {
    if parsed.positionals.count > count {
        throw UsageError("unexpected argument '\(parsed.positionals[count].sanitizedForTerminal)'", command: command)
    }
}

/// `COMMAND PROVIDER [--account NAME] [--storage MODE]`, with `action` (given the provider) checked after the provider.
func providerCommand(
    _ parsed: ParsedArguments, command: String, action: (String) throws(UsageError) -> ProviderCommand.Action
) throws(UsageError) -> Command {
    let provider = try ProviderTable.provider(in: parsed, command: command)
    try noExtra(parsed, after: 1, command: command)
    return .provider(
        ProviderCommand(
            provider: provider, action: try action(provider), account: try parsed.account(command: command),
            storage: try storageMode(parsed, command: command)))
}

/// What a provider command (`login`, `token`, `logout`, `switch`, `permissions`) asks of a provider.
package struct ProviderCommand: Sendable, Equatable {
    /// `sesame login PROVIDER ...`.
    package struct Login: Sendable, Equatable {
        /// `--scopes a,b`.
        package var scopes: [String] = []
        /// `--web` (browser and loopback redirect) rather than device login.
        package var web = false
        /// `--no-browser`: print the address instead of opening a browser.
        package var noBrowser = false
        /// `--with-token`: read a token from standard input.
        package var withToken = false
        /// `--device`, given explicitly.
        package var device = false
        /// The provider's own flags (`--app-id`, `--issuer`...), by setting name.
        package var options: [String: String] = [:]
    }

    /// What `sesame permissions PROVIDER` does.
    package enum PermissionsAction: Sendable, Equatable {
        /// `list` (the default); `--json` prints one JSON object.
        case list(json: Bool = false)
        /// `request NAME... [provider options]`.
        case request([String], options: [String: String])
        /// `revoke NAME`.
        case revoke(String)
    }

    /// The action.
    package enum Action: Sendable, Equatable {
        case login(Login)
        /// `sesame token`, with what it was asked for.
        case token(TokenOptions = TokenOptions())
        case logout(revoke: Bool, timeout: Duration = AccountCommands.defaultRevokeTimeout)
        case switchAccount(String)
        case permissions(PermissionsAction)
        /// `sesame kubectl-credential PROVIDER`: an `ExecCredential` for kubectl.
        case kubectlCredential(KubectlCredentialOptions)
    }

    /// The provider's name (a plug-in's, or one the config file gives).
    package var provider: String
    /// What to do.
    package var action: Action
    /// `--account NAME`; the active account when `nil`.
    package var account: String?
    /// `--storage MODE`.
    package var storage: StorageMode?

    /// The command's name (`login`, `token`...), for messages.
    package var commandName: String {
        switch action {
        case .login: "login"
        case .token: "token"
        case .logout: "logout"
        case .switchAccount: "switch"
        case .permissions: "permissions"
        case .kubectlCredential: "kubectl-credential"
        }
    }
}

/// What a command needs from its surroundings.
package struct CommandContext: Sendable {
    package var io: CommandIO
    package var environment: [String: String]
    package var terminal: Terminal
    /// Opens the keyring store.
    package var keyring: DesktopStorage.KeyringFactory
}

/// The providers as the command line sees them: ``SesameDesktop/Desktop/providers``, the one
/// list. Nothing else in the command line names a provider.
package enum ProviderTable {
    /// The plug-in a name given on the command line belongs to, before any file is read: a
    /// plug-in's name, or a name one of them may take (one the config file gives).
    static func plugin(forName name: String) -> (any ProviderPlugin)? {
        Desktop.providers.first { $0.name == name } ?? Desktop.providers.first { $0.mayBeInstance(name) }
    }

    package static var names: String { Desktop.providers.map(\.name).joined(separator: ", ") }

    /// The provider named by the first positional argument, or a usage error. Names of
    /// configured instances are checked when the command runs (parsing reads no files).
    static func provider(in parsed: ParsedArguments, command: String) throws(UsageError) -> String {
        guard let name = parsed.positionals.first else {
            throw UsageError(
                "name the provider, as in '\(Desktop.programName) \(command) \(Desktop.providers[0].name)' (known: \(names), or a "
                    + "name the config file gives)", command: command)
        }
        guard plugin(forName: name) != nil else {
            let near =
                Suggestion.closest(to: name, in: Desktop.providers.map(\.name)).map { " (did you mean '\($0)'?)" } ?? ""
            throw UsageError(
                "unknown provider '\(name.sanitizedForTerminal)'\(near); known providers: \(names)", command: command)
        }
        return name
    }

    /// Every flag some provider's login takes, for the parser (each is checked against the
    /// named provider afterwards).
    static var loginOptions: [OptionSpec] {
        var options: [OptionSpec] = []
        for plugin in Desktop.providers {
            for setting in plugin.settings(instance: plugin.name) where setting.isFlag {
                let summary = "\(plugin.displayName): \(setting.summary)"
                // A flag several providers take (--client-id) says what it is for each of them.
                if let index = options.firstIndex(where: { $0.name == setting.name }) {
                    options[index].summary += " \(summary)"
                } else {
                    options.append(
                        OptionSpec(setting.name, value: setting.kind == .flag ? nil : setting.valueName, summary))
                }
            }
        }
        return options
    }

    /// The providers' paragraphs of `sesame login --help`.
    static var loginDiscussion: String {
        Desktop.providers.map(\.loginHelp.discussion).filter { !$0.isEmpty }.map { "\n\n" + $0 }.joined()
    }

    /// Every option some provider's `permissions request` takes.
    static var permissionOptions: [OptionSpec] {
        var seen: Set<String> = []
        return Desktop.providers.flatMap { plugin in
            plugin.permissionOptions.filter { seen.insert($0.name).inserted }.map {
                OptionSpec($0.name, value: $0.valueName, "\(plugin.displayName): \($0.summary)")
            }
        }
    }

    /// The values of `provider`'s own options in `parsed`, checked: an option of another
    /// provider is a usage error.
    static func options(
        _ parsed: ParsedArguments, of settings: [ProviderSetting], all: [OptionSpec], provider: String, command: String
    ) throws(UsageError) -> [String: String] {
        var values: [String: String] = [:]
        for option in all where parsed.values[option.name] != nil || parsed.flags.contains(option.name) {
            guard let setting = settings.first(where: { $0.name == option.name }) else {
                let owners = Desktop.providers.filter { plugin in
                    (plugin.settings(instance: plugin.name) + plugin.permissionOptions).contains {
                        $0.name == option.name
                    }
                }.map(\.name)
                throw UsageError(
                    "--\(option.name) is an option of \(owners.joined(separator: " and ")), not of "
                        + "'\(provider.sanitizedForTerminal)'", command: command)
            }
            let value = parsed.value(option.name) ?? "true"
            if let problem = setting.problem(with: value) {
                throw UsageError(
                    "--\(option.name) '\(value.sanitizedForTerminal)' is not valid: \(problem)", command: command)
            }
            values[option.name] = value
        }
        return values
    }
}

/// The provider commands' specs and builders.
enum ProviderCommands {
    static let login = CommandDefinition(
        name: "login",
        spec: CommandSpec(
            name: "login", summary: "Log in to a provider and keep the login in the keyring.",
            synopses: [
                "PROVIDER [--scopes a,b] [--device | --web] [--no-browser] [--with-token]",
                " [--account NAME] [--storage MODE] [provider options]",
            ],
            discussion: """
                Device login is the default: a code to enter at an address, on any device. --web logs in
                with the browser and a loopback redirect (PKCE). --with-token reads a token you already
                have from standard input (never from the command line, which other users can see) and
                checks it with the provider before storing it. A login over a stored one replaces it
                once the new one succeeds.

                With no browser here (--no-browser, SESAME_BROWSER=none, an SSH session, no display),
                device login is used where the provider has it; otherwise the browser login's address is
                printed: open it on any machine, then paste back the 127.0.0.1 address the browser ends
                on (or only its code). SESAME_BROWSER=COMMAND opens addresses with that command.

                Each provider's settings come from its options below, then its environment variables,
                then its object in $XDG_CONFIG_HOME/sesame/config.json ('\(Desktop.programName) providers' lists them).
                """ + ProviderTable.loginDiscussion,
            options: [
                OptionSpec("scopes", value: "a,b", "Permissions or scopes to ask for, comma-separated."),
                OptionSpec("device", "Device login: a code to enter on any device (the default)."),
                OptionSpec("web", "Browser login with a loopback redirect."),
                OptionSpec(
                    "no-browser",
                    "No browser here: device login, or the address to open elsewhere and paste back."),
                OptionSpec("with-token", "Read an access token from standard input."),
                accountOption, storageOption,
            ] + ProviderTable.loginOptions,
            examples: Desktop.providers.flatMap(\.loginHelp.examples))
    ) { parsed throws(UsageError) in
        try providerCommand(parsed, command: "login") { provider throws(UsageError) in
            if parsed.flags.contains("device") && parsed.flags.contains("web") {
                throw UsageError("--device and --web choose different logins; give one of them", command: "login")
            }
            if parsed.flags.contains("with-token") && (parsed.flags.contains("web") || parsed.flags.contains("device"))
            {
                throw UsageError(
                    "--with-token reads a token and runs no login; leave out --device and --web", command: "login")
            }
            let plugin = ProviderTable.plugin(forName: provider)!
            if parsed.flags.contains("with-token"), !plugin.loginFlows.contains(.existingToken) {
                throw UsageError(
                    "\(plugin.displayName) logins do not take --with-token; log in with the device code or --web",
                    command: "login")
            }
            var login = ProviderCommand.Login()
            login.scopes = (parsed.value("scopes") ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
            login.web = parsed.flags.contains("web")
            login.noBrowser = parsed.flags.contains("no-browser")
            login.withToken = parsed.flags.contains("with-token")
            login.device = parsed.flags.contains("device")
            login.options = try ProviderTable.options(
                parsed, of: plugin.settings(instance: provider), all: ProviderTable.loginOptions, provider: provider,
                command: "login")
            return .login(login)
        }
    }

    static let token = CommandDefinition(
        name: "token",
        spec: CommandSpec(
            name: "token", summary: "Print the access token (a secret, as only the credential helpers also print).",
            synopses: [
                "PROVIDER [--json] [--min-valid DURATION] [--scopes a,b] [--timeout SECONDS] [--account NAME]",
                " [--storage MODE]",
            ],
            discussion: TokenOptions.discussion,
            options: TokenOptions.options + [accountOption, storageOption],
            examples: [
                (
                    "curl -H \"Authorization: Bearer $(\(Desktop.programName) token \(Desktop.providers[0].name))\" ...",
                    "Use it in a script"
                ),
                (
                    "\(Desktop.programName) token \(Desktop.providers[0].name) --json --min-valid 10m",
                    "A token good for ten more minutes at least, with its expiry and scopes"
                ),
            ])
    ) { parsed throws(UsageError) in
        try providerCommand(parsed, command: "token") { _ throws(UsageError) in
            .token(try TokenOptions.parse(parsed, command: "token"))
        }
    }

    static let logout = CommandDefinition(
        name: "logout",
        spec: CommandSpec(
            name: "logout",
            summary: "Remove a stored login (and with --revoke, the app's access); another account becomes active.",
            synopses: ["PROVIDER [--account NAME] [--revoke] [--storage MODE]"],
            discussion: """
                Logging out of the active account makes another stored login of the same provider the
                active one, and says which. A stored entry that cannot be read is removed all the same.
                """,
            options: [
                accountOption,
                OptionSpec(
                    "revoke",
                    "Also revoke the access at the provider, where the provider lets an app do that."),
                OptionSpec(
                    "timeout", value: "SECONDS",
                    "How long --revoke waits for the provider (default 15; up to 600, fractions allowed)."),
                storageOption,
            ])
    ) { parsed throws(UsageError) in
        try providerCommand(parsed, command: "logout") { _ throws(UsageError) in
            let timeout = try TokenOptions.seconds(parsed, command: "logout") ?? AccountCommands.defaultRevokeTimeout
            return .logout(revoke: parsed.flags.contains("revoke"), timeout: timeout)
        }
    }

    static let switchAccount = CommandDefinition(
        name: "switch",
        spec: CommandSpec(
            name: "switch", summary: "Make another stored login the active one.",
            synopses: ["PROVIDER ACCOUNT [--storage MODE]"], options: [storageOption])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "switch")
        guard parsed.positionals.count >= 2 else {
            throw UsageError(
                "name the account to switch to, as in '\(Desktop.programName) switch \(provider) work'",
                command: "switch")
        }
        try noExtra(parsed, after: 2, command: "switch")
        return .provider(
            ProviderCommand(
                provider: provider,
                action: .switchAccount(
                    try AccountName.validated(parsed.positionals[1], what: "ACCOUNT", command: "switch")),
                account: nil,
                storage: try storageMode(parsed, command: "switch")))
    }

    static let permissions = CommandDefinition(
        name: "permissions",
        spec: CommandSpec(
            name: "permissions", summary: "List, request or revoke the permissions of a login.",
            synopses: [
                "PROVIDER [list] [--json] [--account NAME]",
                " PROVIDER request NAME... [provider options] [--account NAME]",
                " PROVIDER revoke NAME [--account NAME]",
            ],
            discussion: """
                request asks the person again; a provider's own options (such as an audience for
                publish permissions) are listed under each provider in '\(Desktop.programName) providers'. Providers
                whose scopes are chosen at login have no permissions command: log in again with --scopes.

                list --json prints {"granted": [names], "declined": [names], "granular_scopes":
                [{"scope", "target_ids": [ids]}]}: the objects (Pages, businesses) a permission was
                granted for, as the provider said at login (Facebook's debug_token).
                """,
            options: ProviderTable.permissionOptions + [
                OptionSpec("json", "With list: print one JSON object."), accountOption, storageOption,
            ])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "permissions")
        let plugin = ProviderTable.plugin(forName: provider)!
        let rest = Array(parsed.positionals.dropFirst())
        let action: ProviderCommand.PermissionsAction
        let options = try ProviderTable.options(
            parsed, of: plugin.permissionOptions, all: ProviderTable.permissionOptions, provider: provider,
            command: "permissions")
        switch rest.first {
        case nil, "list":
            try noExtra(parsed, after: 2, command: "permissions")
            action = .list(json: parsed.flags.contains("json"))
        case "request":
            let names = Array(rest.dropFirst())
            guard !names.isEmpty else {
                throw UsageError(
                    "name the permissions to request, as in 'request publish_actions'", command: "permissions")
            }
            action = .request(names, options: options)
        case "revoke":
            guard rest.count == 2 else {
                throw UsageError(
                    "name one permission to revoke, as in 'revoke publish_actions'", command: "permissions")
            }
            action = .revoke(rest[1])
        case let other?:
            throw UsageError(
                "unknown action '\(other.sanitizedForTerminal)'; use list, request or revoke", command: "permissions")
        }
        if parsed.flags.contains("json"), rest.first == "request" || rest.first == "revoke" {
            throw UsageError("--json goes with 'list'", command: "permissions")
        }
        if !options.isEmpty, case .request = action {
        } else if let name = options.keys.sorted().first {
            throw UsageError("--\(name) goes with 'request'", command: "permissions")
        }
        return .provider(
            ProviderCommand(
                provider: provider, action: .permissions(action), account: try parsed.account(command: "permissions"),
                storage: try storageMode(parsed, command: "permissions")))
    }
}

/// A command that failed: one sentence saying what to do, and an exit status from
/// ``ExitStatus``.
package struct CommandFailure: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var status: Int32

    package init(_ message: String, status: Int32 = ExitStatus.failure) {
        self.message = message
        self.status = status
    }

    package var description: String { message }

    /// The command line's own way to the file store, added after a message of the libraries that
    /// offers it: they name the `file` storage policy, not this program's flag.
    package static var fileStoreFlag: String { "With the \(Desktop.programName) command: --storage file." }

    /// The message and status for any error a command can meet. Messages never carry secrets
    /// (`AuthError` and the stores keep them out).
    package static func from(_ error: any Error, provider: String) -> CommandFailure {
        switch error {
        case let failure as CommandFailure:
            return failure
        case let error as DesktopError:
            let message = error.suggestsFileStore ? "\(error.message) \(fileStoreFlag)" : error.message
            return CommandFailure(message, status: error.status.rawValue)
        case let error as AuthError:
            var message = error.shouldNotifyUser ? (error.userMessage ?? error.message) : error.message
            if let transport = error.underlyingError as? TransportError, transport.kind == .certificateRejected {
                message += " To fix: \(NetworkSettings.certificateFix)."
            }
            // The machine's clock is a setting to put right, as the error says.
            if error.loginFailedReason == .clockSkew { return CommandFailure(message, status: ExitStatus.config) }
            switch error.category {
            case .authenticationReopenSession:
                return CommandFailure(
                    "\(message) Log in again with '\(Desktop.programName) login \(provider)'.",
                    status: ExitStatus.permission)
            case .permissions:
                return CommandFailure(
                    "\(message) Grant it with '\(Desktop.programName) permissions \(provider) request NAME'.",
                    status: ExitStatus.permission)
            case .retry, .throttling, .server:
                return CommandFailure("\(message) Try again in a little while.", status: ExitStatus.temporaryFailure)
            case .userCancelled:
                return CommandFailure(message, status: ExitStatus.declined)
            default:
                if error.underlyingError != nil, error.httpStatus == nil {
                    return CommandFailure(message, status: ExitStatus.unavailable)
                }
                return CommandFailure(message, status: ExitStatus.dataError)
            }
        case let error as CredentialStoreError:
            var status: Int32
            switch error.kind {
            case .unavailable, .noSessionBus, .noSecretService, .locked, .timedOut: status = ExitStatus.unavailable
            case .insecurePermissions: status = ExitStatus.config
            case .cannotCreate: status = ExitStatus.cannotCreate
            default: status = ExitStatus.ioError
            }
            // The kinds a registered store adds (PostgreSQL's keys and schema) say their own status.
            if let own = Desktop.storageBackends.lazy.compactMap({ $0.status(of: error) }).first {
                status = own.rawValue
            }
            // An absent keyring's message offers the file store (SesameKeyring's storage policy).
            let noKeyring = error.kind == .noSessionBus || error.kind == .noSecretService
            return CommandFailure(noKeyring ? "\(error) \(fileStoreFlag)" : "\(error)", status: status)
        case let error as TransportError where error.kind == .certificateRejected:
            return CommandFailure(
                "\(error.sentence) To fix: \(NetworkSettings.certificateFix).", status: ExitStatus.unavailable)
        case let error as RevocationFailed:
            return CommandFailure("\(error)", status: ExitStatus.unavailable)
        case let error as CocoaError:
            // A file Sesame keeps (the active account, remembered issuers) could not be written:
            // say which, in words, not as a Foundation error dump.
            let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? error.userInfo[NSURLErrorKey].map { "\($0)" }
            let file = path.map { " \($0)" } ?? ""
            return CommandFailure(
                "Sesame could not write its state file\(file) (\(error.localizedDescription)); make its directory "
                    + "writable, or set XDG_STATE_HOME to one that is.", status: ExitStatus.cannotCreate)
        default:
            return CommandFailure("\(error.sentence)", status: ExitStatus.failure)
        }
    }
}

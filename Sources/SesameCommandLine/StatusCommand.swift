import Foundation
import Sesame
import SesameCurl
import SesameDesktop

/// `sesame status`.
package struct StatusCommand: Sendable, Equatable {
    package var json: Bool
    package var storage: StorageMode?
    /// How long the whole command may take (`--timeout`, ``defaultDeadline`` when not given).
    package var deadline: Duration = Self.defaultDeadline

    /// The `--json` document's schema version; a change that removes, renames or retypes a key
    /// bumps it.
    package static let schemaVersion = 2

    /// How long the whole command may take unless `--timeout` says otherwise: every account is
    /// checked at once, and what has not answered by then is reported as not verified.
    package static let defaultDeadline: Duration = .seconds(5)

    /// The longest `--timeout` accepted, in seconds.
    static let longestTimeout = 600.0

    static let definition = CommandDefinition(
        name: "status",
        spec: CommandSpec(
            name: "status", summary: "Show the stored logins: user, app, permissions, expiry, storage, usage.",
            synopses: ["[--json] [--timeout SECONDS] [--storage MODE]"],
            discussion: """
                Each login is checked with its provider, all at once, within 5 seconds in all (or the
                --timeout given); one that cannot be checked in time says so ("could not verify").

                Exits 0 when every provider's active login works, 77 when nothing is logged in or an
                active login needs a new login, 75 when an active login could not be verified, 69 or
                74 when the stored logins could not be read (a locked keyring, an unreadable file).

                --json prints one JSON object (schema version 2; keys are only ever added within a
                version). No token appears in it.
                  version                   2
                  providers[]               one per provider with logins or settings
                    provider                its name on the command line ('\(Desktop.programName) providers', or a configured one)
                    display_name            the provider's human name
                    app_id                  the app (client) id the logins belong to
                    emulator                true when it is Sesame's built-in emulator
                    details                 provider facts as strings (an issuer, a host)
                    storage                 {"backend": "keyring" | "pass" | "file" | "memory" | "postgres",
                                             "description": where, "reason": why this one}
                    problem                 why the provider could not be reached, or null
                    unreadable[]            stored entries that cannot be read: {"account" (or null),
                                            "problem"}; remove one with '\(Desktop.programName) logout NAME --account A'
                    accounts[]
                      account, active       the account name; whether it is the active one
                      user_id, user_name    who it is (user_name null when unknown)
                      granted, declined     permission or scope names
                      expires_at            ISO 8601, or null for no expiry
                      data_access_expires_at  ISO 8601 or null (for providers that set one)
                      granular_scopes[]     {"scope", "target_ids"[]}: the objects (Pages, businesses)
                                            a permission was granted for, as the provider said
                      validity              "valid" (the provider accepted it just now), "invalid"
                                            (a new login is needed), "unverified" (it could not be
                                            checked; see problem), "not_checked" (judged from what
                                            is stored: still usable, e.g. refreshable)
                      checked_online        whether the provider was asked
                      needs_login           true exactly when validity is "invalid"
                      token_valid           true / false / null: validity as in version 1
                      problem               one sentence, or null
                      last_usage            the last rate-limit usage the provider reported, or null
                """,
            options: [
                OptionSpec("json", "Print one JSON object (schema above)."),
                OptionSpec(
                    "timeout", value: "SECONDS",
                    "How long to wait for the providers, in all (default 5; up to 600, fractions allowed)."),
                storageOption,
            ])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "status")
        var command = StatusCommand(
            json: parsed.flags.contains("json"), storage: try storageMode(parsed, command: "status"))
        if let text = parsed.value("timeout") {
            guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= longestTimeout else {
                throw UsageError(
                    "--timeout must be a number of seconds above 0 and up to \(Int(longestTimeout)) (for example 2.5); "
                        + "'\(text.sanitizedForTerminal)' is not", command: "status")
            }
            command.deadline = .milliseconds(Int64((seconds * 1000).rounded(.up)))
        }
        return .status(command)
    }

    // MARK: The document

    /// `sesame status --json`.
    struct Report: Codable, Sendable {
        var version: Int
        var providers: [ProviderReport]
    }

    /// One provider in the report.
    struct ProviderReport: Codable, Sendable {
        var provider: String
        var displayName: String
        var appID: String?
        var emulator: Bool
        var details: [String: String]
        var storage: Storage
        var problem: String?
        var unreadable: [Unreadable]
        var accounts: [AccountReport]
        /// The exit status of the failure to read the stored logins (a locked keyring, an
        /// unreadable file), when that is why ``accounts`` is empty: not the same as not logged in.
        var storeFailure: Int32? = nil
        /// 78 when the provider's settings are wrong (a Graph version that has ended, a value of
        /// the wrong form), so its logins could not be checked: trying again will not help.
        var settingFailure: Int32? = nil

        enum CodingKeys: String, CodingKey {
            case provider, displayName = "display_name", appID = "app_id", emulator, details, storage, problem
            case unreadable, accounts
        }

        // Every key is always present, `null` when there is no value.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(provider, forKey: .provider)
            try container.encode(displayName, forKey: .displayName)
            try container.encode(appID, forKey: .appID)
            try container.encode(emulator, forKey: .emulator)
            try container.encode(details, forKey: .details)
            try container.encode(storage, forKey: .storage)
            try container.encode(problem, forKey: .problem)
            try container.encode(unreadable, forKey: .unreadable)
            try container.encode(accounts, forKey: .accounts)
        }
    }

    struct Storage: Codable, Sendable {
        var backend: String
        var description: String
        var reason: String
    }

    struct Unreadable: Codable, Sendable {
        var account: String?
        var problem: String

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(account, forKey: .account)
            try container.encode(problem, forKey: .problem)
        }
    }

    /// One account in the report.
    struct AccountReport: Codable, Sendable {
        var account: String
        var active: Bool
        var userID: String?
        var userName: String?
        var granted: [String]
        var declined: [String]
        var expiresAt: String?
        var dataAccessExpiresAt: String?
        var granularScopes: [GrantTargets]
        var validity: AccountCheck.Validity
        var checkedOnline: Bool
        var needsLogin: Bool
        var tokenValid: Bool?
        var problem: String?
        var lastUsage: JSONValue?
        /// ``lastUsage`` in words, from the provider's plug-in (the text form only).
        var usageText: String? = nil

        enum CodingKeys: String, CodingKey {
            case account, active, userID = "user_id", userName = "user_name", granted, declined
            case expiresAt = "expires_at", dataAccessExpiresAt = "data_access_expires_at", validity
            case granularScopes = "granular_scopes"
            case checkedOnline = "checked_online", needsLogin = "needs_login", tokenValid = "token_valid", problem
            case lastUsage = "last_usage"
        }

        init(_ credential: StoredCredential, active: Bool, check: AccountCheck, lastUsage: JSONValue?) {
            let token = credential.token
            var check = check
            if credential.needsLogin, check.validity != .invalid {
                check = AccountCheck(
                    validity: .invalid, userName: check.userName,
                    problem: check.problem ?? "The provider refused the stored login.")
            }
            account = credential.key.account
            self.active = active
            userID = token.userID
            userName = check.userName
            granted = token.permissions.granted.sorted()
            declined = token.permissions.declined.sorted()
            expiresAt = token.expirationDate?.ISO8601Format()
            dataAccessExpiresAt = token.providerExtras[AccessToken.dataAccessExpiryExtra]?.doubleValue
                .map { Date(timeIntervalSince1970: $0).ISO8601Format() }
            granularScopes = GrantTargets.of(token)
            validity = check.validity
            checkedOnline = check.validity == .valid || check.validity == .invalid && !credential.needsLogin
            needsLogin = check.validity == .invalid
            tokenValid = check.validity == .valid ? true : check.validity == .invalid ? false : nil
            problem = check.problem
            self.lastUsage = check.usage ?? lastUsage
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(account, forKey: .account)
            try container.encode(active, forKey: .active)
            try container.encode(userID, forKey: .userID)
            try container.encode(userName, forKey: .userName)
            try container.encode(granted, forKey: .granted)
            try container.encode(declined, forKey: .declined)
            try container.encode(expiresAt, forKey: .expiresAt)
            try container.encode(dataAccessExpiresAt, forKey: .dataAccessExpiresAt)
            try container.encode(granularScopes, forKey: .granularScopes)
            try container.encode(validity, forKey: .validity)
            try container.encode(checkedOnline, forKey: .checkedOnline)
            try container.encode(needsLogin, forKey: .needsLogin)
            try container.encode(tokenValid, forKey: .tokenValid)
            try container.encode(problem, forKey: .problem)
            try container.encode(lastUsage ?? .null, forKey: .lastUsage)
        }
    }

    // MARK: Running

    func run(context: CommandContext) async throws -> Int32 {
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(storage: storage), environment: context.environment)
        let selection = try await DesktopStorage.select(
            configuration.storage, keyring: context.keyring, environment: context.environment)
        let names = try Desktop.names(configuration: configuration)
        let deadline = self.deadline
        // One transport for each provider's CA and proxy settings (one for all, unless some differ).
        var byNetwork: [NetworkSettings: LazyTransport] = [:]
        let transports = try names.map { entry in
            let network = try NetworkSettings.resolve(
                instance: entry.name, plugin: entry.plugin, configuration: configuration,
                environment: context.environment)
            if let made = byNetwork[network] { return made }
            let made = LazyTransport.curl {
                // A second past the command's own bound, so that a provider too slow to answer is
                // reported by that bound ("no answer within …"), not by curl's timeout mid-way.
                network.transportConfiguration(
                    CurlTransport.Configuration(connectTimeout: .seconds(3), timeout: deadline + .seconds(1)))
            }
            byNetwork[network] = made
            return made
        }
        let accounts = {
            var accounts = AccountState(environment: context.environment)
            accounts.writesNothing = selection.store.backendDescription == "memory"
            return accounts
        }()
        // The accounts file, read once, while the keyring is searched: each provider's active
        // account and each login's last usage come from it.
        let snapshot = Task(executorPreference: currentTaskExecutorPreference) { await accounts.snapshot() }
        // A login the accounts file records will be checked with its provider: libcurl (thirty
        // libraries, several milliseconds) starts loading now, beside the keyring's search, rather
        // than once the search has found the login. With none recorded, it loads only if a search
        // finds one.
        let early = Task(executorPreference: currentTaskExecutorPreference) {
            let state = await snapshot.value
            for (entry, transport) in zip(names, transports) where Self.expectsLogins(state, names: [entry.name]) {
                transport.prepare()
            }
        }
        // On the command's executor (its main thread), as the command itself: an unstructured
        // task does not inherit that preference, and would start the global pool's threads.
        let gather = Task(executorPreference: currentTaskExecutorPreference) {
            await withTaskGroup(of: (Int, ProviderReport?).self) { group in
                for (index, entry) in names.enumerated() {
                    group.addTask {
                        let report = await Self.report(
                            name: entry.name, plugin: entry.plugin, configuration: configuration, selection: selection,
                            transport: transports[index], accounts: accounts, snapshot: snapshot, deadline: deadline,
                            context: context)
                        return (index, report)
                    }
                }
                var reports: [ProviderReport?] = Array(repeating: nil, count: names.count)
                for await (index, report) in group { reports[index] = report }
                return reports.compactMap { $0 }
            }
        }
        // Bounded: what has not answered by the deadline is cancelled and reported as unverified.
        let timer = Task(executorPreference: currentTaskExecutorPreference) {
            try await Task.sleep(for: deadline)
            gather.cancel()
        }
        let providers = await gather.value
        timer.cancel()
        // libcurl may still be loading for a provider whose logins needed no request.
        await early.value
        for transport in byNetwork.values { await transport.finishPreparing() }
        let report = Report(version: Self.schemaVersion, providers: providers)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            context.io.write(String(decoding: try encoder.encode(report), as: UTF8.self) + "\n")
        } else {
            context.io.write(Self.text(report, terminal: context.terminal.standardOutput))
        }
        return Self.exitStatus(report)
    }

    /// Whether the accounts file records an active login for one of the providers `names`.
    static func expectsLogins(_ snapshot: AccountState.Snapshot, names: [String]) -> Bool {
        names.contains { snapshot.hasActiveAccount(for: ProviderID($0)) }
    }

    /// One provider's report; `nil` for a provider with neither logins nor usable settings.
    private static func report(
        name: String, plugin: any ProviderPlugin, configuration: DesktopConfiguration, selection: StorageSelection,
        transport: LazyTransport, accounts: AccountState, snapshot: Task<AccountState.Snapshot, Never>,
        deadline: Duration, context: CommandContext
    ) async -> ProviderReport? {
        let id = ProviderID(name)
        var report = ProviderReport(
            provider: name, displayName: plugin.displayName, appID: nil, emulator: false, details: [:],
            storage: Storage(backend: selection.kind, description: selection.backend, reason: selection.reason),
            problem: nil, unreadable: [], accounts: [])
        // Reading the logins opens the keyring's encrypted session (a Diffie-Hellman exchange),
        // and checking them loads libcurl's thirty libraries: several milliseconds each. When a
        // cheap search finds a login, libcurl loads on another thread while the session opens;
        // when it finds nothing, there is nothing to read. (When the search fails, the listing
        // meets the same failure and reports it.)
        let found = try? await selection.store.containsEntries(provider: id)
        if found == true { transport.prepare() }
        let listing: CredentialListing
        do {
            listing =
                found == false
                ? CredentialListing(credentials: [], unreadable: [])
                : try await selection.store.listing(provider: id)
        } catch {
            let failure = CommandFailure.from(error, provider: name)
            report.problem = "The stored logins could not be read: \(failure.message)"
            report.storeFailure = failure.status
            return report
        }
        report.unreadable = listing.unreadable.map { Unreadable(account: $0.key?.account, problem: $0.problem) }
        let connected: any ConnectedProvider
        do {
            connected = try await plugin.connect(
                ProviderConnectionRequest(
                    instance: name, configuration: configuration, environment: context.environment,
                    terminal: context.terminal, transport: transport, emulators: .sesame, purpose: .status))
        } catch {
            guard !listing.credentials.isEmpty || !listing.unreadable.isEmpty else { return nil }
            let failure = Task.isCancelled ? nil : CommandFailure.from(error, provider: name)
            let why = failure?.message ?? "no answer within \(deadline)"
            if let failure, failure.status == ExitStatus.config {
                report.settingFailure = failure.status
                report.problem = "The logins could not be checked, since a setting is wrong: \(why)"
            } else {
                report.problem = "Could not reach the provider to check the logins: \(why)"
            }
            let state = await snapshot.value
            let active = state.activeAccount(for: id)
            report.accounts = []
            for credential in listing.credentials {
                var account = AccountReport(
                    credential, active: credential.key.account == active,
                    check: AccountCheck(validity: .unverified, problem: "could not verify: \(why)"),
                    lastUsage: state.lastUsage(for: credential.key))
                account.usageText = account.lastUsage.flatMap(plugin.describeUsage)
                report.accounts.append(account)
            }
            return report
        }
        report.appID = connected.appID
        report.emulator = connected.isEmulated
        report.details = connected.details
        // This app's logins at this issuer, and those stored before issuers were recorded.
        let credentials = listing.credentials.filter {
            $0.key.appID == connected.appID && ($0.key.issuer == connected.issuer || $0.key.issuer == nil)
        }
        let store = selection.store
        let checks = await withTaskGroup(of: (Int, AccountCheck).self) { group in
            for (index, credential) in credentials.enumerated() {
                let session = connected.session(account: credential.key.account, store: store)
                let condition = session.condition(of: credential)
                group.addTask {
                    let check = await AccountCheck.judging(condition) { await connected.check(credential) }
                    // A refusal seen here is kept on the login: its next use renews it.
                    if check.tokenRefused { try? await session.recordRefusal(of: credential.token) }
                    return (index, check)
                }
            }
            var checks = [AccountCheck](repeating: AccountCheck(validity: .unverified), count: credentials.count)
            for await (index, check) in group { checks[index] = check }
            return checks
        }
        await connected.shutdown()
        // A check that failed here (a state file that could not be written, 73), not at the
        // provider, says the status as a wrong setting does: trying again later does not help.
        report.settingFailure = report.settingFailure ?? checks.lazy.compactMap(\.status).first?.rawValue
        let state = await snapshot.value
        let active = state.activeAccount(for: connected.providerID, appID: connected.appID)
        report.accounts = []
        for (credential, check) in zip(credentials, checks) {
            var check = check
            if Task.isCancelled, check.validity == .unverified {
                check.problem = "could not verify: no answer within \(deadline)"
            } else if check.validity == .unverified {
                check.problem = "could not verify: \(check.problem ?? "no answer")"
            }
            if let usage = check.usage { try? await accounts.recordUsage(usage, for: credential.key) }
            var account = AccountReport(
                credential, active: credential.key.account == active, check: check,
                lastUsage: check.usage ?? state.lastUsage(for: credential.key))
            account.usageText = account.lastUsage.flatMap(plugin.describeUsage)
            report.accounts.append(account)
        }
        return report
    }

    /// 0 when every provider's active login works; the store's status (69 for a locked or
    /// missing keyring, 74 for an unreadable file) when the stored logins could not be read,
    /// since nobody can tell then whether anything is logged in; 78 when a provider's settings
    /// are wrong; 77 when nothing is logged in or an active login needs a new one; 75 when an
    /// active login could not be verified.
    static func exitStatus(_ report: Report) -> Int32 {
        if let failure = report.providers.lazy.compactMap(\.storeFailure).first { return failure }
        if let failure = report.providers.lazy.compactMap(\.settingFailure).first { return failure }
        let actives = report.providers.compactMap { provider in provider.accounts.first(where: \.active) }
        let anyLogin = report.providers.contains { !$0.accounts.isEmpty }
        if !anyLogin || actives.contains(where: { $0.validity == .invalid }) { return ExitStatus.permission }
        if actives.contains(where: { $0.validity == .unverified }) { return ExitStatus.temporaryFailure }
        return ExitStatus.success
    }

    /// One permission and the objects it was granted for (`granular_scopes`), in `--json`.
    struct GrantTargets: Codable, Sendable, Equatable {
        var scope: String
        var targetIDs: [String]

        enum CodingKeys: String, CodingKey {
            case scope
            case targetIDs = "target_ids"
        }

        /// What `token` records, in the order stored.
        static func of(_ token: AccessToken) -> [GrantTargets] {
            token.grantTargets.map { GrantTargets(scope: $0.permission, targetIDs: $0.targets) }
        }

        /// "pages_show_list for 1, 2": one line per permission granted for objects.
        static func lines(_ entries: [GrantTargets]) -> [String] {
            entries.filter { !$0.targetIDs.isEmpty }.map {
                "\($0.scope) for \($0.targetIDs.joined(separator: ", "))".sanitizedForTerminal
            }
        }
    }

    /// The report in words.
    static func text(_ report: Report, terminal: Terminal) -> String {
        var text = ""
        if report.providers.allSatisfy({ $0.accounts.isEmpty && $0.storeFailure == nil }) {
            let program = Desktop.programName
            text +=
                "Not logged in to any provider; log in with '\(program) login PROVIDER' (see '\(program) providers').\n"
        }
        for provider in report.providers {
            text += terminal.bold(provider.provider) + " (\(provider.displayName)"
            // An app that is a host is named by the details already.
            if let app = provider.appID, !provider.details.values.contains(app) { text += ", app \(app)" }
            if provider.emulator { text += ", Sesame's built-in emulator" }
            for (key, value) in provider.details.sorted(by: { $0.key < $1.key }) {
                text += ", \(key) \(value.sanitizedForTerminal)"
            }
            text += ")\n  storage: \(provider.storage.description) — \(provider.storage.reason)\n"
            if let problem = provider.problem { text += "  " + terminal.yellow("!") + " \(problem)\n" }
            if provider.accounts.isEmpty && provider.unreadable.isEmpty && provider.storeFailure == nil {
                text += "  not logged in; run '\(Desktop.programName) login \(provider.provider)'\n"
            }
            for account in provider.accounts {
                // Marked in words: a check mark beside "could not verify" read as "OK".
                let active = account.active ? " " + terminal.bold("(active)") : ""
                let user = [
                    account.userName?.sanitizedForTerminal, account.userID.map { "(\($0.sanitizedForTerminal))" },
                ]
                .compactMap { $0 }.joined(separator: " ")
                text += "  \(account.account.sanitizedForTerminal)\(active): \(user)\n"
                text += "      granted: \(account.granted.joined(separator: ", ").sanitizedForTerminal)\n"
                if !account.declined.isEmpty {
                    text += "      declined: \(account.declined.joined(separator: ", ").sanitizedForTerminal)\n"
                }
                for line in GrantTargets.lines(account.granularScopes) { text += "      \(line)\n" }
                text += "      expires: \(account.expiresAt ?? "never")"
                if let until = account.dataAccessExpiresAt { text += "; data access until \(until)" }
                text += "\n"
                switch account.validity {
                case .valid:
                    text += "      checked with the provider just now: it works\n"
                case .invalid:
                    text += "      " + terminal.red("needs a new login") + ": \(account.problem ?? "")"
                    text +=
                        " Run '\(Desktop.programName) login \(provider.provider) --account \(account.account.sanitizedForTerminal)'.\n"
                case .unverified:
                    text += "      " + terminal.yellow("\(account.problem ?? "could not verify")") + "\n"
                case .notChecked:
                    text += "      \(account.problem ?? "not checked online (judged from what is stored)")\n"
                }
                if let usage = account.usageText { text += "      last usage: \(usage.sanitizedForTerminal)\n" }
            }
            for entry in provider.unreadable {
                text += "  " + terminal.red("✗") + " an unreadable stored entry"
                if let account = entry.account {
                    text += " (account '\(account.sanitizedForTerminal)'): \(entry.problem.sanitizedForTerminal) "
                    text +=
                        "Remove it with '\(Desktop.programName) logout \(provider.provider) --account \(account.sanitizedForTerminal)'.\n"
                } else {
                    text += ": \(entry.problem.sanitizedForTerminal)\n"
                }
            }
        }
        return text
    }
}

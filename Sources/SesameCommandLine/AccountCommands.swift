import Foundation
import Sesame
import SesameCurl
import SesameDesktop

/// Runs `login`, `token`, `logout`, `switch` and `permissions` for any provider plug-in: the
/// accounts, the active account, the store and the messages are the same for every provider;
/// what differs is asked of the plug-in.
struct AccountCommands {
    var command: ProviderCommand
    var context: CommandContext

    private var io: CommandIO { context.io }
    /// How long one request to a provider may take, unless `--timeout` says otherwise.
    static let requestTimeout: Duration = .seconds(60)
    /// The most standard input may hold for a token or a secret (`--with-token`,
    /// `--client-secret-stdin`); reading stops just past it.
    static let maximumSecretSize = 16 * 1024
    private var name: String { command.provider }

    func run() async throws -> Int32 {
        if case .kubectlCredential = command.action {
            // What kubectl asks for is checked before anything is connected or read.
            _ = try KubernetesExecInfo.read(context.environment["KUBERNETES_EXEC_INFO"], inputIsTerminal: false)
        }
        return try await withConnection { connected, storage, accountState in
            try await run(connected, storage: storage, accountState: accountState)
        }
    }

    /// A token of the command's account good to use now, renewed first when due: the path
    /// `sesame token` takes, for the helpers that hand a token to another program.
    ///
    /// - Throws: ``CommandFailure`` (77) when there is no login; the session's errors otherwise.
    func validToken() async throws -> AccessToken {
        try await withConnection { connected, storage, accountState in
            let account =
                command.account ?? accountState?.activeAccount(for: connected.providerID, appID: connected.appID)
                ?? "default"
            var accounts = AccountState(environment: context.environment)
            accounts.writesNothing = storage.store.backendDescription == "memory"
            var minValid: Duration?
            if case .token(let options) = command.action { minValid = options.minValid }
            let started = Date()
            let token = try await validToken(
                connected, store: storage.store, key: connected.key(account: account), accounts: accounts,
                validFor: minValid ?? .zero)
            try Self.checkLasts(token, minValid, since: started, label: connected.label, provider: name)
            return token
        }
    }

    /// Resolves the configuration and the provider, connects it beside the storage, runs `body`
    /// and shuts the connection down however `body` ends.
    private func withConnection<T>(
        _ body: (any ConnectedProvider, StorageSelection, AccountState.Snapshot?) async throws -> T
    ) async throws -> T {
        var noBrowser = false
        if case .login(let login) = command.action { noBrowser = login.noBrowser }
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(storage: command.storage, noBrowser: noBrowser), environment: context.environment)
        let plugin = try resolvePlugin(configuration)
        let network = try NetworkSettings.resolve(
            instance: name, plugin: plugin, configuration: configuration, environment: context.environment)
        if case .permissions = command.action, plugin.permissionSupport.isEmpty {
            throw CommandFailure(
                "\(plugin.displayName) logins choose their scopes when logging in; log in again with "
                    + "'\(Desktop.programName) login \(name) --scopes a,b'.", status: ExitStatus.usage)
        }
        // The active account is read (on a thread of its own) while the keyring connects, not
        // after: `sesame token` waited 2-4 ms for it between the two.
        async let accountState = Self.accountState(context.environment, needed: command.account == nil)
        var flags: [String: String] = [:]
        if case .login(let login) = command.action { flags = login.options }
        var timeout = Self.requestTimeout
        if case .token(let options) = command.action { timeout = options.timeout ?? timeout }
        let request = ProviderConnectionRequest(
            instance: name, flags: flags, configuration: configuration, environment: context.environment,
            terminal: context.terminal,
            transport: LazyTransport.curl { [timeout] in
                var base = CurlTransport.Configuration(timeout: timeout)
                base.connectTimeout = min(base.connectTimeout, timeout)
                return network.transportConfiguration(base)
            },
            emulators: .sesame,
            purpose: command.action.isLogin ? .login : .use,
            readSecret: { [io] prompt in
                let data = await io.readSecret(prompt, Self.maximumSecretSize)
                guard data.count <= Self.maximumSecretSize else {
                    throw CommandFailure(
                        "What standard input gave is longer than \(Self.maximumSecretSize / 1024) KiB, too long for a "
                            + "secret; pipe in the secret alone.", status: ExitStatus.dataError)
                }
                return String(decoding: data, as: UTF8.self)
            })
        let storage: StorageSelection
        let connected: any ConnectedProvider
        if command.action.isLogin {
            storage = try await DesktopStorage.select(
                configuration.storage, keyring: context.keyring, environment: context.environment)
            // Before anything starts or anyone is asked to approve anything: a login that cannot be
            // kept is not started.
            try await storage.store.checkWritable(
                for: CredentialKey(provider: ProviderID(name), appID: "sesame", account: command.account ?? "default"))
            connected = try await plugin.connect(request)
        } else {
            // A connection for use shows nothing and starts nothing (an emulator starts when first
            // called), so it is made while the keyring connects; a provider's discovery
            // request then overlaps the keyring's round trips. The storage's failure is reported
            // first, as when the two followed each other.
            (storage, connected) = try await Self.storageBeside(
                connect: { try await plugin.connect(request) },
                select: { [context] in
                    try await DesktopStorage.select(
                        configuration.storage, keyring: context.keyring, environment: context.environment)
                })
        }
        do {
            // Behind another process's renewal, a command waits one request timeout and a margin at most.
            let state = await accountState
            let value = try await RefreshLock.$waitLimit.withValue(timeout + .seconds(5)) {
                try await body(connected, storage, state)
            }
            await connected.shutdown()
            return value
        } catch {
            await connected.shutdown()
            throw error
        }
    }

    /// The one way a command takes a token from a stored login: the session opens it from the
    /// store and the core renews it when due (one renewal however many processes ask at once).
    /// A login the provider ended is let go: another account becomes the active one.
    /// `handedExpiry` reads the expiry of the token the command hands on when it is not the access
    /// token (kubectl's ID token): the login is renewed when that one is due too, and when the
    /// token would expire within `validFor` (`--min-valid`).
    func validToken(
        _ connected: any ConnectedProvider, store: any CredentialStore, key: CredentialKey, accounts: AccountState,
        handedExpiry: (@Sendable (AccessToken) -> Date?)? = nil, validFor: Duration = .zero
    ) async throws -> AccessToken {
        let session = connected.session(account: key.account, store: store)
        guard try await session.open() else { throw notLoggedIn(key, connected: connected) }
        do {
            let token = try await session.validToken(handedExpiry: handedExpiry, validFor: validFor)
            if let warning = session.warning(for: token) { io.writeError(warning + "\n") }
            return token
        } catch {
            await switchAwayIfGone(key, accounts: accounts, store: store)
            throw error
        }
    }

    private func resolvePlugin(_ configuration: DesktopConfiguration) throws -> any ProviderPlugin {
        if let plugin = try Desktop.plugin(named: name, configuration: configuration) { return plugin }
        // A new name (an instance, such as an issuer's) is made by logging in to it with its settings given.
        if case .login(let login) = command.action, let plugin = ProviderTable.plugin(forName: name),
            !login.options.isEmpty
                || plugin.settings(instance: name).contains(where: {
                    $0.environment.flatMap { context.environment[$0] } != nil
                })
        {
            return plugin
        }
        let known = try Desktop.names(configuration: configuration).map(\.name)
        let near = Suggestion.closest(to: name, in: known).map { " (did you mean '\($0)'?)" } ?? ""
        let hint =
            ProviderTable.plugin(forName: name)?.newInstanceHint(name.sanitizedForTerminal).map { " \($0)" } ?? ""
        throw CommandFailure(
            "unknown provider '\(name.sanitizedForTerminal)'\(near); known providers: "
                + "\(known.joined(separator: ", ")).\(hint)", status: ExitStatus.usage)
    }

    /// The storage and the provider's connection, made side by side. A storage failure is thrown
    /// before the connection's; the connection is then cancelled (an issuer's discovery request
    /// does not hold up the error), and shut down if it was made all the same.
    private static func storageBeside(
        connect: @escaping @Sendable () async throws -> any ConnectedProvider,
        select: () async throws -> StorageSelection
    ) async throws -> (StorageSelection, any ConnectedProvider) {
        try await withThrowingTaskGroup(of: (any ConnectedProvider).self) { group in
            group.addTask { try await connect() }
            let storage: StorageSelection
            do {
                storage = try await select()
            } catch {
                group.cancelAll()
                if let connected = try? await group.next() { await connected.shutdown() }
                throw error
            }
            guard let connected = try await group.next() else { throw CancellationError() }
            return (storage, connected)
        }
    }

    /// The accounts file as it is now, when the command needs its active account.
    private static func accountState(_ environment: [String: String], needed: Bool) async -> AccountState.Snapshot? {
        needed ? await AccountState(environment: environment).snapshot() : nil
    }

    private func run(
        _ connected: any ConnectedProvider, storage: StorageSelection, accountState: AccountState.Snapshot?
    ) async throws -> Int32 {
        var accounts = AccountState(environment: context.environment)
        accounts.writesNothing = storage.store.backendDescription == "memory"
        let account =
            command.account ?? accountState?.activeAccount(for: connected.providerID, appID: connected.appID)
            ?? "default"
        let key = connected.key(account: account)
        switch command.action {
        case .login(let login):
            return try await self.login(login, key: key, connected: connected, storage: storage, accounts: accounts)
        case .token(let options):
            // A token that is still valid is printed even when it expires soon; the warning
            // goes to standard error, where a script's $(sesame token ...) does not take it.
            return try await token(options, connected: connected, store: storage.store, key: key, accounts: accounts)
        case .kubectlCredential(let options):
            return try await kubectlCredential(
                options, connected: connected, store: storage.store, key: key, accounts: accounts)
        case .logout(let revoke, let timeout):
            return try await logout(
                key, revoke: revoke, timeout: timeout, connected: connected, storage: storage, accounts: accounts)
        case .switchAccount(let target):
            let targetKey = key.with(account: target)
            guard (try? await storage.store.load(targetKey)) != nil else {
                let known = try await logins(of: key, in: storage.store).map(\.account)
                throw CommandFailure(
                    "No login to \(connected.label) is named '\(target.sanitizedForTerminal)'"
                        + (known.isEmpty ? "" : " (logins: \(known.joined(separator: ", ")))")
                        + "; log in to it with '\(Desktop.programName) login \(name) --account \(target.sanitizedForTerminal)'.",
                    status: ExitStatus.permission)
            }
            try await accounts.setActiveAccount(target, for: key.provider, appID: key.appID)
            io.write("The account '\(target.sanitizedForTerminal)' of \(connected.label) is now the active one.\n")
            return ExitStatus.success
        case .permissions(let action):
            let session = connected.session(account: account, store: storage.store)
            guard try await session.open() else { throw notLoggedIn(key, connected: connected) }
            do {
                try await permissions(action, session: session)
            } catch {
                if let usage = session.lastUsage { try? await accounts.recordUsage(usage, for: key) }
                // An error that ends the login (the person removed the app) clears it: another
                // stored login becomes the active one, as after a logout.
                await switchAwayIfGone(key, accounts: accounts, store: storage.store)
                throw error
            }
            if let usage = session.lastUsage { try? await accounts.recordUsage(usage, for: key) }
            return ExitStatus.success
        }
    }

    private func permissions(_ action: ProviderCommand.PermissionsAction, session: any AccountSession) async throws {
        switch action {
        case .list(let json):
            let permissions = try await session.listPermissions()
            // The objects each permission was granted for, as recorded on the login.
            let targets = StatusCommand.GrantTargets.of(try await session.validToken())
            if json {
                struct Listing: Encodable {
                    var granted: [String]
                    var declined: [String]
                    var granularScopes: [StatusCommand.GrantTargets]
                    enum CodingKeys: String, CodingKey {
                        case granted, declined
                        case granularScopes = "granular_scopes"
                    }
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                let listing = Listing(
                    granted: permissions.granted.sorted(), declined: permissions.declined.sorted(),
                    granularScopes: targets)
                io.write(String(decoding: try encoder.encode(listing), as: UTF8.self) + "\n")
                return
            }
            for permission in permissions.granted.sorted() {
                let objects =
                    targets.first { $0.scope == permission && !$0.targetIDs.isEmpty }
                    .map { "  for \($0.targetIDs.joined(separator: ", "))".sanitizedForTerminal } ?? ""
                io.write("granted   \(permission.sanitizedForTerminal)\(objects)\n")
            }
            for permission in permissions.declined.sorted() {
                io.write("declined  \(permission.sanitizedForTerminal)\n")
            }
        case .request(let names, let options):
            let outcome = try await session.requestPermissions(names, options: options)
            io.write("granted: \(outcome.granted.sorted().joined(separator: ", ").sanitizedForTerminal)\n")
            if !outcome.declined.isEmpty {
                io.write("declined: \(outcome.declined.sorted().joined(separator: ", ").sanitizedForTerminal)\n")
            }
        case .revoke(let permission):
            try await session.revokePermission(permission)
            io.write("Revoked \(permission.sanitizedForTerminal).\n")
        }
    }

    // MARK: login

    private func login(
        _ login: ProviderCommand.Login, key: CredentialKey, connected: any ConnectedProvider,
        storage: StorageSelection, accounts: AccountState
    ) async throws -> Int32 {
        let flow: LoginOptions.Flow
        if login.withToken {
            flow = .existingToken(try await readToken())
        } else if login.web {
            flow = .browser(openBrowser: !login.noBrowser)
        } else if login.device {
            flow = .device
        } else {
            // With --no-browser too: device login where the provider has it, else the browser
            // login's address to open anywhere (the configuration says no browser opens here).
            flow = .automatic
        }
        // A stored login that cannot be read never blocks a new one.
        let previous = try? await storage.store.load(key)
        let options = LoginOptions(flow: flow, scopes: login.scopes)
        let (account, store) = (key.account, storage.store)
        let result = try await Interrupt.cancelling {
            try await connected.logIn(options, account: account, store: store)
        }
        try await accounts.setActiveAccount(key.account, for: key.provider, appID: key.appID)
        let token = result.token
        let subject = token.userID ?? "?"
        let who =
            result.userName.map { "\($0.sanitizedForTerminal) (\(subject.sanitizedForTerminal))" }
            ?? subject.sanitizedForTerminal
        let granted = token.permissions.granted.sorted().joined(separator: ", ").sanitizedForTerminal
        var text = "Logged in to \(connected.label) as \(who), account '\(key.account)'; granted: \(granted). "
        text += "Stored in \(storage.backend)"
        text += "."
        if previous != nil { text += " It replaces the login stored before under that account." }
        io.write(text + "\n")
        return ExitStatus.success
    }

    /// Reads a token from standard input, refusing what cannot be one.
    private func readToken() async throws -> String {
        // On a terminal: a prompt, echo off, Enter ends it. From a pipe: everything to the end.
        let data = await io.readSecret("Paste the access token, then press Enter: ", Self.maximumSecretSize)
        guard data.count <= Self.maximumSecretSize else {
            throw CommandFailure(
                "What standard input gave is longer than \(Self.maximumSecretSize / 1024) KiB, too long for an access "
                    + "token; pipe in the token alone.", status: ExitStatus.dataError)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CommandFailure(
                "What standard input gave is not text; pipe in the access token alone.", status: ExitStatus.dataError)
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else {
            throw CommandFailure(
                "Standard input gave no token; pipe it in, as in '\(Desktop.programName) login \(name) --with-token < token.txt'.",
                status: ExitStatus.dataError)
        }
        guard !token.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == " " }) else {
            throw CommandFailure(
                "What standard input gave is not an access token (it has spaces or control characters inside); "
                    + "pipe in the token alone.", status: ExitStatus.dataError)
        }
        return token
    }

    // MARK: logout

    /// How long `logout --revoke` waits for the provider unless `--timeout` says otherwise.
    static let defaultRevokeTimeout: Duration = .seconds(15)

    private func logout(
        _ key: CredentialKey, revoke: Bool, timeout: Duration, connected: any ConnectedProvider,
        storage: StorageSelection, accounts: AccountState
    ) async throws -> Int32 {
        let store = storage.store
        let stored: StoredCredential?
        var unreadable = false
        do {
            stored = try await store.load(key)
        } catch let error as CredentialStoreError where error.kind == .corrupt {
            stored = nil
            unreadable = true
        }
        if stored == nil, !unreadable, key.issuer != nil {
            // A login stored before issuers were recorded, under the same names: this is how it goes.
            var legacy = key
            legacy.issuer = nil
            if try await store.load(legacy) != nil {
                try await store.delete(legacy)
                io.write(
                    "Removed the \(connected.label) login of account '\(key.account.sanitizedForTerminal)' that was "
                        + "stored before Sesame recorded issuers.\n")
                return ExitStatus.success
            }
        }
        guard stored != nil || unreadable else { throw notLoggedIn(key, connected: connected) }
        var note: String?
        var revocation: RevocationFailed?
        var who = stored?.token.userID
        let session = connected.session(account: key.account, store: store)
        if let stored, !stored.needsLogin, (try? await session.open()) == true {
            who = await session.userID ?? who
            if revoke {
                io.writeError(
                    "Revoking the access at \(connected.label) (waiting up to \(timeout.formattedSeconds); "
                        + "--timeout SECONDS changes that)…\n")
            }
            do {
                guard
                    let done = try await Self.within(
                        revoke ? timeout : nil, { try await session.logOut(revoke: revoke) })
                else {
                    // The provider is silent: the login goes here all the same, and the person is
                    // told where to revoke it by hand.
                    try await store.delete(key)
                    return try await finishLogout(
                        key, who: who, note: nil, connected: connected, storage: storage, accounts: accounts,
                        failure: "the provider did not answer the revocation within \(timeout.formattedSeconds); "
                            + "revoke the app's access in \(connected.label)'s settings, or log in again and retry "
                            + "with a longer --timeout")
                }
                note = done
            } catch let failure as RevocationFailed {
                revocation = failure
            }
        } else {
            // Unreadable, expired or refused: nothing to revoke, only to remove.
            try await store.delete(key)
            if unreadable { note = "the stored entry could not be read, and was removed" }
        }
        return try await finishLogout(
            key, who: who, note: note, connected: connected, storage: storage, accounts: accounts,
            failure: revocation?.description)
    }

    /// The end of a logout: the login must be gone from the store; says so, makes another
    /// account active when needed, and fails with 69 when revoking failed (`failure`).
    private func finishLogout(
        _ key: CredentialKey, who: String?, note: String?, connected: any ConnectedProvider,
        storage: StorageSelection, accounts: AccountState, failure: String?
    ) async throws -> Int32 {
        let store = storage.store
        if await isStored(key, in: store) != false {
            throw CommandFailure(
                "The login of account '\(key.account)' could not be removed from \(storage.backend); it is still "
                    + "stored. Check that the store is writable and try again.", status: ExitStatus.ioError)
        }
        var text = "Logged out of \(connected.label) account '\(key.account)'"
        if let who { text += " (user \(who.sanitizedForTerminal))" }
        if let note { text += "; \(note)" }
        io.write(text + ".\n")
        await switchAwayIfGone(key, accounts: accounts, store: store)
        if let failure {
            throw CommandFailure("The login was removed here, but \(failure).", status: ExitStatus.unavailable)
        }
        return ExitStatus.success
    }

    /// What `body` returns, or `nil` when it has not finished within `limit` (it is then
    /// cancelled); without a limit, simply `body`'s result.
    static func within<T: Sendable>(
        _ limit: Duration?, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T? {
        guard let limit else { return try await body() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// When the active account's login is gone (logged out, or cleared by the provider's
    /// error), makes another stored login of the same app the active one, as `gh` does.
    private func switchAwayIfGone(_ key: CredentialKey, accounts: AccountState, store: any CredentialStore) async {
        guard await accounts.activeAccount(for: key.provider, appID: key.appID) == key.account,
            await isStored(key, in: store) == false,
            let remaining = try? await logins(of: key, in: store)
        else { return }
        guard let next = remaining.first else {
            // The last login of this app: no active account to remember (and `status` need not
            // expect one).
            try? await accounts.clearActiveAccount(key.account, for: key.provider, appID: key.appID)
            return
        }
        guard (try? await accounts.setActiveAccount(next.account, for: key.provider, appID: key.appID)) != nil else {
            return
        }
        context.io.writeError("Account '\(next.account)' is now the active one.\n")
    }

    /// Whether `key` has a stored entry, readable or not; `nil` when the store cannot tell.
    private func isStored(_ key: CredentialKey, in store: any CredentialStore) async -> Bool? {
        do {
            return try await store.load(key) != nil
        } catch let error as CredentialStoreError where error.kind == .corrupt {
            return true
        } catch {
            return nil
        }
    }

    /// The keys of the stored logins of `key`'s provider and app, sorted.
    private func logins(of key: CredentialKey, in store: any CredentialStore) async throws -> [CredentialKey] {
        try await store.listing(provider: key.provider).credentials.map(\.key).filter { $0.appID == key.appID }
            .sorted()
    }

    func notLoggedIn(_ key: CredentialKey, connected: any ConnectedProvider) -> CommandFailure {
        CommandFailure(
            "Not logged in to \(connected.label) as '\(key.account)'; log in with '\(Desktop.programName) login \(name)"
                + (key.account == "default" ? "" : " --account \(key.account)") + "'.", status: ExitStatus.permission)
    }
}

extension ProviderCommand.Action {
    var isLogin: Bool {
        if case .login = self { return true }
        return false
    }
}

/// Ctrl-C during a login: the login is cancelled rather than the process killed, so that what it
/// started ends its own way — the presenter's spinner line ends with "Cancelled.", the built-in
/// emulator saves its state and lets go of its lock file — and the command then exits 130, as a
/// shell expects of an interrupted program.
enum Interrupt {
    /// The status of a command interrupted by SIGINT (128 + 2).
    static let status: Int32 = 130

    /// Runs `body`, cancelling it when SIGINT arrives.
    ///
    /// - Throws: what `body` throws; ``CommandFailure`` (130) when SIGINT cancelled it.
    static func cancelling<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return try await body() }
        defer {
            close(ends[0])
            close(ends[1])
        }
        // Never blocks the signal handler: a full pipe has woken the watcher already.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        guard let caught = try? CaughtSignal(SIGINT, into: ends[1]) else { return try await body() }
        defer { caught.restore() }
        let work = Task { try await body() }
        let (reader, writer) = (ends[0], ends[1])
        let watcher = Task {
            // One byte: SIGINT's number from the handler, or 0 when the work ended first.
            let byte = await onOwnThread { () -> UInt8 in
                var byte: UInt8 = 0
                while read(reader, &byte, 1) < 0 && errno == EINTR {}
                return byte
            }
            if byte == UInt8(SIGINT) { work.cancel() }
            return byte == UInt8(SIGINT)
        }
        let result = await work.result
        var done: UInt8 = 0
        _ = write(writer, &done, 1)
        if await watcher.value, case .failure = result {
            throw CommandFailure("The login was cancelled (Ctrl-C).", status: status)
        }
        return try result.get()
    }
}

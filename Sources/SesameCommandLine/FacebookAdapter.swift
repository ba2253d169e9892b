import Foundation
import Sesame
import SesameDesktop
import SesameFacebook

/// `sesame ... facebook`: the Facebook provider on the command line, through ``SesameDesktop``.
struct FacebookAdapter: ProviderAdapter {
    var name: String { "facebook" }
    var summary: String {
        "Facebook Login (device login, browser with loopback redirect, or an existing token) and the Graph API; "
            + "the built-in emulator when no app id is configured."
    }
    var environmentVariables: [String] {
        [
            "SESAME_FACEBOOK_APP_ID", "SESAME_FACEBOOK_CLIENT_TOKEN", "SESAME_FACEBOOK_GRAPH_URL",
            "SESAME_FACEBOOK_DIALOG_URL", "SESAME_FACEBOOK_GRAPH_VERSION",
        ]
    }

    private func desktop(
        _ context: CommandContext, appID: String? = nil, storage: StorageMode?, announce: Bool = true
    ) async throws -> DesktopFacebook {
        try await Desktop.facebook(
            overrides: .init(facebookAppID: appID, storage: storage), environment: context.environment,
            terminal: context.terminal, keyring: context.keyring, announce: announce)
    }

    func run(_ command: ProviderCommand, context: CommandContext) async throws -> Int32 {
        var appID: String?
        if case .login(let login) = command.action { appID = login.appID }
        let desktop = try await desktop(context, appID: appID, storage: command.storage)
        do {
            let status = try await run(command, desktop: desktop, context: context)
            await desktop.shutdown()
            return status
        } catch {
            await desktop.shutdown()
            throw error
        }
    }

    private func run(
        _ command: ProviderCommand, desktop: DesktopFacebook, context: CommandContext
    ) async throws -> Int32 {
        let io = context.io
        let account = desktop.account(command.account)
        switch command.action {
        case .login(let login):
            return try await self.login(login, account: account, desktop: desktop, io: io)
        case .token:
            let session = desktop.session(account: account)
            guard try await session.openActiveSession(allowLoginUI: false).isOpen else {
                throw notLoggedIn(account)
            }
            // The only place the command line prints a secret: that is what `sesame token` is for.
            io.write(try await session.validToken().tokenString + "\n")
            return ExitStatus.success
        case .logout(let revoke):
            let session = desktop.session(account: account)
            guard try await session.openActiveSession(allowLoginUI: false).isOpen else {
                throw notLoggedIn(account)
            }
            let who = Terminal.printable(await session.token?.userID ?? "?")
            do {
                try await session.logout(revoke: revoke)
            } catch {
                throw CommandFailure(
                    "Logged out of account '\(account)' here, but revoking the app's access on Facebook failed "
                        + "(\(CommandFailure.from(error, provider: name).message)); remove it in Facebook's settings.",
                    status: ExitStatus.unavailable)
            }
            io.write(
                "Logged out of Facebook account '\(account)' (user \(who))\(revoke ? "; the app's access was revoked" : "").\n"
            )
            return ExitStatus.success
        case .switchAccount(let target):
            let stored = try await desktop.storage.store.load(
                CredentialKey(provider: .facebook, appID: desktop.provider.appID, account: target))
            guard stored != nil else {
                let known = try await desktop.storage.store.list(provider: .facebook)
                    .filter { $0.key.appID == desktop.provider.appID }.map(\.key.account)
                throw CommandFailure(
                    "There is no Facebook login named '\(target)'"
                        + (known.isEmpty ? "" : " (logins: \(known.sorted().joined(separator: ", ")))")
                        + "; log in to it with 'sesame login facebook --account \(target)'.", status: ExitStatus.usage)
            }
            try desktop.accounts.setActiveAccount(target, for: .facebook)
            io.write("Facebook account '\(target)' is now the active one.\n")
            return ExitStatus.success
        case .permissions(let action):
            return try await permissions(action, account: account, desktop: desktop, io: io)
        }
    }

    private func notLoggedIn(_ account: String) -> CommandFailure {
        CommandFailure(
            "Not logged in to Facebook as '\(account)'; log in with 'sesame login facebook"
                + (account == "default" ? "" : " --account \(account)") + "'.", status: ExitStatus.permission)
    }

    private func login(
        _ login: ProviderCommand.Login, account: String, desktop: DesktopFacebook, io: CommandIO
    )
        async throws -> Int32
    {
        let key = CredentialKey(provider: .facebook, appID: desktop.provider.appID, account: account)
        if login.withToken {
            // Read from standard input, never argv (argv is visible to everyone in `ps`). Checked
            // with Facebook before anything stored is replaced.
            let ui = ExistingTokenLogin(provider: desktop.provider, transport: desktop.transport) {
                String(decoding: await io.readSecret("Paste the access token, then press Enter: "), as: UTF8.self)
            }
            let token = try await ui.logIn(
                LoginRequest(provider: .facebook, appID: desktop.provider.appID, permissions: []))
            try await desktop.storage.store.save(StoredCredential(key: key, token: token))
        } else {
            let ui: any LoginUI =
                login.web ? desktop.browserLogin(openBrowser: !login.noBrowser) : desktop.deviceLogin()
            let session = desktop.session(account: account, loginUI: ui)
            if let cached = try await desktop.storage.store.load(key), !cached.needsLogin,
                !cached.token.isExpired(at: Date())
            {
                _ = try await session.openActiveSession(allowLoginUI: false)
                io.write(
                    "Already logged in to Facebook as user \(Terminal.printable(cached.token.userID ?? "?")) (account '\(account)'). "
                        + "To log in again, run 'sesame logout facebook"
                        + (account == "default" ? "" : " --account \(account)") + "' first.\n")
                try desktop.accounts.setActiveAccount(account, for: .facebook)
                return ExitStatus.success
            }
            try await session.openActiveSession(readPermissions: login.scopes, allowLoginUI: true)
        }
        try desktop.accounts.setActiveAccount(account, for: .facebook)
        let session = desktop.session(account: account)
        try await session.openActiveSession(allowLoginUI: false)
        let me = try? await session.graph.get("me", parameters: ["fields": "id,name"])
        desktop.recordUsage(of: session)
        let token = await session.token
        let who = Terminal.printable(
            me?["name"]?.stringValue.map { "\($0) (\(token?.userID ?? "?"))" } ?? (token?.userID ?? "?"))
        io.write(
            "Logged in to \(desktop.isEmulated ? "the Facebook emulator" : "Facebook") as \(who), account '\(account)'; "
                + "granted: \(Terminal.printable((token?.permissions.granted.sorted() ?? []).joined(separator: ", "))). "
                + "Stored in \(desktop.storage.backend).\n")
        return ExitStatus.success
    }

    private func permissions(
        _ action: ProviderCommand.PermissionsAction, account: String, desktop: DesktopFacebook, io: CommandIO
    ) async throws -> Int32 {
        let session = desktop.session(account: account)
        guard try await session.openActiveSession(allowLoginUI: false).isOpen else { throw notLoggedIn(account) }
        defer { desktop.recordUsage(of: session) }
        switch action {
        case .list:
            let permissions = try await session.refreshPermissions()
            for name in permissions.granted.sorted() { io.write("granted   \(Terminal.printable(name))\n") }
            for name in permissions.declined.sorted() { io.write("declined  \(Terminal.printable(name))\n") }
        case .request(let names, let audience):
            let publish = names.filter(Self.isPublish)
            let read = names.filter { !Self.isPublish($0) }
            var outcome = PermissionRequestOutcome(granted: [], declined: [])
            if !read.isEmpty {
                let got = try await session.requestNewReadPermissions(read)
                outcome = PermissionRequestOutcome(granted: got.granted, declined: got.declined)
            }
            if !publish.isEmpty {
                let got = try await session.requestNewPublishPermissions(publish, defaultAudience: audience)
                outcome = PermissionRequestOutcome(
                    granted: outcome.granted.union(got.granted), declined: outcome.declined.union(got.declined))
            }
            io.write("granted: \(Terminal.printable(outcome.granted.sorted().joined(separator: ", ")))\n")
            if !outcome.declined.isEmpty {
                io.write("declined: \(Terminal.printable(outcome.declined.sorted().joined(separator: ", ")))\n")
            }
        case .revoke(let name):
            try await session.revokePermission(name)
            io.write("Revoked \(name).\n")
        }
        return ExitStatus.success
    }

    /// Facebook's publish permissions: `publish_*`, `manage_*`, `pages_manage_*`, `ads_management`.
    static func isPublish(_ name: String) -> Bool {
        name.hasPrefix("publish_") || name.hasPrefix("manage_") || name.hasPrefix("pages_manage_")
            || name == "ads_management" || name == "rsvp_event"
    }

    // MARK: status

    func status(storage: StorageMode?, context: CommandContext) async throws -> JSONValue {
        let desktop = try await desktop(context, storage: storage)
        // Shut down before returning, so that the emulator's state is saved before the process exits.
        do {
            let status = try await status(of: desktop)
            await desktop.shutdown()
            return status
        } catch {
            await desktop.shutdown()
            throw error
        }
    }

    private func status(of desktop: DesktopFacebook) async throws -> JSONValue {
        let active = desktop.accounts.activeAccount(for: .facebook)
        var accounts: [JSONValue] = []
        let stored = try await desktop.storage.store.list(provider: .facebook)
            .filter { $0.key.appID == desktop.provider.appID }.sorted { $0.key < $1.key }
        for credential in stored {
            let token = credential.token
            // A fixed-token client: status reads, it never closes sessions or clears tokens.
            let governor = GraphUsageGovernor()
            let graph = GraphClient(
                provider: desktop.provider, transport: desktop.transport, accessToken: token.tokenString,
                governor: governor)
            var name: JSONValue = .null
            var valid: JSONValue = .null
            var problem: JSONValue = .null
            do {
                name = try await graph.get("me", parameters: ["fields": "id,name"])["name"] ?? .null
                valid = .bool(true)
            } catch let error as AuthError {
                if error.closesSession { valid = .bool(false) }
                problem = .string(error.userMessage ?? error.message)
            }
            if let usage = governor.lastUsage { try? desktop.accounts.recordUsage(usage.json, for: credential.key) }
            func date(_ date: Date?) -> JSONValue { date.map { .string($0.ISO8601Format()) } ?? .null }
            accounts.append(
                .object([
                    "account": .string(credential.key.account),
                    "active": .bool(credential.key.account == active),
                    "user_id": token.userID.map { .string($0) } ?? .null,
                    "user_name": name,
                    "granted": .array(token.permissions.granted.sorted().map { .string($0) }),
                    "declined": .array(token.permissions.declined.sorted().map { .string($0) }),
                    "expires_at": date(token.expirationDate),
                    "data_access_expires_at": date(token.dataAccessExpirationDate),
                    "needs_login": .bool(credential.needsLogin),
                    "token_valid": valid,
                    "problem": problem,
                    "last_usage": desktop.accounts.lastUsage(for: credential.key) ?? .null,
                ]))
        }
        return .object([
            "provider": .string("facebook"),
            "app_id": .string(desktop.provider.appID),
            "emulator": desktop.emulator?.endpoints.map { .string($0.baseURL.absoluteString) } ?? .null,
            "storage": .object([
                "backend": .string(desktop.storage.backend), "reason": .string(desktop.storage.reason),
            ]),
            "accounts": .array(accounts),
        ])
    }

    // MARK: doctor

    func doctor(context: CommandContext) async -> [DoctorLine] {
        let configuration: DesktopConfiguration
        do {
            configuration = try DesktopConfiguration.resolve(environment: context.environment)
        } catch {
            return [DoctorLine(.problem, "Facebook configuration: \(error)")]
        }
        guard let appID = configuration.facebookAppID else {
            return [
                DoctorLine(
                    .info,
                    "Facebook: no app id is configured, so commands use the built-in emulator (state in "
                        + "\(context.environment["XDG_STATE_HOME"] ?? "~/.local/state")/sesame/)",
                    fix: "to use a real app, set SESAME_FACEBOOK_APP_ID (or facebook.app_id in the config file)")
            ]
        }
        var lines = [DoctorLine(.ok, "Facebook app id \(appID.value), from \(appID.source).")]
        if configuration.facebookClientToken == nil {
            lines.append(
                DoctorLine(
                    .warning, "Facebook: no client token is configured, so device login cannot work.",
                    fix: "set SESAME_FACEBOOK_CLIENT_TOKEN (App Dashboard → Settings → Advanced → Client token)"))
        }
        let transport = DoctorProbe.transport
        for (label, url) in [
            ("Graph API", configuration.facebookGraphURL?.value ?? FacebookProvider.facebookGraphBaseURL),
            ("login dialog", configuration.facebookDialogURL?.value ?? FacebookProvider.facebookDialogBaseURL),
        ] {
            lines.append(await DoctorProbe.answers(label: "Facebook \(label)", url: url, transport: transport))
        }
        return lines
    }
}

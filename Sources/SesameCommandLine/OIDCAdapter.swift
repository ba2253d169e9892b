import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameHTTPServer
import SesameOIDC

/// `sesame ... oidc` and `sesame ... NAME` for an issuer configured under a name: a generic
/// OpenID Connect provider on the command line. Tokens are stored under the provider id `NAME`
/// (`oidc` for the unnamed one) and the client id, so issuers side by side never mix.
struct OIDCAdapter: ProviderAdapter {
    var name: String

    var summary: String {
        name == "oidc"
            ? "Any OpenID Connect provider by issuer URL and client id (device login or browser with PKCE); "
                + "name several in the config file's \"oidc\" object to use them side by side."
            : "The OpenID Connect issuer configured as '\(name)'."
    }
    var environmentVariables: [String] {
        ["ISSUER", "CLIENT_ID", "SCOPES"].map { OIDCSettings.variable($0, name: name) }
    }

    private var providerID: ProviderID { ProviderID(name) }

    /// The settings, storage and transport a command runs with.
    private struct Setup {
        var settings: OIDCSettings
        var storage: StorageSelection
        var transport: CurlTransport
    }

    private func setup(
        _ context: CommandContext, storage: StorageMode?, issuer: String? = nil, clientID: String? = nil,
        command: String
    ) async throws -> Setup {
        let settings = try OIDCSettings.resolve(
            name: name, issuer: issuer, clientID: clientID, environment: context.environment, command: command)
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(storage: storage), environment: context.environment)
        let selection = try await DesktopStorage.select(
            configuration.storage, keyring: context.keyring, environment: context.environment)
        return Setup(settings: settings, storage: selection, transport: CurlTransport())
    }

    private func provider(_ setup: Setup) async throws -> OIDCProvider {
        var configuration = OIDCConfiguration(
            providerID: providerID, displayName: name == "oidc" ? nil : name, issuer: setup.settings.issuer.value,
            clientID: setup.settings.clientID.value)
        if !setup.settings.scopes.isEmpty { configuration.scopes = setup.settings.scopes }
        return try await OIDCProvider.discover(configuration, transport: setup.transport)
    }

    private var commandName: String { name }

    func run(_ command: ProviderCommand, context: CommandContext) async throws -> Int32 {
        let io = context.io
        let accounts = AccountState(environment: context.environment)
        let account = command.account ?? accounts.activeAccount(for: providerID)
        switch command.action {
        case .login(let login):
            if login.withToken || login.appID != nil {
                throw CommandFailure(
                    "sesame login \(name): --with-token and --app-id are Facebook's; an OpenID login takes --issuer, "
                        + "--client-id and --scopes.", status: ExitStatus.usage)
            }
            let setup = try await setup(
                context, storage: command.storage, issuer: login.issuer, clientID: login.clientID, command: "login")
            return try await self.login(login, account: account, setup: setup, context: context)
        case .token:
            let setup = try await setup(context, storage: command.storage, command: "token")
            let session = OIDCSession(
                provider: try await provider(setup), transport: setup.transport, store: setup.storage.store,
                account: account)
            guard try await session.open(allowLoginUI: false).isOpen else { throw notLoggedIn(account) }
            // The only place the command line prints a secret: that is what `sesame token` is for.
            io.write(try await session.validToken().tokenString + "\n")
            return ExitStatus.success
        case .logout(let revoke):
            let setup = try await setup(context, storage: command.storage, command: "logout")
            let provider = try await provider(setup)
            let session = OIDCSession(
                provider: provider, transport: setup.transport, store: setup.storage.store, account: account)
            let stored = try await setup.storage.store.load(session.key)
            guard let stored else { throw notLoggedIn(account) }
            if stored.needsLogin {
                // A credential the provider already refused: nothing to revoke, only to remove.
                try await setup.storage.store.delete(session.key)
                io.write("Logged out of \(name) account '\(account)' (its login had already ended).\n")
                return ExitStatus.success
            }
            try await session.open(allowLoginUI: false)
            let who = Terminal.printable(await session.token?.userID ?? "?")
            let canRevoke = provider.endpoints.revocationEndpoint != nil
            do {
                try await session.logout(revoke: revoke)
            } catch {
                throw CommandFailure(
                    "Logged out of \(name) account '\(account)' here, but revoking the tokens at the issuer failed "
                        + "(\(CommandFailure.from(error, provider: name).message)); end the session in the provider's "
                        + "account settings.", status: ExitStatus.unavailable)
            }
            let note =
                !revoke
                ? ""
                : canRevoke
                    ? "; its tokens were revoked"
                    : "; the issuer has no revocation endpoint, so nothing was revoked there"
            io.write("Logged out of \(name) account '\(account)' (subject \(who))\(note).\n")
            return ExitStatus.success
        case .switchAccount(let target):
            let setup = try await setup(context, storage: command.storage, command: "switch")
            let key = CredentialKey(provider: providerID, appID: setup.settings.clientID.value, account: target)
            guard try await setup.storage.store.load(key) != nil else {
                let known = try await setup.storage.store.list(provider: providerID)
                    .filter { $0.key.appID == setup.settings.clientID.value }.map(\.key.account)
                throw CommandFailure(
                    "There is no \(name) login named '\(target)'"
                        + (known.isEmpty ? "" : " (logins: \(known.sorted().joined(separator: ", ")))")
                        + "; log in to it with 'sesame login \(name) --account \(target)'.", status: ExitStatus.usage)
            }
            try accounts.setActiveAccount(target, for: providerID)
            io.write("\(name) account '\(target)' is now the active one.\n")
            return ExitStatus.success
        case .permissions:
            throw CommandFailure(
                "sesame permissions: an OpenID login's scopes are chosen when logging in; log in again with "
                    + "'sesame login \(name) --scopes a,b'.", status: ExitStatus.usage)
        }
    }

    private func notLoggedIn(_ account: String) -> CommandFailure {
        CommandFailure(
            "Not logged in to \(name) as '\(account)'; log in with 'sesame login \(name)"
                + (account == "default" ? "" : " --account \(account)") + "'.", status: ExitStatus.permission)
    }

    private func login(
        _ login: ProviderCommand.Login, account: String, setup: Setup, context: CommandContext
    ) async throws -> Int32 {
        let io = context.io
        let provider = try await provider(setup)
        let hasDevice = provider.endpoints.deviceAuthorizationEndpoint != nil
        if login.device && !hasDevice {
            throw CommandFailure(
                "\(setup.settings.issuer.value) does not offer device login (no device_authorization_endpoint); "
                    + "log in with --web instead.", status: ExitStatus.unavailable)
        }
        let ui: any LoginUI
        if login.web || !hasDevice {
            let opener = SystemBrowserOpener(
                mode: login.noBrowser ? .printOnly : .automatic, environment: context.environment)
            ui = OIDCBrowserLogin(
                oidc: provider, receiver: LoopbackRedirectReceiver(appName: "Sesame"), opener: opener,
                transport: setup.transport)
        } else {
            ui = DeviceLoginFlow(
                dialect: try OIDCDeviceDialect(oidc: provider),
                presenter: TerminalLoginPresenter(terminal: context.terminal, providerName: displayName(provider)),
                transport: setup.transport)
        }
        let session = OIDCSession(
            provider: provider, transport: setup.transport, store: setup.storage.store, account: account, loginUI: ui)
        let accounts = AccountState(environment: context.environment)
        try OIDCRememberedIssuers(environment: context.environment).remember(setup.settings)
        if let cached = try await setup.storage.store.load(session.key), !cached.needsLogin,
            !cached.token.isExpired(at: Date()) || cached.token.refreshToken != nil
        {
            _ = try await session.open(allowLoginUI: false)
            io.write(
                "Already logged in to \(name) as \(Terminal.printable(cached.token.userID ?? "?")) (account '\(account)'). To log in again, "
                    + "run 'sesame logout \(name)" + (account == "default" ? "" : " --account \(account)")
                    + "' first.\n")
            try accounts.setActiveAccount(account, for: providerID)
            return ExitStatus.success
        }
        try await session.open(scopes: login.scopes, allowLoginUI: true)
        try accounts.setActiveAccount(account, for: providerID)
        let claims = try? await session.userInfo()
        let token = await session.token
        let subject = token?.userID ?? "?"
        let who = Terminal.printable(
            (claims?["name"]?.stringValue ?? claims?["email"]?.stringValue).map { "\($0) (\(subject))" } ?? subject)
        io.write(
            "Logged in to \(name) (\(provider.endpoints.issuer)) as \(who), account '\(account)'; "
                + "scopes: \((token?.permissions.granted.sorted() ?? []).joined(separator: " ")). "
                + "Stored in \(setup.storage.backend).\n")
        return ExitStatus.success
    }

    private func displayName(_ provider: OIDCProvider) -> String {
        name == "oidc" ? provider.endpoints.issuer : "\(name) (\(provider.endpoints.issuer))"
    }

    // MARK: status

    func status(storage: StorageMode?, context: CommandContext) async throws -> JSONValue {
        let settings = try? OIDCSettings.resolve(name: name, environment: context.environment, command: "status")
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(storage: storage), environment: context.environment)
        let selection = try await DesktopStorage.select(
            configuration.storage, keyring: context.keyring, environment: context.environment)
        let active = AccountState(environment: context.environment).activeAccount(for: providerID)
        let stored = try await selection.store.list(provider: providerID)
            .filter { settings == nil || $0.key.appID == settings?.clientID.value }.sorted { $0.key < $1.key }
        // An OpenID provider nobody configured or used stays out of the status.
        if settings == nil, stored.isEmpty { return .null }
        func date(_ date: Date?) -> JSONValue { date.map { .string($0.ISO8601Format()) } ?? .null }
        let accounts: [JSONValue] = stored.map { credential in
            let token = credential.token
            let expired = token.isExpired(at: Date())
            // Read from the store alone: an expired token with a refresh token is still usable.
            let valid: JSONValue =
                credential.needsLogin
                ? .bool(false) : expired ? (token.refreshToken == nil ? .bool(false) : .null) : .bool(true)
            let problem: JSONValue =
                credential.needsLogin
                ? .string("The issuer refused the stored login.")
                : (expired && token.refreshToken == nil) ? .string("The token has expired.") : .null
            return .object([
                "account": .string(credential.key.account),
                "active": .bool(credential.key.account == active),
                "user_id": token.userID.map { .string($0) } ?? .null,
                "user_name": .null,
                "granted": .array(token.permissions.granted.sorted().map { .string($0) }),
                "declined": .array(token.permissions.declined.sorted().map { .string($0) }),
                "expires_at": date(token.expirationDate),
                "data_access_expires_at": .null,
                "needs_login": .bool(credential.needsLogin),
                "token_valid": valid,
                "problem": problem,
                "last_usage": .null,
            ])
        }
        return .object([
            "provider": .string(name),
            "app_id": .string(settings?.clientID.value ?? stored.first?.key.appID ?? ""),
            "issuer": settings.map { .string($0.issuer.value) } ?? .null,
            "emulator": .null,
            "storage": .object(["backend": .string(selection.backend), "reason": .string(selection.reason)]),
            "accounts": .array(accounts),
        ])
    }

    // MARK: doctor

    func doctor(context: CommandContext) async -> [DoctorLine] {
        let names = OIDCSettings.configuredNames(environment: context.environment)
        guard name == "oidc" else { return [] }
        var lines: [DoctorLine] = []
        for issuer in ["oidc"] + names {
            do {
                let settings = try OIDCSettings.resolve(
                    name: issuer, environment: context.environment, command: "doctor")
                let url = URL(string: settings.issuer.value + "/.well-known/openid-configuration")!
                lines.append(
                    DoctorLine(
                        .ok, "OpenID issuer '\(issuer)': \(settings.issuer.value), from \(settings.issuer.source)."))
                lines.append(
                    await DoctorProbe.answers(
                        label: "'\(issuer)' discovery", url: url, transport: DoctorProbe.transport))
            } catch let failure as CommandFailure where issuer != "oidc" || failure.status != ExitStatus.usage {
                lines.append(DoctorLine(.problem, "OpenID issuer '\(issuer)': \(failure.message)"))
            } catch {
                continue
            }
        }
        return lines
    }
}

import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameGitHub

/// A GitHub host ready for one command.
struct GitHubConnection: ConnectedProvider {
    var provider: GitHubProvider
    var context: ConnectionContext
    /// Whether a client id was configured (device login and refresh need one).
    var hasClientID = true
    /// Where a login's host is remembered (not for the emulator).
    var remembered: GitHubRememberedLogin?
    /// The configured server address, when there is one.
    var serverURL: String?

    /// What the built-in emulator is called when its state cannot be saved.
    static let emulatorName = "built-in GitHub emulator"

    var providerID: ProviderID { .github }
    var appID: String { provider.credentialAppID }
    var label: String { context.isEmulated ? "the GitHub emulator" : provider.displayName }
    var isEmulated: Bool { context.isEmulated }
    var details: [String: String] { ["host": provider.host.hostname] }
    var transport: any HTTPTransport { context.transport }

    func githubSession(
        account: String, store: any CredentialStore, loginUI: (any LoginUI)? = nil
    ) -> GitHubSession {
        GitHubSession(
            provider: provider, transport: transport, store: store, account: account, loginUI: loginUI,
            refreshLocking: context.refreshLocking)
    }

    /// GitHub's device flow with the code (and, for the emulator, its approval step) on the terminal.
    func deviceLogin() -> OAuth2Login {
        GitHubSession.deviceLogin(
            provider: provider, transport: transport, presenter: context.presenter(providerName: label))
    }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        let token = try await logIn(
            options, account: account, store: store,
            existingToken: { text in OAuth2TokenLogin(provider: provider.oauth2(transport: transport)) { text } },
            browser: { _ in
                throw DesktopError(
                    "GitHub logins use the device code (the default) or --with-token; leave out --web.",
                    status: .usage)
            }
        ) {
            guard hasClientID else {
                throw DesktopError(
                    "No GitHub client id is configured, and device login needs one: set SESAME_GITHUB_CLIENT_ID (or "
                        + "give --client-id) to the client id of an OAuth app with device flow enabled, or log in "
                        + "with a token: 'gh auth token | \(Desktop.programName) login github --with-token'.",
                    status: .config)
            }
            return deviceLogin()
        }
        if let remembered {
            let hostname = provider.host.hostname
            let clientID = hasClientID ? provider.clientID : nil
            try? await onOwnThread {
                try remembered.remember(hostname: hostname, clientID: clientID, url: serverURL)
            }
        }
        let user = try? await provider.user(token: token.tokenString, transport: transport)
        return LoginResult(token: token, userName: user?.name)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        GitHubAccountSession(session: githubSession(account: account, store: store), host: provider.host)
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        // A fixed-token client without retries: status reads, it never changes what is stored.
        let governor = GitHubRateLimitGovernor()
        let client = GitHubClient(
            github: provider, transport: transport, token: token.tokenString, policy: nil, governor: governor)
        return await AccountCheck.checking {
            let user = try await client.user()
            return AccountCheck(validity: .valid, userName: user.name, usage: Self.usage(governor, scopes: user.scopes))
        } refused: {
            AccountCheck.refusal($0, of: token, by: provider.displayName, usage: Self.usage(governor, scopes: nil))
        }
    }

    /// The rate limit GitHub reported and the token's scopes, as `status` shows them.
    static func usage(_ governor: GitHubRateLimitGovernor, scopes: [String]?) -> JSONValue? {
        guard let limit = governor.lastLimit() else { return nil }
        var usage: [String: JSONValue] = [
            "limit": .number(Double(limit.limit)), "remaining": .number(Double(limit.remaining)),
            "reset": .number(limit.reset.timeIntervalSince1970.rounded()),
        ]
        if let used = limit.used { usage["used"] = .number(Double(used)) }
        if let resource = limit.resource { usage["resource"] = .string(resource) }
        if let scopes { usage["scopes"] = .array(scopes.map { .string($0) }) }
        return .object(usage)
    }

    func shutdown() async { await context.shutdown(emulatorName: Self.emulatorName) }
}

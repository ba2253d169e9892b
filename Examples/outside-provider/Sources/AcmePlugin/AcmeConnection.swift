import Acme
import Foundation
import Sesame
import SesameDesktop
import SesameHTTPServer

/// An Acme server (or the built-in emulator) ready for one command.
struct AcmeConnection: ConnectedProvider {
    var provider: AcmeProvider
    var transport: any HTTPTransport
    var terminal: Terminal
    var environment: [String: String]
    /// How renewals are kept apart from other processes\' (the storage\'s refresh locking).
    var refreshLocking: RefreshLocking
    /// The built-in emulator, when it stands in for the server.
    var emulator: RunningEmulator?
    /// How the built-in emulator's approval step is offered (never for a real server).
    var approvalMode: EmulatorApproval.Mode
    /// Whether a browser opens here (`--no-browser`, `SESAME_BROWSER`, an SSH session): with
    /// none, the browser login prints its address and takes the redirect pasted back.
    var browser: LocalBrowser

    var providerID: ProviderID { .acme }
    var appID: String { provider.configuration.clientID }
    var label: String {
        emulator == nil ? "Acme (\(provider.configuration.baseURL.host ?? "?"))" : "the Acme emulator"
    }
    var isEmulated: Bool { emulator != nil }
    var details: [String: String] {
        emulator == nil ? ["server": provider.configuration.baseURL.absoluteString] : [:]
    }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        let approval = emulator.map {
            EmulatorApproval(emulator: $0, mode: approvalMode, terminal: terminal, transport: transport)
        }
        let login: AcmeLogin
        switch options.flow {
        case .existingToken:
            throw DesktopError(
                "Acme logins do not take --with-token; log in with the device code or --web.", status: .usage)
        case .browser(let openBrowser):
            login = AcmeSession.browserLogin(
                provider: provider, transport: transport,
                receiver: browser.receiver(
                    openBrowser: openBrowser, appName: isEmulated ? "Sesame (Acme emulator)" : "Sesame",
                    terminal: terminal, emulatorApproval: approval),
                opener: browser.opener(openBrowser: openBrowser, environment: environment, emulatorApproval: approval))
        case .automatic, .device:
            login = AcmeSession.deviceLogin(
                provider: provider, transport: transport,
                presenter: TerminalLoginPresenter(terminal: terminal, providerName: label, emulatorApproval: approval))
        }
        let scopes = options.scopes.isEmpty ? provider.configuration.defaultScopes : options.scopes
        let (token, user) = try await login.logInIdentified(
            LoginRequest(provider: .acme, appID: appID, permissions: scopes.map { Permission.read($0) }))
        try await DesktopLogin.save(token, account: account, store: store, label: label)
        return LoginResult(token: token, userName: user.name)
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        AcmeAccountSession(
            session: AcmeSession(
                provider: provider, transport: transport, store: store, account: account,
                refreshLocking: refreshLocking))
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        let token = credential.token
        return await AccountCheck.checking {
            let user = try await provider.me(token: token.tokenString, transport: transport)
            return AccountCheck(validity: .valid, userName: user.name)
        } refused: { error in
            guard error.category == .authenticationReopenSession else {
                return AccountCheck(validity: .unverified, problem: error.userMessage ?? error.message)
            }
            guard token.refreshToken == nil else {
                return AccountCheck(
                    validity: .unverified,
                    problem: "Acme refused the access token; the next use tries the refresh token.")
            }
            return AccountCheck(validity: .invalid, problem: error.userMessage ?? error.message)
        }
    }

    func shutdown() async { await emulator?.stop(named: "built-in Acme emulator", telling: terminal) }
}

/// An Acme session as the generic commands (`token`, `logout`, `switch`, `status`) use it.
struct AcmeAccountSession: AccountSession {
    var session: AcmeSession

    var key: CredentialKey { session.key }
    var userID: String? { get async { await session.token?.userID } }

    func open() async throws -> Bool { try await session.open(allowLoginUI: false).isOpen }

    func condition(of credential: StoredCredential) -> LoginCondition { session.session.condition(of: credential) }

    func warning(for token: AccessToken) -> String? { session.session.renewer.expiryWarning(for: token, at: Date()) }

    func validToken() async throws -> AccessToken { try await session.validToken() }

    func logOut(revoke: Bool) async throws -> String? {
        let session = session
        let advice = "remove the app in your Acme account's settings"
        try await RevocationFailed.loggingOut(revoke: revoke, advice: advice) {
            try await session.logOut(revoke: revoke)
        }
        return revoke ? "its tokens were revoked" : nil
    }
}

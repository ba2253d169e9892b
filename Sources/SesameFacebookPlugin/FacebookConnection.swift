import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameHTTPServer

/// A Facebook app ready for one command.
struct FacebookConnection: ConnectedProvider {
    var provider: FacebookProvider
    var context: ConnectionContext

    /// What the built-in emulator is called when its state cannot be saved.
    static let emulatorName = "built-in emulator"

    var providerID: ProviderID { .facebook }
    var appID: String { provider.appID }
    var label: String { context.isEmulated ? "the Facebook emulator" : "Facebook" }
    var isEmulated: Bool { context.isEmulated }
    var transport: any HTTPTransport { context.transport }

    func deviceLogin() -> DeviceLoginFlow {
        FacebookSession.deviceLogin(
            provider: provider, transport: transport, presenter: context.presenter(providerName: label))
    }

    func browserLogin(openBrowser: Bool) -> BrowserLoginFlow {
        let approval = context.emulatorApproval
        return FacebookSession.browserLogin(
            provider: provider, transport: transport,
            receiver: context.browser.receiver(
                openBrowser: openBrowser, appName: isEmulated ? "Sesame (emulator)" : "Sesame",
                terminal: context.terminal, emulatorApproval: approval),
            opener: context.browser.opener(
                openBrowser: openBrowser, environment: context.environment, emulatorApproval: approval,
                terminal: context.terminal))
    }

    func facebookSession(
        account: String, store: any CredentialStore, loginUI: (any LoginUI)? = nil,
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil, recoveryPolicy: RecoveryPolicy = RecoveryPolicy()
    ) -> FacebookSession {
        FacebookSession(
            provider: provider, transport: transport, store: store, account: account,
            loginUI: loginUI ?? deviceLogin(),
            configuration: .init(refreshLocking: context.refreshLocking),
            recoveryDelegate: recoveryDelegate, recoveryPolicy: recoveryPolicy, governor: governor())
    }

    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult {
        let token = try await logIn(
            options, account: account, store: store,
            existingToken: { text in ExistingTokenLogin(provider: provider, transport: transport) { text } },
            browser: browserLogin(openBrowser:)
        ) {
            guard provider.clientToken != nil else {
                throw DesktopError(
                    "Facebook device login needs the app's client token: set SESAME_FACEBOOK_CLIENT_TOKEN (or "
                        + "facebook.client_token in the config file) from App Dashboard → Settings → Advanced, or "
                        + "log in with --web.", status: .config)
            }
            return deviceLogin()
        }
        let me = try? await GraphClient(provider: provider, transport: transport, accessToken: token.tokenString)
            .get("me", parameters: ["fields": "id,name"])
        return LoginResult(token: token, userName: me?["name"]?.stringValue)
    }

    /// A governor on the shared budget when there is one.
    func governor() -> GraphUsageGovernor {
        context.rateLimitBudget.map { GraphUsageGovernor(budget: $0) } ?? GraphUsageGovernor()
    }

    func session(account: String, store: any CredentialStore) -> any AccountSession {
        FacebookAccountSession(session: facebookSession(account: account, store: store))
    }

    func check(_ credential: StoredCredential) async -> AccountCheck {
        // A fixed-token client: status reads, it never closes sessions or clears tokens.
        let governor = governor()
        let graph = GraphClient(
            provider: provider, transport: transport, accessToken: credential.token.tokenString, governor: governor)
        return await AccountCheck.checking {
            let me = try await graph.get("me", parameters: ["fields": "id,name"])
            return AccountCheck(validity: .valid, userName: me["name"]?.stringValue, usage: governor.lastUsage?.json)
        } refused: { error in
            AccountCheck(
                validity: error.closesSession ? .invalid : .unverified, problem: error.userMessage ?? error.message,
                usage: governor.lastUsage?.json)
        }
    }

    func shutdown() async { await context.shutdown(emulatorName: Self.emulatorName) }
}

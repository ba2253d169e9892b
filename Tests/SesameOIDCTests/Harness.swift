import Foundation
import Sesame
import SesameCurl
import SesameHTTPServer
import SesameOIDC
import SesameOIDCEmulator
import SesameTestSupport
import SesameTesting
import Testing

/// A started OIDC emulator, CurlTransport, and a provider discovered from it.
struct OIDCHarness: Sendable {
    let emulator: OIDCEmulator
    let endpoints: OIDCEmulatorEndpoints
    let transport: CurlTransport
    let provider: OIDCProvider
    /// Where this harness's sessions keep their refresh lock files (never the person's own).
    let lockDirectory: URL

    static func start(algorithm: String = "RS256", providerID: ProviderID = .oidc) async throws -> OIDCHarness {
        let emulator = try OIDCEmulator(algorithm: algorithm)
        let endpoints = try await emulator.start()
        let transport = CurlTransport()
        let provider: OIDCProvider
        do {
            provider = try await OIDCProvider.discover(
                OIDCConfiguration(
                    providerID: providerID, issuer: endpoints.issuer, clientID: OIDCEmulator.defaultClientID),
                transport: transport)
        } catch {
            await emulator.stop()
            throw error
        }
        let lockDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-oidc-locks-\(UUID().uuidString)", isDirectory: true)
        return OIDCHarness(
            emulator: emulator, endpoints: endpoints, transport: transport, provider: provider,
            lockDirectory: lockDirectory)
    }

    func stop() async {
        await emulator.stop()
        try? FileManager.default.removeItem(at: lockDirectory)
    }

    /// Runs `body` with a started harness and awaits its stop afterwards, whether `body` threw or not.
    ///
    /// A body whose only `try`s are in `#expect` or `#require` is written `{ harness throws in`: the
    /// compiler decides whether a closure throws before it expands the macros in it.
    static func with<T: Sendable>(
        algorithm: String = "RS256", providerID: ProviderID = .oidc, _ body: (OIDCHarness) async throws -> T
    ) async throws -> T {
        try await withStarted(
            { try await start(algorithm: algorithm, providerID: providerID) }, stop: { await $0.stop() }, body)
    }

    /// The refresh lock of the default account, in ``lockDirectory``.
    var refreshLock: RefreshLock {
        RefreshLock(
            key: CredentialKey(provider: provider.id, appID: provider.configuration.clientID, account: "default"),
            directory: lockDirectory)
    }

    /// A session of the default account on `store`, its refresh lock in ``lockDirectory``.
    func session(
        store: any CredentialStore, loginUI: (any LoginUI)? = nil, transport: (any HTTPTransport)? = nil
    ) -> OIDCSession {
        OIDCSession(
            provider: provider, transport: transport ?? self.transport, store: store, loginUI: loginUI,
            configuration: .init(refreshLocking: .file(refreshLock)))
    }

    func browserLogin(_ browser: EmulatorBrowser) -> OIDCBrowserLogin {
        OIDCBrowserLogin(
            oidc: provider, receiver: LoopbackRedirectReceiver(timeout: .seconds(30)), opener: browser,
            transport: transport)
    }

    func browser(action: String = "allow") -> EmulatorBrowser { EmulatorBrowser(transport: transport, action: action) }

    func deviceLogin() throws -> DeviceLoginFlow {
        DeviceLoginFlow(
            dialect: try OIDCDeviceDialect(oidc: provider),
            presenter: AdminDeviceApprover(admin: endpoints.adminURL, transport: transport), transport: transport,
            clock: ManualClock(autoAdvance: true))
    }

    /// Activates a scenario through the admin API over HTTP.
    func activate(_ scenario: OIDCScenario, count: Int? = nil, seconds: Int = 0) async throws {
        var body: [String: JSONValue] = ["scenario": .string(scenario.rawValue), "seconds": .number(Double(seconds))]
        if let count { body["count"] = .number(Double(count)) }
        let response = try await transport.send(
            .postJSON(endpoints.adminURL.appendingPathComponent("scenarios"), .object(body)))
        #expect(response.status == 201, "activating \(scenario.rawValue)")
    }

    /// The store the tests persist to: the keyring when asked and available, else a file store.
    static func persistentStore() -> any CredentialStore {
        if ProcessInfo.processInfo.environment["SESAME_TEST_KEYRING"] == "1" {
            print(
                "SESAME_TEST_KEYRING=1, but SesameKeyring is not on this branch yet: persisting to a FileCredentialStore"
            )
        }
        return FileCredentialStore(
            url: FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-oidc-\(UUID().uuidString)/credentials.json"))
    }
}

/// The person in the browser: loads the emulator's consent page over HTTP, submits its form,
/// and follows the redirect to the loopback receiver.
final class EmulatorBrowser: BrowserOpener {
    let transport: any HTTPTransport
    let action: String
    private let opened = Locked<[URL]>([])

    init(transport: any HTTPTransport, action: String) {
        self.transport = transport
        self.action = action
    }

    var urls: [URL] { opened.withLock { $0 } }

    func open(_ url: URL) async throws {
        opened.withLock { $0.append(url) }
        let page = try await transport.send(HTTPRequest(url: url))
        let html = String(decoding: page.body, as: UTF8.self)
        guard page.status == 200, let range = html.range(of: "name=\"request\" value=\"") else {
            throw AuthError(category: .invalid, message: "no consent form (HTTP \(page.status)): \(html.prefix(300))")
        }
        let id = html[range.upperBound...].prefix { $0 != "\"" }
        var authorize = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        authorize.query = nil
        let decision = try await transport.send(
            HTTPRequest(
                method: .post, url: authorize.url!, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(FormEncoding.encode([("request", String(id)), ("action", action)]).utf8)))
        guard decision.status == 302, let location = decision.headers["Location"], let redirect = URL(string: location)
        else { throw AuthError(category: .invalid, message: "the consent form did not redirect (\(decision.status))") }
        let transport = transport
        Task { _ = try? await transport.send(HTTPRequest(url: redirect)) }
    }
}

/// The person on their phone: approves the device code through the emulator's admin API.
struct AdminDeviceApprover: DeviceCodePresenter {
    let admin: URL
    let transport: any HTTPTransport

    func present(_ authorization: DeviceAuthorization) async {
        _ = try? await transport.send(
            .postJSON(admin.appendingPathComponent("device"), .object(["user_code": .string(authorization.userCode)])))
    }
}

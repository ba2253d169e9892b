import Foundation
import Sesame
import SesameCurl
import SesameGitHub
import SesameGitHubEmulator
import SesameTestSupport
import SesameTesting
import Testing

/// A started GitHub emulator, CurlTransport, and a provider pointed at it (as at an
/// Enterprise Server), with a wall clock the test can move forward along with the emulator's.
struct GitHubHarness: Sendable {
    let emulator: GitHubEmulator
    let endpoints: GitHubEmulatorEndpoints
    let transport: CurlTransport
    let provider: GitHubProvider
    let offset: ClockOffset

    final class ClockOffset: Sendable {
        let seconds = Locked<TimeInterval>(0)
        var now: Date { Date().addingTimeInterval(seconds.withLock { $0 }) }
    }

    static func start(
        expiringTokens: Bool = false, accessTokenLifetime: TimeInterval = 28_800, rateLimit: Int = 5000,
        repositoryCount: Int = 42, clientID: String = GitHubEmulator.defaultClientID
    ) async throws -> GitHubHarness {
        let emulator = GitHubEmulator(
            expiringTokens: expiringTokens, accessTokenLifetime: accessTokenLifetime, rateLimit: rateLimit,
            repositoryCount: repositoryCount)
        let endpoints = try await emulator.start()
        let offset = ClockOffset()
        let host = GitHubHost(
            hostname: endpoints.hostname, oauthBaseURL: endpoints.baseURL, apiBaseURL: endpoints.apiURL)
        let provider = GitHubProvider(host: host, clientID: clientID, now: { offset.now })
        return GitHubHarness(
            emulator: emulator, endpoints: endpoints, transport: CurlTransport(), provider: provider, offset: offset)
    }

    func stop() async { await emulator.stop() }

    /// Runs `body` with a started harness and awaits its stop afterwards, whether `body` threw or not.
    ///
    /// A body whose only `try`s are in `#expect` or `#require` is written `{ harness throws in`: the
    /// compiler decides whether a closure throws before it expands the macros in it.
    static func with<T: Sendable>(
        expiringTokens: Bool = false, accessTokenLifetime: TimeInterval = 28_800, rateLimit: Int = 5000,
        repositoryCount: Int = 42, clientID: String = GitHubEmulator.defaultClientID,
        _ body: (GitHubHarness) async throws -> T
    ) async throws -> T {
        try await withStarted(
            {
                try await start(
                    expiringTokens: expiringTokens, accessTokenLifetime: accessTokenLifetime, rateLimit: rateLimit,
                    repositoryCount: repositoryCount, clientID: clientID)
            }, stop: { await $0.stop() }, body)
    }

    /// Moves the emulator's clock and the provider's together.
    func advanceClocks(by seconds: TimeInterval) async {
        offset.seconds.withLock { $0 += seconds }
        await emulator.advanceClock(by: seconds)
    }

    /// A device login whose person does `action` with the code; polling waits on a manual clock.
    func deviceLogin(
        _ action: DevicePerson.Action = .approve, clock: ManualClock = ManualClock(autoAdvance: true)
    ) -> OAuth2Login {
        GitHubSession.deviceLogin(
            provider: provider, transport: transport, presenter: DevicePerson(harness: self, action: action),
            clock: clock)
    }

    func session(
        store: any CredentialStore, loginUI: (any LoginUI)? = nil, account: String = "default"
    )
        -> GitHubSession
    {
        GitHubSession(provider: provider, transport: transport, store: store, account: account, loginUI: loginUI)
    }

    /// A client with a fixed token and no retries, so each error comes back as GitHub sent it.
    func rawClient(token: String) -> GitHubClient {
        GitHubClient(github: provider, transport: transport, token: token, policy: nil)
    }

    /// Activates a scenario through the admin API over HTTP, as a test outside the process would.
    func activate(
        _ scenario: GitHubScenario, count: Int? = nil, seconds: Int? = nil, scope: String? = nil
    )
        async throws
    {
        var body: [String: JSONValue] = ["scenario": .string(scenario.rawValue)]
        if let count { body["count"] = .number(Double(count)) }
        if let seconds { body["seconds"] = .number(Double(seconds)) }
        if let scope { body["scope"] = .string(scope) }
        let response = try await transport.send(
            .postJSON(endpoints.adminURL.appendingPathComponent("scenarios"), .object(body)))
        #expect(response.status == 201, "activating \(scenario.rawValue)")
    }

    /// A device login run to the end, and its stored token.
    func loggedInSession(
        store: any CredentialStore = InMemoryCredentialStore(), scopes: [String] = []
    )
        async throws -> GitHubSession
    {
        let session = session(store: store, loginUI: deviceLogin())
        #expect(try await session.open(scopes: scopes, allowLoginUI: true) == .open)
        return session
    }
}

/// The person with the code: approves it, cancels it, lets it expire, or does nothing.
struct DevicePerson: DeviceCodePresenter {
    enum Action: Sendable { case approve, deny, expire, nothing }
    let harness: GitHubHarness
    let action: Action

    func present(_ authorization: DeviceAuthorization) async {
        switch action {
        case .approve: try? await harness.emulator.approveDevice(userCode: authorization.userCode)
        case .deny: try? await harness.emulator.denyDevice(userCode: authorization.userCode)
        case .expire: await harness.emulator.advanceClock(by: 901)
        case .nothing: break
        }
    }
}

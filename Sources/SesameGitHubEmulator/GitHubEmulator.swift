import Foundation
import Sesame
import SesameEmulator

/// A situation the GitHub emulator can be put in. See <doc:GitHubMode>.
public enum GitHubScenario: String, Sendable, Hashable, CaseIterable, Codable {
    /// API calls answer 401 "Bad credentials".
    case badCredentials = "bad-credentials"
    /// API calls answer 403 with `x-ratelimit-remaining: 0` and a reset ``GitHubScenarioSetting/seconds``
    /// (60 by default) away; the token's window stays used up until then.
    case primaryRateLimit = "primary-rate-limit"
    /// API calls answer 403 "You have exceeded a secondary rate limit" with `retry-after`
    /// ``GitHubScenarioSetting/seconds`` (30 by default).
    case secondaryRateLimit = "secondary-rate-limit"
    /// API calls answer 403 with `X-GitHub-SSO: required; url=…/orgs/sesame-org/sso?…`.
    case ssoRequired = "sso-required"
    /// API calls answer 403 "Resource not accessible by integration" with
    /// `X-Accepted-OAuth-Scopes` ``GitHubScenarioSetting/scope`` (`admin:org` by default).
    case scopeMissing = "scope-missing"
    /// `POST /login/device/code` answers HTTP 200 with `error=device_flow_disabled`.
    case deviceFlowDisabled = "device-flow-disabled"
    /// Device polls answer HTTP 200 with `error=slow_down` and an `interval` five seconds longer.
    case slowDown = "slow-down"
    /// API calls answer 502 "Server Error".
    case serverError = "server-error"
}

/// A scenario and its parameters.
public struct GitHubScenarioSetting: Sendable, Hashable {
    /// The scenario.
    public var scenario: GitHubScenario
    /// How many requests it affects; `nil` until cleared.
    public var count: Int?
    /// Seconds: the rate-limit reset (primary) or `retry-after` (secondary).
    public var seconds: Int?
    /// The scope a ``GitHubScenario/scopeMissing`` answer asks for.
    public var scope: String?

    /// Creates a setting.
    public init(_ scenario: GitHubScenario, count: Int? = nil, seconds: Int? = nil, scope: String? = nil) {
        self.scenario = scenario
        self.count = count
        self.seconds = seconds
        self.scope = scope
    }
}

/// Where a running GitHub emulator answers.
public struct GitHubEmulatorEndpoints: Sendable, Hashable {
    /// `http://127.0.0.1:<port>`: the OAuth pages (`/login/device/code`,
    /// `/login/oauth/access_token`, `/login/device`).
    public var baseURL: URL
    /// `…/api/v3`: the REST API, laid out as on a GitHub Enterprise Server.
    public var apiURL: URL
    /// The admin API, `…/__sesame`.
    public var adminURL: URL
    /// `127.0.0.1:<port>`: the host name logins against this emulator are kept under.
    public var hostname: String
}

/// A local GitHub for tests and offline development: the device flow (with its HTTP-200
/// errors), expiring user tokens and their refresh (with rotation and reuse detection), personal
/// access tokens, `GET /user`, `GET /user/repos` paged with `Link`, `POST /user/repos` (422 on a
/// bad name), rate-limit headers on every API answer, and scenarios that make it fail as GitHub
/// does.
///
/// It is laid out as a GitHub Enterprise Server at `http://127.0.0.1:<port>` (API under
/// `/api/v3`), so a client reaches it as it would any Enterprise host.
///
/// ```swift
/// let emulator = GitHubEmulator()
/// let endpoints = try await emulator.start()
/// await emulator.activate(GitHubScenarioSetting(.secondaryRateLimit, count: 1))
/// await emulator.stop()
/// ```
public final class GitHubEmulator: Sendable {
    /// The OAuth app every emulator knows.
    public static let defaultClientID = "Iv1.5e5a3e5e5a3e5e5a"
    /// How long a refresh token lives unless the emulator is told otherwise: GitHub's six months
    /// (15,897,600 seconds, 184 days).
    public static let defaultRefreshTokenLifetime: TimeInterval = 15_897_600
    let engine: GitHubEngine
    private let listener = LoopbackListener(name: "GitHub")

    /// Creates an emulator.
    ///
    /// - Parameters:
    ///   - clients: extra client ids it accepts.
    ///   - expiringTokens: whether the device flow issues expiring user tokens (`ghu_…`, with
    ///     `expires_in`, `refresh_token`, `refresh_token_expires_in`), as GitHub Apps may.
    ///   - accessTokenLifetime: seconds an expiring token lives (GitHub: 8 hours); the API refuses
    ///     it with 401 once the emulator's clock is past it.
    ///   - refreshTokenLifetime: seconds each refresh token of an expiring token lives from when it
    ///     is issued (`refresh_token_expires_in`; GitHub: six months); a refresh with an older one
    ///     answers `bad_refresh_token`. Every refresh issues a new one with the whole lifetime.
    ///   - devicePollInterval: the `interval` of a device login, in seconds (GitHub: 5).
    ///   - rateLimit: requests per token per hour (GitHub: 5000).
    ///   - repositoryCount: how many repositories the first user (`octocat`) has.
    public init(
        clients: [String] = [], expiringTokens: Bool = false, accessTokenLifetime: TimeInterval = 28_800,
        refreshTokenLifetime: TimeInterval = GitHubEmulator.defaultRefreshTokenLifetime, devicePollInterval: Int = 5,
        rateLimit: Int = 5000, repositoryCount: Int = 42
    ) {
        engine = GitHubEngine(
            clients: clients, expiringTokens: expiringTokens, accessTokenLifetime: accessTokenLifetime,
            refreshTokenLifetime: refreshTokenLifetime, repositoryCount: repositoryCount)
        engine.locked {
            $0.devicePollInterval = max(1, devicePollInterval)
            $0.rateLimit = max(1, rateLimit)
        }
    }

    /// Starts listening on 127.0.0.1 (`port` 0 picks a free one).
    @discardableResult
    public func start(port: Int = 0) async throws -> GitHubEmulatorEndpoints {
        let base = try listener.start(port: port, engine: engine)
        engine.setBaseURL(base)
        let url = URL(string: base)!
        return GitHubEmulatorEndpoints(
            baseURL: url, apiURL: URL(string: base + "/api/v3")!, adminURL: URL(string: base + "/__sesame")!,
            hostname: "\(url.host ?? "127.0.0.1"):\(url.port ?? 80)")
    }

    /// Stops listening.
    public func stop() async { await listener.stop() }

    /// Where the emulator says it is, in the links it writes: `http://127.0.0.1:<port>` once
    /// started, `http://127.0.0.1` before (for ``transport``).
    public var baseURL: URL { URL(string: engine.locked { $0.baseURL }) ?? URL(string: "http://127.0.0.1")! }

    /// A transport that hands requests straight to the emulator, without sockets (the path and
    /// query are used; the host is not). For the zero-setup CLI and fast tests; providers are
    /// also tested over real HTTP.
    public var transport: GitHubEmulatorTransport { GitHubEmulatorTransport(engine: engine) }

    /// Activates a scenario.
    public func activate(_ setting: GitHubScenarioSetting) async { engine.activate(setting) }
    /// Ends every scenario.
    public func clearScenarios() async { engine.locked { $0.scenarios.removeAll() } }
    /// Approves a pending device login as `user` (`octocat` when `nil`).
    public func approveDevice(userCode: String, user: String? = nil) async throws {
        try engine.answerDevice(userCode: userCode, user: user, approve: true)
    }
    /// Cancels a pending device login, as the person pressing Cancel.
    public func denyDevice(userCode: String) async throws {
        try engine.answerDevice(userCode: userCode, user: nil, approve: false)
    }
    /// A new personal access token for `user` (`octocat` when `nil`): classic with `scopes`,
    /// or fine-grained (no `X-OAuth-Scopes`) when `scopes` is `nil`; expiring after `expiresIn`
    /// seconds when given.
    public func issuePersonalToken(
        user: String? = nil, scopes: [String]? = ["repo", "read:org"], expiresIn: TimeInterval? = nil
    ) async throws -> String {
        try engine.issuePersonalToken(user: user, scopes: scopes, expiresIn: expiresIn)
    }
    /// Makes every access token issued so far invalid, as revoking them on GitHub would.
    public func revokeAccessTokens() async { engine.locked { $0.tokens.removeAll() } }
    /// Moves the emulator's clock forward (expiry of tokens, refresh tokens and device codes,
    /// rate-limit windows).
    public func advanceClock(by seconds: TimeInterval) async { engine.locked { $0.clockOffset += seconds } }
    /// Refresh-token grants answered and refused so far, and token families revoked because a
    /// used refresh token came back; `GET /__sesame/stats` answers the same.
    public var refreshCounters: RefreshTokenCounters { engine.locked { $0.families.counters } }
    /// The user codes of device logins not yet answered, as shown to the person.
    public var pendingUserCodes: [String] {
        engine.locked { $0.devices.values.filter { $0.approvedFor == nil && !$0.denied }.map(\.userCode).sorted() }
    }
    /// Requests per path so far.
    public func requestCount(path: String) -> Int { engine.locked { $0.requestCounts[path] ?? 0 } }
}

/// An `HTTPTransport` that hands requests to a ``GitHubEmulator`` in the same process.
public struct GitHubEmulatorTransport: HTTPTransport {
    let engine: GitHubEngine

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? ""
        return await engine.handle(
            method: request.method, path: request.url.path.isEmpty ? "/" : request.url.path,
            query: FormEncoding.decode(query), headers: request.headers, body: request.body ?? Data())
    }
}

import Foundation
import Sesame
import SesameEmulator

/// A situation the OIDC emulator can be put in. See <doc:OIDCMode>.
public enum OIDCScenario: String, Sendable, Hashable, CaseIterable, Codable {
    /// The next refresh is refused with `invalid_grant` (the grant was revoked).
    case refreshRevoked = "refresh-revoked"
    /// Device polls answer `slow_down`.
    case slowDown = "slow-down"
    /// The token endpoint answers 500 with `server_error`.
    case serverError = "server-error"
    /// The token endpoint answers 429 with `Retry-After: 7`.
    case tooManyRequests = "too-many-requests"
    /// The signing key is replaced by a new one with a new `kid` (the JWKS then has both).
    case keyRotated = "key-rotated"
    /// ID tokens are issued with `iat` and `exp` moved by ``OIDCScenarioSetting/seconds``.
    case clockSkew = "clock-skew"
    /// The next ID token's signature is corrupted.
    case badSignature = "id-token-bad-signature"
    /// The next ID token names another issuer.
    case wrongIssuer = "id-token-wrong-issuer"
    /// The next ID token is for another audience.
    case wrongAudience = "id-token-wrong-audience"
    /// The next ID token has already expired.
    case expiredIDToken = "id-token-expired"
    /// The next ID token carries another nonce.
    case wrongNonce = "id-token-wrong-nonce"
    /// The next ID token is signed with a key the JWKS does not have.
    case unknownKey = "id-token-unknown-key"
    /// The next authorization response names another issuer in its `iss` (RFC 9207).
    case redirectWrongIssuer = "redirect-wrong-issuer"
    /// The next authorization response has no `iss`, although discovery promises it (RFC 9207).
    case redirectNoIssuer = "redirect-no-issuer"
    /// Device grant answers carry no ID token, as django-oauth-toolkit's do (until cleared, or
    /// `count` answers).
    case deviceNoIDToken = "device-no-id-token"
    /// Under Microsoft's quirks, the next ID token's `tid` names another tenant than its `iss`.
    case wrongTenant = "id-token-wrong-tid"
}

/// Where the emulator lists its revocation endpoint (RFC 7009).
public enum OIDCRevocationListing: String, Sendable, Hashable, CaseIterable {
    /// In the OpenID discovery document and the RFC 8414 metadata (the default).
    case discovery
    /// Only in the RFC 8414 metadata (`/.well-known/oauth-authorization-server`), as
    /// django-oauth-toolkit does.
    case metadata
    /// Nowhere: the issuer has no revocation endpoint, and `/revoke` answers 404.
    case nowhere
}

/// A scenario and its parameters.
public struct OIDCScenarioSetting: Sendable, Hashable {
    /// The scenario.
    public var scenario: OIDCScenario
    /// How many requests it affects; `nil` until cleared (one-shot ID-token faults default to 1).
    public var count: Int?
    /// For ``OIDCScenario/clockSkew``: how far the issuer's clock is ahead (negative: behind).
    public var seconds: Int

    /// Creates a setting.
    public init(_ scenario: OIDCScenario, count: Int? = nil, seconds: Int = 0) {
        self.scenario = scenario
        self.count = count
        self.seconds = seconds
    }
}

/// Where a running OIDC emulator answers.
public struct OIDCEmulatorEndpoints: Sendable, Hashable {
    /// The issuer, `http://127.0.0.1:<port>`; discovery is at `issuer/.well-known/openid-configuration`.
    public var issuer: String
    /// The admin API, `…/__sesame`.
    public var adminURL: URL
}

/// A local OpenID provider for tests and offline development: discovery, JWKS with rotation,
/// a consent page, the token endpoint (code with PKCE, refresh with rotation and reuse detection,
/// device code), userinfo, revocation, and scenarios that make it fail as real providers do.
///
/// ```swift
/// let emulator = try OIDCEmulator()
/// let endpoints = try await emulator.start()
/// // OIDCConfiguration(issuer: endpoints.issuer, clientID: OIDCEmulator.defaultClientID)
/// await emulator.activate(OIDCScenarioSetting(.refreshRevoked))
/// await emulator.stop()
/// ```
public final class OIDCEmulator: Sendable {
    /// The public client every emulator knows.
    public static let defaultClientID = "sesame-desktop"
    /// How long a refresh token lives unless the emulator is told otherwise: 30 days.
    public static let defaultRefreshTokenLifetime: TimeInterval = 30 * 86_400
    let engine: OIDCEngine
    private let listener = LoopbackListener(name: "OIDC")

    /// Creates an emulator signing ID tokens with `algorithm` (`RS256` or `ES256`).
    ///
    /// - Parameters:
    ///   - algorithm: the signing algorithm.
    ///   - clients: extra client ids; a value is that client's secret (confidential), or `nil`.
    ///   - accessTokenLifetime: seconds an access token lives (`expires_in`); userinfo refuses it
    ///     with 401 once the emulator's clock is past it.
    ///   - refreshTokenLifetime: seconds each refresh token lives from when it is issued
    ///     (`refresh_token_expires_in`); a refresh with an older one is refused with
    ///     `invalid_grant`. Every refresh issues a new one with the whole lifetime.
    ///   - devicePollInterval: the `interval` a device authorization asks clients to wait between
    ///     polls, in seconds (RFC 8628 §3.2; 5 by default, as most providers).
    ///   - idTokenLifetime: seconds from an ID token's `iat` to its `exp`; shorter than the access
    ///     token's as at Microsoft Entra, where an ID token expires before the access token is due.
    public init(
        algorithm: String = "RS256", clients: [String: String?] = [:], accessTokenLifetime: TimeInterval = 3600,
        refreshTokenLifetime: TimeInterval = OIDCEmulator.defaultRefreshTokenLifetime, devicePollInterval: Int = 5,
        idTokenLifetime: TimeInterval = 3600
    ) throws {
        guard let algorithm = SignatureAlgorithm(rawValue: algorithm) else {
            throw EmulatorError(message: "The OIDC emulator signs with RS256 or ES256, not \(algorithm).")
        }
        engine = OIDCEngine(
            algorithm: algorithm, clients: clients, accessTokenLifetime: accessTokenLifetime,
            refreshTokenLifetime: refreshTokenLifetime, idTokenLifetime: idTokenLifetime)
        engine.locked { $0.devicePollInterval = max(1, devicePollInterval) }
    }

    /// Starts listening on 127.0.0.1 (`port` 0 picks a free one), once the first signing key is
    /// made (on a thread of its own: an RS256 key takes up to a second of CPU).
    @discardableResult
    public func start(port: Int = 0) async throws -> OIDCEmulatorEndpoints {
        try await engine.prepareKeys()
        let issuer = try listener.start(port: port, engine: engine)
        engine.setIssuer(issuer)
        return OIDCEmulatorEndpoints(issuer: issuer, adminURL: URL(string: issuer + "/__sesame")!)
    }

    /// Stops listening.
    public func stop() async { await listener.stop() }

    /// Answers as `issuer` from now on (discovery's endpoints, ID tokens' `iss`, the device page's
    /// address): for a TLS server or proxy in front of the emulator, which clients reach instead
    /// of its own `http` address. The admin API stays at ``OIDCEmulatorEndpoints/adminURL``.
    public func answer(asIssuer issuer: String) { engine.setIssuer(issuer) }

    /// Activates a scenario.
    public func activate(_ setting: OIDCScenarioSetting) async throws { try await engine.activate(setting) }
    /// Turns device login (RFC 8628) off or on, as the admin API's `POST /__sesame/device-login`
    /// with `{"enabled": false}` does: while off, discovery names no `device_authorization_endpoint`
    /// and no device grant, and both answer as at an issuer without them, so that a client falls
    /// back to the browser (or, with no browser, the pasted redirect).
    public func setDeviceLogin(enabled: Bool) async { engine.locked { $0.deviceLoginEnabled = enabled } }
    /// Lists the revocation endpoint where `listing` says, as the admin API's
    /// `POST /__sesame/revocation` with `{"listed": "metadata"}` does.
    public func setRevocationEndpoint(listed listing: OIDCRevocationListing) async {
        engine.locked { $0.revocationListing = listing }
    }
    /// Ends every scenario.
    public func clearScenarios() async { engine.locked { $0.scenarios.removeAll() } }
    /// Registers a client (or changes an existing one): with a `secret` it is confidential and must
    /// authenticate at the token, device and revocation endpoints (HTTP Basic or `client_secret`
    /// in the body); without one it is public and must use PKCE. The admin API does the same:
    /// `POST /__sesame/clients` with `{"client_id": …, "client_secret": …}`.
    public func registerClient(_ clientID: String, secret: String?) async throws {
        try engine.register(clientID: clientID, secret: secret)
    }
    /// Approves a pending device login as `user` (the first person when `nil`); the code may be
    /// typed in any case, with or without its dash.
    public func approveDevice(userCode: String, user: String? = nil) async throws {
        try engine.answerDevice(userCode: userCode, user: user, approve: true)
    }
    /// Declines a pending device login.
    public func denyDevice(userCode: String) async throws {
        try engine.answerDevice(userCode: userCode, user: nil, approve: false)
    }
    /// Revokes every refresh token, as an administrator would. Their used refresh tokens are
    /// forgotten too: one that comes back afterwards is refused without revoking anything.
    public func revokeGrants() async {
        engine.locked { state in
            state.refreshTokens.removeAll()
            state.families.forgetAll()
        }
    }
    /// Makes every access token issued so far invalid, as a provider that revoked them would.
    public func invalidateAccessTokens() async { engine.locked { $0.accessTokens.removeAll() } }
    /// Moves the emulator's clock forward (expiry of codes, device codes, access and refresh tokens).
    public func advanceClock(by seconds: TimeInterval) async { engine.locked { $0.clockOffset += seconds } }
    /// Tokens revoked through the revocation endpoint so far (how many).
    public var revokedCount: Int { engine.locked { $0.revokedCount } }
    /// Refresh-token grants answered and refused so far, and token families revoked because a
    /// used refresh token came back; `GET /__sesame/stats` answers the same.
    public var refreshCounters: RefreshTokenCounters { engine.locked { $0.families.counters } }
    /// Requests per path so far.
    public func requestCount(path: String) -> Int { engine.locked { $0.requestCounts[path] ?? 0 } }
}

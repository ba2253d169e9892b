import Foundation
import Sesame

extension ProviderID {
    /// Acme: a plain OAuth 2.0 server (authorization code with PKCE, device login, refresh tokens,
    /// no ID token), the provider this example adds from outside Sesame.
    public static let acme: ProviderID = "acme"
}

/// Where an Acme server answers and which app logs in to it.
public struct AcmeConfiguration: Sendable, Hashable {
    /// The server's address; its endpoints are paths under it.
    public var baseURL: URL
    /// The app's client id (a public client: no secret, PKCE instead).
    public var clientID: String
    /// The scopes a login asks for when none are given.
    public var defaultScopes: [String]

    /// Creates a configuration.
    public init(baseURL: URL, clientID: String, defaultScopes: [String] = ["profile"]) {
        self.baseURL = baseURL
        self.clientID = clientID
        self.defaultScopes = defaultScopes
    }

    /// Where the person approves a browser login (RFC 6749 §3.1).
    public var authorizationEndpoint: URL { baseURL.appending(path: "oauth/authorize") }
    /// Where codes and refresh tokens are exchanged (RFC 6749 §3.2).
    public var tokenEndpoint: URL { baseURL.appending(path: "oauth/token") }
    /// Where a device login starts (RFC 8628 §3.1).
    public var deviceAuthorizationEndpoint: URL { baseURL.appending(path: "oauth/device") }
    /// Where tokens are revoked (RFC 7009).
    public var revocationEndpoint: URL { baseURL.appending(path: "oauth/revoke") }
    /// Who the token belongs to.
    public var meEndpoint: URL { baseURL.appending(path: "api/me") }
}

/// The person an Acme token belongs to, as `GET /api/me` says.
public struct AcmeUser: Sendable, Hashable {
    /// The stable id, kept as the token's user id.
    public var id: String
    /// The login name.
    public var login: String
    /// The display name.
    public var name: String

    /// Creates a user.
    public init(id: String, login: String, name: String) {
        self.id = id
        self.login = login
        self.name = name
    }
}

/// An Acme server and app: the login dialects, the refresh grant the core's renewal calls, the
/// `/api/me` call, revocation, and the error taxonomy from `AcmeErrors.json`.
///
/// ```swift
/// let acme = try AcmeProvider(
///     configuration: AcmeConfiguration(baseURL: URL(string: "https://id.acme.example")!, clientID: "my-app"))
/// let session = AcmeSession(provider: acme, transport: CurlTransport(), store: store,
///     loginUI: AcmeSession.deviceLogin(provider: acme, transport: transport, presenter: presenter))
/// try await session.open(scopes: ["profile"], allowLoginUI: true)
/// ```
///
/// Creating one checks the address and has no other effect.
public struct AcmeProvider: Sendable {
    /// Where the server answers and which app logs in.
    public let configuration: AcmeConfiguration
    /// How the server's errors are read.
    public let taxonomy: AcmeErrorTaxonomy
    /// The wall clock, for expiry dates.
    public let now: @Sendable () -> Date

    /// The provider id logins are stored under: `acme`.
    public var id: ProviderID { .acme }
    /// "Acme".
    public var displayName: String { "Acme" }

    /// Creates a provider.
    ///
    /// - Parameters:
    ///   - configuration: the server and app.
    ///   - allowingInsecureHosts: hosts plain `http` is allowed to besides loopback addresses.
    ///   - now: the wall clock.
    /// - Throws: `AuthError` (`invalid`) for an address that is not `https` (plain `http` is
    ///   allowed to loopback addresses) or an empty client id.
    public init(
        configuration: AcmeConfiguration, allowingInsecureHosts: Set<String> = [],
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(AuthError) {
        try EndpointSecurity.check(
            configuration.baseURL, role: "The Acme server", provider: .acme,
            allowingInsecureHosts: allowingInsecureHosts)
        guard !configuration.clientID.isEmpty else {
            throw AuthError(category: .invalid, message: "The Acme client id is empty.", provider: .acme)
        }
        self.configuration = configuration
        self.taxonomy = AcmeErrorTaxonomy()
        self.now = now
    }

    /// The authorization code grant with PKCE, as RFC 6749 and RFC 7636 spell it: the core's
    /// standard dialect, pointed at this server.
    public var browserDialect: OAuth2BrowserDialect {
        OAuth2BrowserDialect(
            provider: .acme, errorTaxonomy: taxonomy, authorizationEndpoint: configuration.authorizationEndpoint,
            tokenEndpoint: configuration.tokenEndpoint, clientID: configuration.clientID, now: now)
    }

    /// RFC 8628's device grant: the core's standard dialect, pointed at this server.
    public var deviceDialect: RFC8628DeviceDialect {
        RFC8628DeviceDialect(
            provider: .acme, errorTaxonomy: taxonomy,
            deviceAuthorizationEndpoint: configuration.deviceAuthorizationEndpoint,
            tokenEndpoint: configuration.tokenEndpoint, clientID: configuration.clientID, now: now)
    }

    /// The refresh token grant (RFC 6749 §6): the hook the core's renewal calls, under its lock.
    /// Acme rotates refresh tokens: the answer's replaces the one sent, which the server will
    /// refuse from now on. Nothing is saved here; the core saves the result once.
    ///
    /// - Throws: `AuthError`: `invalid_grant` (the refresh token was revoked, expired or already
    ///   used) is `authenticationReopenSession`, which the core marks as needing a login.
    public func refresh(_ current: AccessToken, transport: any HTTPTransport) async throws -> AccessToken {
        guard let refreshToken = current.refreshToken else {
            throw AuthError(
                category: .authenticationReopenSession, message: "This Acme login has no refresh token.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: .acme)
        }
        let response = try await send(
            formRequest(
                configuration.tokenEndpoint,
                [
                    ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
                    ("client_id", configuration.clientID),
                ]), through: transport)
        guard response.isSuccess else { throw taxonomy.classify(response) }
        guard let answer = OAuthTokenResponse(json: response.json) else {
            throw AuthError.unreadableLoginAnswer("refresh answer (it has no access_token)", provider: .acme)
        }
        let request = LoginRequest(
            provider: .acme, appID: configuration.clientID,
            permissions: current.permissions.granted.sorted().map { Permission.read($0) }, currentToken: current)
        var renewed = AccessToken(answer, for: request, now: now())
        if renewed.refreshToken == nil {
            // A server that does not rotate keeps the refresh token it has.
            renewed.refreshToken = refreshToken
            renewed.refreshTokenExpirationDate = current.refreshTokenExpirationDate
        }
        return renewed
    }

    /// Who `token` belongs to.
    ///
    /// - Throws: `AuthError`: a refused token is `authenticationReopenSession`.
    public func me(token: String, transport: any HTTPTransport) async throws -> AcmeUser {
        let response = try await send(
            HTTPRequest(
                method: .get, url: configuration.meEndpoint,
                headers: ["Authorization": "Bearer \(token)", "Accept": "application/json"]), through: transport)
        guard response.isSuccess else { throw taxonomy.classify(response) }
        guard let json = response.json, let id = json["id"]?.stringValue, let login = json["login"]?.stringValue
        else {
            throw AuthError(
                category: .server, message: "Acme's /api/me answer has no id and login.", httpStatus: response.status,
                provider: .acme)
        }
        return AcmeUser(id: id, login: login, name: json["name"]?.stringValue ?? login)
    }

    /// Revokes `token` (RFC 7009); the server answers 200 whether or not it knew it.
    ///
    /// - Throws: `AuthError` when the server refuses or cannot be reached.
    public func revoke(_ token: String, hint: String, transport: any HTTPTransport) async throws {
        let response = try await send(
            formRequest(
                configuration.revocationEndpoint,
                [("token", token), ("token_type_hint", hint), ("client_id", configuration.clientID)]),
            through: transport)
        guard response.isSuccess else { throw taxonomy.classify(response) }
    }

    /// Whether the server answers at all, for `doctor`: `nil` when it does, else what is wrong.
    public func probe(transport: any HTTPTransport) async -> AuthError? {
        do {
            _ = try await send(HTTPRequest(method: .get, url: configuration.meEndpoint), through: transport)
            return nil
        } catch let error as AuthError {
            return error
        } catch {
            return AuthError(category: .server, message: "\(error)", provider: .acme)
        }
    }

    private func formRequest(_ url: URL, _ form: [(String, String)]) -> HTTPRequest {
        HTTPRequest(
            method: .post, url: url,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(FormEncoding.encode(form).utf8))
    }

    /// Sends `request`; a failure below HTTP becomes a classified `AuthError`.
    private func send(_ request: HTTPRequest, through transport: any HTTPTransport) async throws -> HTTPResponse {
        do {
            return try await transport.send(request)
        } catch let error as TransportError {
            throw taxonomy.classify(error)
        }
    }
}

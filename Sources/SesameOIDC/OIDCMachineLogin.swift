import Foundation
import Sesame

/// A login with no person: a `MachineGrant` made at the issuer's token endpoint with this
/// client's authentication (its secret, or a `private_key_jwt` assertion), for a CI job, a
/// service or a fleet worker.
///
/// ```swift
/// let session = OIDCSession(provider: provider, transport: transport, store: store,
///     loginUI: OIDCMachineLogin(oidc: provider, grant: .clientCredentials, transport: transport))
/// try await session.open(scopes: ["jobs:read"], allowLoginUI: true)
/// ```
///
/// The token is recorded with its grant (`AccessToken.machineGrant`), so ``OIDCSession``
/// renews it by making the grant again when it is due, under the core's single renewal.
public struct OIDCMachineLogin: LoginUI {
    /// The issuer and client.
    public var oidc: OIDCProvider
    /// The grant to make.
    public var grant: MachineGrant
    /// What sends the request (and asks GitHub Actions for its token).
    public var transport: any HTTPTransport
    /// Where a token exchange's source reads its variables (GitHub Actions'); the library reads
    /// no environment of its own.
    public var environment: [String: String]

    /// Creates the login.
    public init(
        oidc: OIDCProvider, grant: MachineGrant, transport: any HTTPTransport, environment: [String: String] = [:]
    ) {
        self.oidc = oidc
        self.grant = grant
        self.transport = transport
        self.environment = environment
    }

    /// Makes the grant for the scopes of `request` (none: the client's default scopes at the
    /// issuer; `openid` is not added, as no person signs in); a token exchange reads a fresh
    /// subject token first.
    ///
    /// - Throws: `AuthError` from the token endpoint (`invalid_client` for a refused client
    ///   authentication, `unauthorized_client` for a client not allowed the grant, `invalid_grant`
    ///   for a subject token refused), or for an answer without an access token or a subject token
    ///   that cannot be read.
    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        let subjectToken = try await grant.subjectToken(environment: environment, transport: transport)
        let form = grant.form(scopes: request.permissions.map(\.name), subjectToken: subjectToken)
        let response = try await LoginHTTP.send(
            try oidc.clientAuthentication.formRequest(
                oidc.endpoints.tokenEndpoint, form, clientID: oidc.configuration.clientID),
            through: transport, taxonomy: oidc.taxonomy)
        guard response.isSuccess else { throw oidc.taxonomy.classify(response) }
        guard let answer = OAuthTokenResponse(json: response.json) else {
            throw AuthError.unreadableLoginAnswer("token answer (it has no access_token)", provider: oidc.id)
        }
        var token = AccessToken(answer, for: request, now: oidc.now())
        // A refresh token is not expected (RFC 6749 §4.4.3); one that comes is not kept, as the
        // grant itself is what renews this login.
        token.refreshToken = nil
        token.refreshTokenExpirationDate = nil
        token.idToken = nil
        token.machineGrant = grant
        return token
    }

    /// Makes the grant again for the login `current`, with the scopes it was granted.
    ///
    /// - Throws: what ``logIn(_:)`` throws.
    public func renew(_ current: AccessToken) async throws -> AccessToken {
        try await logIn(
            LoginRequest(
                provider: oidc.id, appID: oidc.configuration.clientID,
                permissions: current.permissions.granted.sorted().map { Permission.read($0) }))
    }
}

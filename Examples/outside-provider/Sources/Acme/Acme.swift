import Foundation
import Sesame

extension ProviderID {
    /// Acme: a plain OAuth 2.0 server (authorization code with PKCE, device login, rotating refresh
    /// tokens, no ID token), the provider this example adds from outside Sesame.
    public static let acme: ProviderID = "acme"
}

extension OAuth2Description {
    /// Acme, said as data: Sesame's generic OAuth 2.0 provider does every login, renewal,
    /// revocation and status check from it.
    ///
    /// Acme servers are run by their users, so the endpoints are paths under a placeholder
    /// address that the desktop plug-in moves onto the configured server (or the built-in
    /// emulator). The app is a public client: no secret, PKCE instead. The token answer names
    /// nobody; `GET /api/me` says who the token belongs to. Errors are RFC 6749 bodies, read by
    /// `AcmeErrors.json` on top of the core's base rows.
    public static let acme = OAuth2Description(
        id: .acme, displayName: "Acme",
        endpoints: OAuth2Endpoints(
            authorization: URL(string: "https://acme.invalid/oauth/authorize")!,
            token: URL(string: "https://acme.invalid/oauth/token")!,
            deviceAuthorization: URL(string: "https://acme.invalid/oauth/device")!,
            revocation: URL(string: "https://acme.invalid/oauth/revoke")!,
            identity: URL(string: "https://acme.invalid/api/me")!),
        clientAuthenticationMethod: .none, refreshTokensRotate: true, defaultScopes: ["profile"],
        identity: .identityRequest(id: ["id"], login: ["login"], name: ["name"]), errorRows: AcmeErrors.table)
}

import Foundation
import Sesame
import SesameEmulator

/// A provider whose documented behaviour the OpenID emulator reproduces on top of its own
/// (`sesame emulator oidc --quirks NAME`), so that a preset for that provider is tested against
/// what the provider really does. Each fact below cites the provider's own documentation.
///
/// - `google`: endpoints at Google's paths (`/o/oauth2/v2/auth`, `/token`, `/revoke`,
///   `/device/code`, `/v1/userinfo`, `/oauth2/v3/certs`). The desktop client has a secret that is
///   not secret and is still required at the token endpoint (`client_secret is missing.` without
///   it). A refresh token only when the authorization asked `access_type=offline`, and a second
///   one for the same person only with `prompt=consent`; refresh tokens do not rotate. `/revoke`
///   takes the token alone and revokes its whole grant.
/// - `microsoft`: Entra ID v2 under a tenant segment (`common`, `organizations`, `consumers` or a
///   tenant id): `/{tenant}/v2.0/.well-known/openid-configuration`, `/{tenant}/oauth2/v2.0/…`.
///   Discovery for `common` and `organizations` names the issuer as the template
///   `…/{tenantid}/v2.0`; each ID token's `iss` is its person's tenant, and carries `tid`. A refresh
///   token only with the `offline_access` scope. Errors carry `AADSTS` codes (`error_codes`, a
///   description starting `AADSTS<n>:`, trace and correlation ids); a declined device login is
///   `authorization_declined`. No revocation endpoint.
/// - `gitlab`: Doorkeeper's paths (`/oauth/authorize`, `/oauth/token`, `/oauth/revoke`,
///   `/oauth/userinfo`, `/oauth/discovery/keys`, `/oauth/authorize_device`), access tokens of two
///   hours with `created_at`, rotating refresh tokens.
/// - `dropbox`: no discovery and no ID token; `/oauth2/authorize` with PKCE, a refresh token only
///   with `token_access_type=offline`, refresh tokens that do not rotate, the account from
///   `POST /2/users/get_current_account`, revocation by `POST /2/auth/token/revoke` with the
///   bearer token, API errors as `{"error_summary": …, "error": {".tag": …}}`.
/// - `slack`: OAuth v2 (`/oauth/v2/authorize`, `/api/oauth.v2.access`): every answer is HTTP 200
///   with `"ok": true` or `"ok": false, "error": "invalid_code"`; the user's token sits under
///   `authed_user`; token rotation on (tokens of twelve hours, rotating refresh tokens);
///   identity from `auth.test`, revocation by `auth.revoke`.
public enum OIDCQuirks: String, Sendable, Hashable, CaseIterable, Codable {
    // Google, "OAuth 2.0 for iOS & Desktop Apps"
    // (https://developers.google.com/identity/protocols/oauth2/native-app): desktop apps are public
    // clients; the client id *and* the client secret from the Clients page are sent to
    // https://oauth2.googleapis.com/token; the authorization endpoint is
    // https://accounts.google.com/o/oauth2/v2/auth; refresh tokens come back only when
    // `access_type=offline` was asked ("This field is only present if the access_type parameter
    // was set to offline", https://cloud.google.com/nodejs/docs/reference/google-auth-library/latest/google-auth-library/credentials),
    // and only on the first consent unless `prompt=consent` asks again
    // (https://developers.google.com/identity/protocols/oauth2/web-server#offline); a refresh
    // answers a new access token and no new refresh token; revocation at
    // https://oauth2.googleapis.com/revoke with `token=` revokes the grant (an access token's
    // refresh token too). Discovery: https://accounts.google.com/.well-known/openid-configuration.
    /// Google's quirks.
    case google
    // Microsoft identity platform, "OpenID Connect on the Microsoft identity platform"
    // (https://learn.microsoft.com/entra/identity-platform/v2-protocols-oidc): authority
    // https://login.microsoftonline.com/{tenant}/v2.0 with `{tenant}` one of common, organizations,
    // consumers or a tenant id (the consumer tenant is 9188040d-6c67-4c5b-b112-36a304b66dad);
    // the discovery document of common
    // (https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration) has
    // "issuer": "https://login.microsoftonline.com/{tenantid}/v2.0"; an ID token's `iss` names the
    // tenant the person signed in to and `tid` is that tenant
    // (https://learn.microsoft.com/entra/identity-platform/id-token-claims-reference); "always
    // check that the tid in a token matches"
    // (https://learn.microsoft.com/entra/identity-platform/claims-validation). Refresh tokens need
    // the `offline_access` scope (https://learn.microsoft.com/entra/identity-platform/scopes-oidc);
    // device flow at /{tenant}/oauth2/v2.0/devicecode, declined with `authorization_declined`
    // (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-device-code); token errors are
    // {"error", "error_description": "AADSTS…: …\r\nTrace ID: …", "error_codes": […], "timestamp",
    // "trace_id", "correlation_id"} (https://learn.microsoft.com/entra/identity-platform/reference-error-codes).
    /// Microsoft Entra ID's quirks.
    case microsoft
    // GitLab, "OAuth 2.0 identity provider API" (https://docs.gitlab.com/api/oauth2/): based on
    // Doorkeeper; authorization code with PKCE, device authorization grant from GitLab 17.1;
    // endpoints /oauth/authorize, /oauth/token, /oauth/revoke, /oauth/userinfo, device at
    // /oauth/authorize_device; access tokens expire after two hours and the token answer carries
    // `created_at`; a refresh answers a new refresh token. OpenID issuer: https://gitlab.com or the
    // self-managed host (https://docs.gitlab.com/integration/openid_connect_provider/).
    /// GitLab's quirks.
    case gitlab
    // Dropbox, "OAuth Guide" (https://developers.dropbox.com/oauth-guide) and "Using OAuth 2.0
    // with offline access" (https://dropbox.tech/developers/using-oauth-2-0-with-offline-access):
    // authorize at https://www.dropbox.com/oauth2/authorize (PKCE for public clients), tokens at
    // https://api.dropboxapi.com/oauth2/token, short-lived access tokens, a refresh token only with
    // `token_access_type=offline`, which stays the same on refresh; no OpenID discovery (an ID
    // token only when the `openid` scope is asked, which the preset does not). HTTP API
    // (https://www.dropbox.com/developers/documentation/http/documentation): errors
    // {"error_summary": "…", "error": {".tag": "expired_access_token"}}, 429 with Retry-After,
    // POST /2/users/get_current_account, POST /2/auth/token/revoke ("Disables the access token
    // used to authenticate the call … and its refresh token").
    /// Dropbox's quirks.
    case dropbox
    // Slack, oauth.v2.access (https://docs.slack.dev/reference/methods/oauth.v2.access):
    // client_id and client_secret (HTTP Basic preferred), code, code_verifier for PKCE,
    // redirect_uri, grant_type=refresh_token; errors such as invalid_code, bad_client_secret,
    // invalid_refresh_token as {"ok": false, "error": "…"} with HTTP 200 (every Web API method,
    // https://docs.slack.dev/apis/web-api/); user tokens under `authed_user`
    // (https://docs.slack.dev/authentication/installing-with-oauth); token rotation is optional:
    // with it access tokens expire every 12 hours and each refresh revokes the refresh token used
    // (https://docs.slack.dev/authentication/using-token-rotation); identity from auth.test
    // (https://docs.slack.dev/reference/methods/auth.test), revocation by auth.revoke
    // (https://docs.slack.dev/reference/methods/auth.revoke).
    /// Slack's quirks.
    case slack
}

extension OIDCQuirks {
    /// The secret of the emulator's desktop client when Google's quirks are on: Google gives a
    /// desktop client a secret that is not secret and requires it at the token endpoint.
    public static let googleDesktopClientSecret = "GOCSPX-sesame-emulator-not-secret"
    /// The secret of the emulator's client when Slack's quirks are on (Slack always wants one).
    public static let slackClientSecret = "sesame-emulator-slack-secret"
    /// The work tenant Alice belongs to when Microsoft's quirks are on.
    public static let microsoftWorkTenant = "5b7e1d2a-3c4f-4a6b-8d9e-0f1a2b3c4d5e"
    /// Microsoft's tenant of personal accounts (Bob's, when Microsoft's quirks are on).
    public static let microsoftConsumerTenant = "9188040d-6c67-4c5b-b112-36a304b66dad"

    /// Whether the provider is an OpenID issuer (discovery, ID tokens, `openid` required).
    var isOpenIDIssuer: Bool { self == .google || self == .microsoft || self == .gitlab }

    /// The secret the emulator's default client has under these quirks; `nil` for a public client.
    public var defaultClientSecret: String? {
        switch self {
        case .google: return Self.googleDesktopClientSecret
        case .slack: return Self.slackClientSecret
        default: return nil
        }
    }

    /// Seconds an access token lives unless the emulator is told otherwise, as the provider
    /// documents: GitLab two hours, Dropbox four, Slack (with rotation) twelve, else one.
    public var defaultAccessTokenLifetime: TimeInterval {
        switch self {
        case .gitlab: return 7200
        case .dropbox: return 14_400
        case .slack: return 43_200
        default: return 3600
        }
    }
}

extension OIDCEmulator {
    /// Creates an emulator that answers as `quirks`' provider does (see ``OIDCQuirks``): its
    /// default client is registered as that provider registers a desktop client (with Google's
    /// public secret, Slack's secret, or public with PKCE).
    ///
    /// - Parameters:
    ///   - quirks: the provider to behave as.
    ///   - algorithm: the signing algorithm, `RS256` or `ES256`.
    ///   - accessTokenLifetime: seconds an access token lives; the provider's by default.
    ///   - devicePollInterval: seconds between device polls.
    public convenience init(
        quirks: OIDCQuirks, algorithm: String = "RS256", accessTokenLifetime: TimeInterval? = nil,
        devicePollInterval: Int = 5
    ) throws {
        try self.init(
            algorithm: algorithm, accessTokenLifetime: accessTokenLifetime ?? quirks.defaultAccessTokenLifetime,
            devicePollInterval: devicePollInterval)
        engine.locked { state in
            state.quirks = quirks
            state.clients[OIDCEmulator.defaultClientID] = .some(quirks.defaultClientSecret)
            if quirks == .microsoft {
                state.people[0].tenant = OIDCQuirks.microsoftWorkTenant
                state.people[1].tenant = OIDCQuirks.microsoftConsumerTenant
            }
        }
    }

    /// The provider whose quirks this emulator reproduces; `nil` for a plain OpenID provider.
    public var quirks: OIDCQuirks? { engine.locked { $0.quirks } }
}

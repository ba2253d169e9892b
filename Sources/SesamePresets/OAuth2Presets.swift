import Foundation
import Sesame

extension OAuth2Description {
    // Dropbox, "OAuth Guide" (https://developers.dropbox.com/oauth-guide) and "Using OAuth 2.0
    // with offline access" (https://dropbox.tech/developers/using-oauth-2-0-with-offline-access):
    // the code flow with PKCE for an app without a secret, authorization at
    // https://www.dropbox.com/oauth2/authorize, tokens at https://api.dropboxapi.com/oauth2/token;
    // access tokens are short-lived, a refresh token comes only with `token_access_type=offline`
    // and stays the same on refresh; no device flow, no OpenID discovery (an ID token only with the
    // `openid` scope, not asked here). The token answer names the account (`account_id`). HTTP API
    // (https://www.dropbox.com/developers/documentation/http/documentation): errors
    // {"error_summary": "expired_access_token/..", "error": {".tag": "expired_access_token"}},
    // /oauth2/token's errors as RFC 6749 bodies, 429 with Retry-After;
    // POST /2/users/get_current_account (no body) answers the account; POST /2/auth/token/revoke
    // "disables the access token used to authenticate the call", and its refresh token.
    /// Dropbox: PKCE, offline access, refresh tokens that do not rotate, `.tag` errors.
    public static let dropbox: OAuth2Description = {
        var dropbox = OAuth2Description(
            id: ProviderID("dropbox"), displayName: "Dropbox",
            endpoints: OAuth2Endpoints(
                authorization: URL(string: "https://www.dropbox.com/oauth2/authorize")!,
                token: URL(string: "https://api.dropboxapi.com/oauth2/token")!,
                revocation: URL(string: "https://api.dropboxapi.com/2/auth/token/revoke")!,
                identity: URL(string: "https://api.dropboxapi.com/2/users/get_current_account")!),
            clientAuthenticationMethod: .clientSecretPost, authorizationParameters: [("token_access_type", "offline")],
            refreshTokensRotate: false, defaultScopes: ["account_info.read"],
            identity: .identityRequest(id: ["account_id"], login: ["email"], name: ["name", "display_name"]),
            errors: OAuth2ErrorFormat(
                codePaths: [["error", ".tag"], ["error", "reason", ".tag"], ["error"]],
                descriptionPaths: [["error_summary"], ["error_description"]]),
            errorRows: .dropbox)
        dropbox.identity.method = .post
        dropbox.revokesWithBearer = true
        return dropbox
    }()

    // Slack, oauth.v2.access (https://docs.slack.dev/reference/methods/oauth.v2.access): the code
    // (with `code_verifier` for PKCE) and the client's id and secret, HTTP Basic preferred; a
    // person's own token is asked with `user_scope` (comma-separated) and comes back under
    // `authed_user` (https://docs.slack.dev/authentication/installing-with-oauth). Every Web API
    // answer is HTTP 200, `"ok": false` with `"error": "invalid_code"` (or invalid_auth,
    // token_expired, …) on failure (https://docs.slack.dev/apis/web-api/). Token rotation is
    // optional; with it access tokens expire after 12 hours and each refresh
    // (`grant_type=refresh_token` at oauth.v2.access) revokes the refresh token used
    // (https://docs.slack.dev/authentication/using-token-rotation). Identity from auth.test
    // (https://docs.slack.dev/reference/methods/auth.test: `user_id`, `user`), revocation with
    // auth.revoke (https://docs.slack.dev/reference/methods/auth.revoke).
    /// Slack: OAuth v2 with the person's own token under `authed_user`, `"ok": false` on HTTP 200.
    public static let slack: OAuth2Description = {
        var slack = OAuth2Description(
            id: ProviderID("slack"), displayName: "Slack",
            endpoints: OAuth2Endpoints(
                authorization: URL(string: "https://slack.com/oauth/v2/authorize")!,
                token: URL(string: "https://slack.com/api/oauth.v2.access")!,
                revocation: URL(string: "https://slack.com/api/auth.revoke")!,
                identity: URL(string: "https://slack.com/api/auth.test")!),
            clientAuthenticationMethod: .clientSecretBasic, defaultScopes: ["identify"], scopeSeparator: ",",
            identity: .identityRequest(id: ["user_id"], login: ["user"], name: nil),
            errors: OAuth2ErrorFormat(codePaths: [["error"]], descriptionPaths: [], successFlag: ["ok"]),
            errorRows: .slack)
        slack.tokenAnswerPath = ["authed_user"]
        slack.scopeParameter = "user_scope"
        return slack
    }()

    /// The plain OAuth 2.0 presets Sesame ships: Dropbox and Slack.
    public static let presets: [OAuth2Description] = [.dropbox, .slack]
}

extension ErrorRuleTable {
    /// A row for `errors` that asks the person to sign in again (the token is refused).
    static func signInAgain(_ id: String, _ errors: [String], _ meaning: String, source: String) -> ErrorRule {
        ErrorRule(
            id: id, match: ErrorRuleMatch(error: errors), category: .authenticationReopenSession,
            recoveryTactic: .reauthenticate, shouldNotifyUser: false, closesSession: false, meaning: meaning,
            source: source)
    }

    /// A row for `errors` that is the app's configuration, told to the person.
    static func misconfigured(_ id: String, _ errors: [String], _ message: String, source: String) -> ErrorRule {
        ErrorRule(
            id: id, match: ErrorRuleMatch(error: errors), category: .invalid, recoveryTactic: .showMessage,
            shouldNotifyUser: true, closesSession: false, userMessage: message, meaning: message, source: source)
    }

    /// A row for a rate limit: wait as the provider says, then try again.
    static func slowDown(_ id: String, _ errors: [String], source: String) -> ErrorRule {
        ErrorRule(
            id: id, match: ErrorRuleMatch(error: errors), category: .throttling, recoveryTactic: .retryAfterBackoff,
            shouldNotifyUser: false, closesSession: false,
            meaning: "Too many requests: wait as long as Retry-After says, then try again.", source: source)
    }

    /// Dropbox's own rows, on the base rows
    /// (https://www.dropbox.com/developers/documentation/http/documentation#error-handling).
    public static let dropbox = ErrorRuleTable(
        name: "DropboxErrors",
        rules: [
            signInAgain(
                "dropbox-token", ["expired_access_token", "invalid_access_token", "user_suspended"],
                "Dropbox refused the access token (expired, revoked or the account suspended); renew it or sign in "
                    + "again.", source: "Dropbox HTTP API, AuthError"),
            slowDown(
                "dropbox-rate-limit", ["too_many_requests", "too_many_write_operations"], source: "RateLimitReason"),
        ], extending: .base)

    /// Slack's own rows, on the base rows: its errors come as `"ok": false` on HTTP 200
    /// (https://docs.slack.dev/reference/methods/oauth.v2.access, .../auth.test).
    public static let slack = ErrorRuleTable(
        name: "SlackErrors",
        rules: [
            signInAgain(
                "slack-token",
                [
                    "invalid_auth", "not_authed", "token_expired", "token_revoked", "account_inactive",
                    "invalid_refresh_token",
                ],
                "Slack refused the token (invalid, expired or revoked); renew it or sign in again.",
                source: "auth.test, oauth.v2.access"),
            misconfigured(
                "slack-code",
                ["invalid_code", "code_already_used", "bad_redirect_uri", "oauth_authorization_url_mismatch"],
                "Slack refused the sign-in's code; sign in again.", source: "oauth.v2.access"),
            misconfigured(
                "slack-client", ["invalid_client_id", "bad_client_secret"],
                "Slack does not know this app's client id and secret; check the slack settings.",
                source: "oauth.v2.access"),
            slowDown("slack-rate-limit", ["ratelimited"], source: "Web API rate limits"),
        ], extending: .base)
}

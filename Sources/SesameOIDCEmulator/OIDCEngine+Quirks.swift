import Foundation
import Sesame
import SesameEmulator

/// The providers' documented behaviour on top of the emulator's own (see ``OIDCQuirks``, where
/// each fact cites its documentation). A provider's paths are answered here; what it shares with
/// the plain emulator (the consent page, the device page, the admin API) falls through to
/// ``OIDCEngine/route(_:_:)``.
extension OIDCEngine {
    /// The answer for `request` under the emulator's quirks; `nil` when the plain emulator answers.
    func quirkRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        guard let quirks = state.quirks, !request.path.hasPrefix("/__sesame") else { return nil }
        // The consent page's decision and the device page are the emulator's own, for every provider.
        if (request.method == .post && request.path == "/authorize") || request.path == "/device" { return nil }
        switch quirks {
        case .google: return googleRoute(request, &state)
        case .microsoft: return microsoftRoute(request, &state)
        case .gitlab: return gitlabRoute(request, &state)
        case .dropbox: return dropboxRoute(request, &state) ?? Self.notFound(request)
        case .slack: return slackRoute(request, &state) ?? Self.notFound(request)
        }
    }

    /// Whether an authorization response names the issuer (RFC 9207): of the providers, only
    /// Google sends `iss`.
    static func sendsIssuerInRedirect(_ state: State) -> Bool { state.quirks == nil || state.quirks == .google }

    static func notFound(_ request: LoopbackRequest) -> Reply {
        Reply(
            status: 404, headers: ["Content-Type": "text/plain; charset=utf-8"],
            body: .bytes(Data("No such endpoint: \(request.path)".utf8)))
    }

    /// Adds what the provider puts in an ID token: Microsoft's `iss` per tenant and `tid`.
    func quirkClaims(_ claims: inout [String: JSONValue], of person: Person, _ state: inout State) {
        guard state.quirks == .microsoft, let tenant = person.tenant else { return }
        claims["iss"] = .string(state.issuer + "/" + tenant + "/v2.0")
        claims["tid"] = .string(tenant)
        if consume(.wrongTenant, &state) != nil { claims["tid"] = .string("00000000-0000-0000-0000-00000000beef") }
    }

    // MARK: Shared steps

    /// The authorization endpoint at a provider's path: the request, or the consent page's
    /// decision posted back to it (no `response_type`).
    func authorizeOrDecide(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        request.method == .post && request["response_type"] == nil
            ? decide(request, &state) : authorize(request, &state)
    }

    /// The token endpoint's scenarios and client authentication, as ``token(_:_:)`` runs them:
    /// the client, or the answer that refuses it.
    func tokenPreflight(_ request: LoopbackRequest, _ state: inout State) -> ClientCheck {
        if let failure = scenarioFailure(at: .serverError, &state) { return .refused(failure) }
        if consume(.tooManyRequests, &state) != nil {
            var response = Reply.oauthError("temporarily_unavailable", "Too many requests.", status: 429)
            response.headers["Retry-After"] = "7"
            return .refused(response)
        }
        return authenticateClient(request, &state)
    }

    /// A refresh that keeps the refresh token (Google, Dropbox): a new access token, and no new
    /// refresh token in the answer.
    func keepingRefresh(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let clientID: String
        switch tokenPreflight(request, &state) {
        case .client(let id): clientID = id
        case .refused(let reply): return reply
        }
        let token = request["refresh_token"] ?? ""
        var reply: Reply
        if let record = state.refreshTokens[token], record.grant.clientID == clientID, record.expiresAt > now(state) {
            if consume(.refreshRevoked, &state) != nil {
                state.refreshTokens[token] = nil
                reply = Reply.oauthError("invalid_grant", "The refresh token was revoked.")
            } else {
                reply = withoutRefreshToken(issue(record.grant, nonce: nil, &state), &state)
            }
        } else {
            reply = Reply.oauthError("invalid_grant", "The refresh token is invalid, expired or revoked.")
        }
        state.families.count(refreshGranted: reply.status == 200)
        return reply
    }

    /// `reply` without the refresh token it issued (which is forgotten too).
    func withoutRefreshToken(_ reply: Reply, _ state: inout State) -> Reply {
        editing(reply) { fields in
            if let token = fields["refresh_token"]?.stringValue { state.refreshTokens[token] = nil }
            fields["refresh_token"] = nil
            fields["refresh_token_expires_in"] = nil
        }
    }

    /// `reply` with its JSON object's members changed by `edit` (the deferred ID token kept).
    func editing(_ reply: Reply, _ edit: (inout [String: JSONValue]) -> Void) -> Reply {
        guard case .json(.object(var fields)) = reply.body else { return reply }
        edit(&fields)
        var edited = reply
        edited.body = .json(.object(fields))
        return edited
    }

    /// The access token of `Authorization: Bearer …` (or a `token` parameter, as Slack allows).
    static func bearer(_ request: LoopbackRequest) -> String? {
        let header = request.headers["Authorization"] ?? ""
        if header.lowercased().hasPrefix("bearer ") { return String(header.dropFirst(7)).trimmedASCII }
        return request["token"]
    }

    /// Revokes the grant `token` (access or refresh) belongs to: all its tokens. `false` when the
    /// token is unknown.
    func revokeGrant(of token: String, _ state: inout State) -> Bool {
        guard let grant = state.refreshTokens[token]?.grant ?? state.accessTokens[token]?.grant else { return false }
        let before = state.accessTokens.count + state.refreshTokens.count
        state.refreshTokens = state.refreshTokens.filter { $0.value.grant.id != grant.id }
        state.accessTokens = state.accessTokens.filter { $0.value.grant.id != grant.id }
        state.families.forget(grant.id)
        state.revokedCount += before - state.accessTokens.count - state.refreshTokens.count
        return true
    }

    /// The parameters of the authorization request that `request`'s code came from.
    static func authorizationParameters(of request: LoopbackRequest, _ state: State) -> [String: String] {
        state.codes[request["code"] ?? ""]?.pending.parameters ?? [:]
    }

    /// The discovery document with its endpoints at the provider's `paths`, without those it
    /// does not list (`nil`).
    func discovery(_ state: State, paths: [String: String?], authMethods: [String]) -> JSONValue {
        var document = discovery(state).objectValue ?? [:]
        for (name, path) in paths { document[name] = path.map { .string(state.issuer + $0) } }
        document["token_endpoint_auth_methods_supported"] = .array(authMethods.map { .string($0) })
        document["revocation_endpoint_auth_methods_supported"] = nil
        if !Self.sendsIssuerInRedirect(state) { document["authorization_response_iss_parameter_supported"] = nil }
        return .object(document)
    }

    // MARK: Google

    func googleRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        switch (request.method, request.path) {
        case (.get, "/.well-known/openid-configuration"):
            return Reply.json(
                discovery(
                    state,
                    paths: [
                        "authorization_endpoint": "/o/oauth2/v2/auth", "token_endpoint": "/token",
                        "revocation_endpoint": "/revoke", "device_authorization_endpoint": "/device/code",
                        "userinfo_endpoint": "/v1/userinfo", "jwks_uri": "/oauth2/v3/certs",
                    ], authMethods: ["client_secret_post", "client_secret_basic"]))
        case (.get, "/o/oauth2/v2/auth"), (.post, "/o/oauth2/v2/auth"): return authorizeOrDecide(request, &state)
        case (.post, "/token"): return googleToken(request, &state)
        case (.post, "/revoke"):
            guard let token = request["token"] else { return Reply.oauthError("invalid_request", "Missing token.") }
            guard revokeGrant(of: token, &state) else {
                return Reply.oauthError("invalid_token", "Token expired or revoked")
            }
            return Reply.json(.object([:]))
        case (.post, "/device/code"): return deviceAuthorization(request, &state)
        case (.get, "/v1/userinfo"), (.post, "/v1/userinfo"): return userinfo(request, state)
        case (.get, "/oauth2/v3/certs"): return Reply.json(jwks(state))
        default: return nil
        }
    }

    func googleToken(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        // The desktop client's secret is required, and Google says so as an invalid request.
        let presented =
            request.form.contains { $0.0 == "client_secret" }
            || (request.headers["Authorization"] ?? "").lowercased().hasPrefix("basic ")
        if let id = request["client_id"], case .some(.some) = state.clients[id], !presented {
            return Reply.oauthError("invalid_request", "client_secret is missing.")
        }
        switch request["grant_type"] {
        case "refresh_token": return keepingRefresh(request, &state)
        case "authorization_code":
            let parameters = Self.authorizationParameters(of: request, state)
            let record = state.codes[request["code"] ?? ""]
            let reply = token(request, &state)
            guard reply.status == 200, let record else { return reply }
            // A refresh token only for offline access, and again for the same person only when
            // the consent was asked again.
            let key = record.pending.clientID + " " + record.sub
            let prompts = (parameters["prompt"] ?? "").split(separator: " ")
            guard parameters["access_type"] == "offline",
                !state.offlineGrants.contains(key) || prompts.contains("consent")
            else { return withoutRefreshToken(reply, &state) }
            state.offlineGrants.insert(key)
            return editing(reply) { $0["refresh_token_expires_in"] = nil }
        default: return token(request, &state)
        }
    }

    // MARK: Microsoft

    /// The tenant segments the emulator knows: the three audiences and its two tenants.
    static func isKnownTenant(_ tenant: String) -> Bool {
        ["common", "organizations", "consumers", OIDCQuirks.microsoftWorkTenant, OIDCQuirks.microsoftConsumerTenant]
            .contains(tenant)
    }

    func microsoftRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        if request.path == "/oidc/userinfo" { return userinfo(request, state) }
        let parts = request.path.split(separator: "/").map(String.init)
        guard parts.count == 4 || parts.count == 5, let tenant = parts.first else { return nil }
        let rest = parts.dropFirst().joined(separator: "/")
        guard Self.isKnownTenant(tenant) else {
            return Self.aadsts(
                Reply.oauthError(
                    "invalid_tenant",
                    "Tenant '\(tenant)' not found. Check to make sure you have the correct tenant ID and are signing "
                        + "into the correct cloud."), code: 90002, now: now(state))
        }
        switch (request.method, rest) {
        case (.get, "v2.0/.well-known/openid-configuration"):
            return Reply.json(microsoftDiscovery(tenant: tenant, state))
        case (.get, "discovery/v2.0/keys"): return Reply.json(jwks(state))
        case (.get, "oauth2/v2.0/authorize"), (.post, "oauth2/v2.0/authorize"):
            return authorizeOrDecide(request, &state)
        case (.post, "oauth2/v2.0/devicecode"):
            return Self.aadsts(deviceAuthorization(request, &state), now: now(state))
        case (.post, "oauth2/v2.0/token"):
            var reply = token(request, &state)
            if request["grant_type"] == "urn:ietf:params:oauth:grant-type:device_code",
                reply.body.json?["error"]?.stringValue == "access_denied"
            {
                reply = Reply.oauthError("authorization_declined", "The end user denied the authorization request.")
            }
            // A refresh token only with the offline_access scope.
            if reply.status == 200, let scope = reply.body.json?["scope"]?.stringValue,
                !scope.split(separator: " ").contains("offline_access")
            {
                reply = withoutRefreshToken(reply, &state)
            }
            return Self.aadsts(editing(reply) { $0["refresh_token_expires_in"] = nil }, now: now(state))
        default: return nil
        }
    }

    func microsoftDiscovery(tenant: String, _ state: State) -> JSONValue {
        let issuer: String
        switch tenant {
        case "common", "organizations": issuer = state.issuer + "/{tenantid}/v2.0"
        case "consumers": issuer = state.issuer + "/" + OIDCQuirks.microsoftConsumerTenant + "/v2.0"
        default: issuer = state.issuer + "/" + tenant + "/v2.0"
        }
        var document =
            discovery(
                state,
                paths: [
                    "authorization_endpoint": "/\(tenant)/oauth2/v2.0/authorize",
                    "token_endpoint": "/\(tenant)/oauth2/v2.0/token",
                    "device_authorization_endpoint": "/\(tenant)/oauth2/v2.0/devicecode",
                    "jwks_uri": "/\(tenant)/discovery/v2.0/keys", "userinfo_endpoint": "/oidc/userinfo",
                    "revocation_endpoint": nil,
                ], authMethods: ["client_secret_post", "private_key_jwt", "client_secret_basic"]
            ).objectValue ?? [:]
        document["issuer"] = .string(issuer)
        document["claims_supported"] = .array((Self.claimsSupported + ["tid"]).map { .string($0) })
        return .object(document)
    }

    /// `reply` as Microsoft's token service words an error: the AADSTS code in `error_codes` and
    /// at the start of `error_description`, with trace and correlation ids and a timestamp.
    static func aadsts(_ reply: Reply, code: Int? = nil, now: Date) -> Reply {
        guard reply.status >= 400, let error = reply.body.json?["error"]?.stringValue else { return reply }
        let description = reply.body.json?["error_description"]?.stringValue ?? ""
        let number = code ?? aadstsCode(error: error, description: description)
        let trace = UUID().uuidString.lowercased()
        let correlation = UUID().uuidString.lowercased()
        let timestamp = now.ISO8601Format().replacingOccurrences(of: "T", with: " ")
        var answer = Reply.json(
            .object([
                "error": .string(error),
                "error_description": .string(
                    "AADSTS\(number): \(description)\r\nTrace ID: \(trace)\r\nCorrelation ID: \(correlation)\r\n"
                        + "Timestamp: \(timestamp)"),
                "error_codes": .array([.number(Double(number))]), "timestamp": .string(timestamp),
                "trace_id": .string(trace), "correlation_id": .string(correlation),
                "error_uri": .string("https://login.microsoftonline.com/error?code=\(number)"),
            ]), status: reply.status)
        for field in reply.headers where answer.headers[field.name] == nil { answer.headers[field.name] = field.value }
        return answer
    }

    /// The AADSTS code Microsoft's reference gives the emulator's error
    /// (https://learn.microsoft.com/entra/identity-platform/reference-error-codes).
    static func aadstsCode(error: String, description: String) -> Int {
        switch error {
        case "invalid_grant":
            if description.contains("refresh token") {
                // ExpiredOrRevokedGrantInactiveToken, or FreshTokenNeeded (the grant was revoked).
                return description.contains("expired") ? 700082 : 50173
            }
            if description.contains("PKCE") { return 501481 }  // the code_verifier does not match
            return 70000  // InvalidGrant: the code is invalid, used or expired
        case "invalid_client":
            if description.contains("Unknown client") { return 700016 }  // the application was not found
            if description.contains("public") { return 700025 }  // InvalidClientPublicClientWithCredential
            if description.contains("confidential") { return 7000218 }  // client_assertion or client_secret needed
            return 7000215  // InvalidClientSecretProvided
        case "authorization_pending", "slow_down": return 70016  // AuthorizationPending
        case "expired_token": return 70019  // CodeExpired
        case "authorization_declined": return 65004  // UserDeclinedConsent
        case "invalid_scope": return 70011  // InvalidScope
        case "unsupported_grant_type": return 70003  // UnsupportedGrantType
        case "temporarily_unavailable": return 50196  // LoopDetected: too many requests
        default: return 90014  // a required field is missing or wrong
        }
    }

    // MARK: GitLab

    func gitlabRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        switch (request.method, request.path) {
        case (.get, "/.well-known/openid-configuration"):
            return Reply.json(
                discovery(
                    state,
                    paths: [
                        "authorization_endpoint": "/oauth/authorize", "token_endpoint": "/oauth/token",
                        "revocation_endpoint": "/oauth/revoke",
                        "device_authorization_endpoint": "/oauth/authorize_device",
                        "userinfo_endpoint": "/oauth/userinfo", "jwks_uri": "/oauth/discovery/keys",
                    ], authMethods: ["client_secret_basic", "client_secret_post", "none"]))
        case (.get, "/oauth/authorize"), (.post, "/oauth/authorize"): return authorizeOrDecide(request, &state)
        case (.post, "/oauth/token"):
            let seconds = Self.epochSeconds(now(state))
            return editing(token(request, &state)) { fields in
                guard fields["access_token"] != nil else { return }
                fields["created_at"] = seconds
                fields["refresh_token_expires_in"] = nil
            }
        case (.post, "/oauth/revoke"): return revoke(request, &state)
        case (.post, "/oauth/authorize_device"): return deviceAuthorization(request, &state)
        case (.get, "/oauth/userinfo"), (.post, "/oauth/userinfo"): return userinfo(request, state)
        case (.get, "/oauth/discovery/keys"): return Reply.json(jwks(state))
        default: return nil
        }
    }

    // MARK: Dropbox

    func dropboxRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        switch (request.method, request.path) {
        case (.get, "/oauth2/authorize"), (.post, "/oauth2/authorize"): return authorizeOrDecide(request, &state)
        case (.post, "/oauth2/token"):
            if request["grant_type"] == "refresh_token" {
                return editing(keepingRefresh(request, &state)) { Self.dropboxTokenFields(&$0, state) }
            }
            let parameters = Self.authorizationParameters(of: request, state)
            var reply = token(request, &state)
            // A refresh token only for offline access; "online" (the default) has none.
            if reply.status == 200, parameters["token_access_type"] != "offline" {
                reply = withoutRefreshToken(reply, &state)
            }
            return editing(reply) { Self.dropboxTokenFields(&$0, state) }
        case (.post, "/2/users/get_current_account"):
            return dropboxCall(request, &state) { person, _, _ in
                .object([
                    "account_id": .string("dbid:" + person.sub),
                    "name": .object([
                        "given_name": .string(String(person.name.split(separator: " ").first ?? "")),
                        "surname": .string(String(person.name.split(separator: " ").last ?? "")),
                        "familiar_name": .string(String(person.name.split(separator: " ").first ?? "")),
                        "display_name": .string(person.name),
                        "abbreviated_name": .string(String(person.name.split(separator: " ").compactMap(\.first))),
                    ]),
                    "email": .string(person.email), "email_verified": .bool(true), "disabled": .bool(false),
                    "locale": .string("en"), "is_paired": .bool(false),
                    "account_type": .object([".tag": .string("basic")]),
                ])
            }
        case (.post, "/2/auth/token/revoke"):
            return dropboxCall(request, &state) { _, token, state in
                _ = revokeGrant(of: token, &state)
                return .null
            }
        default: return nil
        }
    }

    /// Dropbox's token answer: `bearer` in lower case, the account id and uid beside the token.
    static func dropboxTokenFields(_ fields: inout [String: JSONValue], _ state: State) {
        guard let token = fields["access_token"]?.stringValue else { return }
        fields["refresh_token_expires_in"] = nil
        fields["token_type"] = .string("bearer")
        if let sub = state.accessTokens[token]?.grant.sub {
            fields["account_id"] = .string("dbid:" + sub)
            fields["uid"] = .string(sub)
        }
    }

    /// A Dropbox RPC call: the bearer token checked, a body that must be empty, `null` or JSON,
    /// Dropbox's error shapes (`error_summary` and a `.tag`), 429 with `Retry-After`.
    func dropboxCall(
        _ request: LoopbackRequest, _ state: inout State, _ answer: (Person, String, inout State) -> JSONValue
    ) -> Reply {
        func error(_ tag: String, status: Int) -> Reply {
            Reply.json(
                .object(["error_summary": .string(tag + "/.."), "error": .object([".tag": .string(tag)])]),
                status: status)
        }
        let contentType = (request.headers["Content-Type"] ?? "").lowercased()
        if !request.body.isEmpty, !contentType.hasPrefix("application/json") {
            return Reply(
                status: 400, headers: ["Content-Type": "text/plain; charset=utf-8"],
                body: .bytes(
                    Data(
                        ("Error in call to API function \"\(request.path.dropFirst(3))\": Bad HTTP \"Content-Type\" "
                            + "header: \"\(contentType)\".  Expecting one of \"application/json\", "
                            + "\"application/json; charset=utf-8\", \"text/plain; charset=dropbox-cors-hack\".").utf8)))
        }
        if consume(.tooManyRequests, &state) != nil {
            var reply = Reply.json(
                .object([
                    "error_summary": .string("too_many_requests/.."),
                    "error": .object([
                        "reason": .object([".tag": .string("too_many_requests")]), "retry_after": .number(7),
                    ]),
                ]), status: 429)
            reply.headers["Retry-After"] = "7"
            return reply
        }
        guard let token = Self.bearer(request), let record = state.accessTokens[token] else {
            return error("invalid_access_token", status: 401)
        }
        guard record.expiresAt > now(state) else { return error("expired_access_token", status: 401) }
        let person = state.people.first { $0.sub == record.grant.sub } ?? state.people[0]
        return Reply.json(answer(person, token, &state))
    }

    // MARK: Slack

    static let slackTeam: JSONValue = .object(["id": .string("T0SESAME01"), "name": .string("Sesame Emulator")])

    func slackRoute(_ request: LoopbackRequest, _ state: inout State) -> Reply? {
        switch (request.method, request.path) {
        case (.post, "/oauth/v2/authorize"): return decide(request, &state)
        case (.get, "/oauth/v2/authorize"):
            // Slack's scopes are comma-separated, bot scopes in `scope` and the user's in
            // `user_scope`; no response_type. The emulator's grant holds both, space-separated.
            var rewritten = request
            let scopes = [request["scope"], request["user_scope"]].compactMap { $0 }.joined(separator: ",")
            rewritten.parameters =
                request.parameters.filter { !["scope", "response_type"].contains($0.0) } + [
                    ("response_type", "code"),
                    ("scope", scopes.split(whereSeparator: { $0 == "," || $0 == " " }).joined(separator: " ")),
                    ("bot_scope", request["scope"] ?? ""),
                ]
            return authorize(rewritten, &state)
        case (.post, "/api/oauth.v2.access"): return slackAccess(request, &state)
        case (.post, "/api/auth.test"), (.get, "/api/auth.test"):
            return slackCall(request, &state) { person, _, _ in
                [
                    "url": .string("https://sesame-emulator.slack.com/"), "team": .string("Sesame Emulator"),
                    "user": .string(person.email.split(separator: "@").first.map(String.init) ?? person.sub),
                    "team_id": .string("T0SESAME01"), "user_id": .string("U" + person.sub),
                    "is_enterprise_install": .bool(false),
                ]
            }
        case (.post, "/api/auth.revoke"), (.get, "/api/auth.revoke"):
            return slackCall(request, &state) { _, token, state in
                _ = revokeGrant(of: token, &state)
                return ["revoked": .bool(true)]
            }
        default: return nil
        }
    }

    /// A Slack Web API answer: HTTP 200 with `"ok": false` and the error's name.
    static func slackError(_ error: String) -> Reply {
        Reply.json(.object(["ok": .bool(false), "error": .string(error)]))
    }

    /// `oauth.v2.access`: the code or refresh grant, answered as Slack does.
    func slackAccess(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        var rewritten = request
        let refreshing = request["grant_type"] == "refresh_token"
        if request["grant_type"] == nil { rewritten.parameters.append(("grant_type", "authorization_code")) }
        let parameters = Self.authorizationParameters(of: request, state)
        let reply = token(rewritten, &state)
        if reply.status == 429 {
            var limited = Self.slackError("ratelimited")
            limited.status = 429
            limited.headers["Retry-After"] = reply.headers["Retry-After"] ?? "7"
            return limited
        }
        guard reply.status == 200, let fields = reply.body.json?.objectValue,
            let access = fields["access_token"]?.stringValue, let grant = state.accessTokens[access]?.grant
        else {
            let error = reply.body.json?["error"]?.stringValue ?? ""
            let description = reply.body.json?["error_description"]?.stringValue ?? ""
            switch error {
            case "invalid_client":
                return Self.slackError(
                    description.contains("Unknown client") ? "invalid_client_id" : "bad_client_secret")
            case "invalid_grant" where description.contains("redirect_uri"): return Self.slackError("bad_redirect_uri")
            case "invalid_grant": return Self.slackError(refreshing ? "invalid_refresh_token" : "invalid_code")
            case "unsupported_grant_type": return Self.slackError("invalid_grant_type")
            case "server_error": return Self.slackError("internal_error")
            default: return Self.slackError("invalid_arguments")
            }
        }
        let commas = { (scope: String) in scope.split(separator: " ").joined(separator: ",") }
        var token: [String: JSONValue] = [
            "access_token": .string(access), "token_type": .string("user"), "scope": .string(commas(grant.scope)),
            "expires_in": fields["expires_in"] ?? .number(accessTokenLifetime),
        ]
        token["refresh_token"] = fields["refresh_token"]
        if refreshing {
            // A refresh answers the new pair at the top level.
            token["ok"] = .bool(true)
            token["app_id"] = .string("A0SESAME01")
            token["user_id"] = .string("U" + grant.sub)
            token["team"] = Self.slackTeam
            return Reply.json(.object(token))
        }
        token["id"] = .string("U" + grant.sub)
        var answer: [String: JSONValue] = [
            "ok": .bool(true), "app_id": .string("A0SESAME01"), "authed_user": .object(token), "team": Self.slackTeam,
            "enterprise": .null, "is_enterprise_install": .bool(false),
        ]
        if let bot = parameters["bot_scope"], !bot.isEmpty {
            // The bot's token, at the top level, for the bot scopes alone.
            var botGrant = grant
            botGrant.scope = bot.split(separator: ",").joined(separator: " ")
            let botAccess = "xoxb-" + ((try? Crypto.randomURLSafeString(byteCount: 24)) ?? UUID().uuidString)
            state.accessTokens[botAccess] = (botGrant, now(state).addingTimeInterval(accessTokenLifetime))
            answer["access_token"] = .string(botAccess)
            answer["token_type"] = .string("bot")
            answer["scope"] = .string(bot)
            answer["bot_user_id"] = .string("B0SESAMEBOT")
        }
        return Reply.json(.object(answer))
    }

    /// A Slack Web API call with a token: `not_authed`, `invalid_auth` or `token_expired` as
    /// `"ok": false` on HTTP 200.
    func slackCall(
        _ request: LoopbackRequest, _ state: inout State,
        _ answer: (Person, String, inout State) -> [String: JSONValue]
    ) -> Reply {
        guard let token = Self.bearer(request) else { return Self.slackError("not_authed") }
        guard let record = state.accessTokens[token] else { return Self.slackError("invalid_auth") }
        guard record.expiresAt > now(state) else { return Self.slackError("token_expired") }
        let person = state.people.first { $0.sub == record.grant.sub } ?? state.people[0]
        var fields = answer(person, token, &state)
        fields["ok"] = .bool(true)
        return Reply.json(.object(fields))
    }
}

import Foundation
import Sesame
import SesamePresets
import Testing

@testable import SesameEmulator
@testable import SesameOIDCEmulator

/// An emulator answering as a provider does, driven in this process through its engine (the same
/// answers as over HTTP, without a socket).
struct QuirkDriver: Sendable {
    let emulator: OIDCEmulator
    let root: String

    /// Runs `body` with a started emulator under `quirks`, and stops it afterwards, whatever happens.
    static func with(_ quirks: OIDCQuirks, _ body: (QuirkDriver) async throws -> Void) async throws {
        let emulator = try OIDCEmulator(quirks: quirks, algorithm: "ES256")
        let endpoints = try await emulator.start()
        do {
            try await body(QuirkDriver(emulator: emulator, root: endpoints.issuer))
        } catch {
            await emulator.stop()
            throw error
        }
        await emulator.stop()
    }

    func send(
        _ method: HTTPMethod, _ path: String, query: [(String, String)] = [], form: [(String, String)]? = nil,
        headers: HTTPHeaders = [:], body: Data = Data()
    ) async -> HTTPResponse {
        var headers = headers
        var data = body
        if let form {
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            data = Data(FormEncoding.encode(form).utf8)
        }
        return await emulator.engine.handle(method: method, path: path, query: query, headers: headers, body: data)
    }

    /// The code of a consent given at `path` with `query` as `user` (Alice when `nil`).
    func code(at path: String, _ query: [(String, String)], user: String? = nil) async throws -> String {
        let page = await send(.get, path, query: query)
        let html = String(decoding: page.body, as: UTF8.self)
        let range = try #require(html.range(of: "name=\"request\" value=\""), "consent page: \(html.prefix(300))")
        let id = String(html[range.upperBound...].prefix { $0 != "\"" })
        var form = [("request", id), ("action", "allow")]
        if let user { form.append(("user", user)) }
        let decision = await send(.post, "/authorize", form: form)
        let location = try #require(decision.headers["Location"], "the consent did not redirect: \(decision.status)")
        let items = URLComponents(string: location)?.queryItems ?? []
        return try #require(items.first { $0.name == "code" }?.value, "no code in \(location)")
    }

    /// The claims of the ID token in `answer`.
    static func idTokenClaims(_ answer: HTTPResponse) throws -> JSONValue {
        let token = try #require(answer.json?["id_token"]?.stringValue)
        let payload = try #require(token.split(separator: ".").dropFirst().first)
        return try #require(Base64URL.decode(String(payload)).flatMap { JSONValue(parsing: $0) })
    }
}

let loopbackRedirect = "http://127.0.0.1:8400/callback"
let verifier = "quirks-verifier-0123456789-0123456789-0123456789"

/// The authorization request's parameters at a provider with PKCE.
func authorization(scope: String, _ extra: [(String, String)] = []) -> [(String, String)] {
    [
        ("client_id", OIDCEmulator.defaultClientID), ("redirect_uri", loopbackRedirect), ("response_type", "code"),
        ("scope", scope), ("state", "s1"), ("code_challenge", PKCE.challenge(for: verifier)),
        ("code_challenge_method", "S256"),
    ] + extra
}

/// The code grant's form for `code`.
func codeGrant(_ code: String, secret: String? = nil) -> [(String, String)] {
    [
        ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", loopbackRedirect),
        ("client_id", OIDCEmulator.defaultClientID), ("code_verifier", verifier),
    ] + (secret.map { [("client_secret", $0)] } ?? [])
}

@Suite("The OpenID emulator's quirk profiles answer as each provider documents")
struct QuirksTests {
    static let googleSecret = OIDCQuirks.googleDesktopClientSecret

    @Test("google: the desktop client's public secret is required, and refresh tokens need access_type=offline")
    func googleOffline() async throws {
        try await QuirkDriver.with(.google) { google in
            let discovery = await google.send(.get, "/.well-known/openid-configuration")
            #expect(discovery.json?["authorization_endpoint"]?.stringValue == google.root + "/o/oauth2/v2/auth")
            #expect(discovery.json?["revocation_endpoint"]?.stringValue == google.root + "/revoke")
            #expect(
                discovery.json?["token_endpoint_auth_methods_supported"]?.arrayValue?.contains(.string("none")) == false
            )

            var code = try await google.code(at: "/o/oauth2/v2/auth", authorization(scope: "openid email"))
            let noSecret = await google.send(.post, "/token", form: codeGrant(code))
            #expect(noSecret.status == 400)
            #expect(noSecret.json?["error"]?.stringValue == "invalid_request")
            #expect(noSecret.json?["error_description"]?.stringValue == "client_secret is missing.")

            // Online access: an access token and an ID token, no refresh token.
            let online = await google.send(.post, "/token", form: codeGrant(code, secret: Self.googleSecret))
            #expect(online.status == 200)
            #expect(online.json?["refresh_token"] == nil)
            #expect(online.json?["id_token"] != nil)

            code = try await google.code(
                at: "/o/oauth2/v2/auth", authorization(scope: "openid email", [("access_type", "offline")]))
            let offline = await google.send(.post, "/token", form: codeGrant(code, secret: Self.googleSecret))
            let refresh = try #require(offline.json?["refresh_token"]?.stringValue)

            // A second offline login without prompt=consent gets none; with it, one again.
            code = try await google.code(
                at: "/o/oauth2/v2/auth", authorization(scope: "openid email", [("access_type", "offline")]))
            let again = await google.send(.post, "/token", form: codeGrant(code, secret: Self.googleSecret))
            #expect(again.status == 200)
            #expect(again.json?["refresh_token"] == nil)
            code = try await google.code(
                at: "/o/oauth2/v2/auth",
                authorization(scope: "openid email", [("access_type", "offline"), ("prompt", "consent")]))
            let consented = await google.send(.post, "/token", form: codeGrant(code, secret: Self.googleSecret))
            #expect(consented.json?["refresh_token"]?.stringValue != nil)

            // Refresh tokens do not rotate: the same one works twice, and no new one comes back.
            let form = [
                ("grant_type", "refresh_token"), ("refresh_token", refresh),
                ("client_id", OIDCEmulator.defaultClientID),
                ("client_secret", Self.googleSecret),
            ]
            for _ in 0..<2 {
                let renewed = await google.send(.post, "/token", form: form)
                #expect(renewed.status == 200)
                #expect(renewed.json?["access_token"] != nil)
                #expect(renewed.json?["refresh_token"] == nil)
            }
            // /revoke takes the token alone and ends its grant.
            #expect(await google.send(.post, "/revoke", form: [("token", refresh)]).status == 200)
            #expect(await google.send(.post, "/token", form: form).json?["error"]?.stringValue == "invalid_grant")
            let unknown = await google.send(.post, "/revoke", form: [("token", refresh)])
            #expect(unknown.status == 400)
            #expect(unknown.json?["error"]?.stringValue == "invalid_token")
        }
    }

    @Test(
        "microsoft: discovery's issuer per tenant segment",
        arguments: [
            ("common", "/{tenantid}/v2.0"), ("organizations", "/{tenantid}/v2.0"),
            ("consumers", "/\(OIDCQuirks.microsoftConsumerTenant)/v2.0"),
            (OIDCQuirks.microsoftWorkTenant, "/\(OIDCQuirks.microsoftWorkTenant)/v2.0"),
        ])
    func microsoftDiscovery(tenant: String, issuerPath: String) async throws {
        try await QuirkDriver.with(.microsoft) { microsoft in
            let document = await microsoft.send(.get, "/\(tenant)/v2.0/.well-known/openid-configuration")
            #expect(document.status == 200)
            #expect(document.json?["issuer"]?.stringValue == microsoft.root + issuerPath)
            #expect(
                document.json?["token_endpoint"]?.stringValue == microsoft.root + "/\(tenant)/oauth2/v2.0/token")
            #expect(document.json?["revocation_endpoint"] == nil)
            #expect(document.json?["authorization_response_iss_parameter_supported"] == nil)
        }
    }

    @Test("microsoft: tid and a per-tenant iss, offline_access for a refresh token, AADSTS error bodies")
    func microsoftTokens() async throws {
        try await QuirkDriver.with(.microsoft) { microsoft in
            let unknown = await microsoft.send(.get, "/fabrikam/v2.0/.well-known/openid-configuration")
            #expect(unknown.status == 400)
            #expect(unknown.json?["error_codes"] == .array([.number(90002)]))

            let path = "/common/oauth2/v2.0/authorize"
            var code = try await microsoft.code(at: path, authorization(scope: "openid profile"))
            let online = await microsoft.send(.post, "/common/oauth2/v2.0/token", form: codeGrant(code))
            #expect(online.status == 200)
            #expect(online.json?["refresh_token"] == nil)
            let claims = try QuirkDriver.idTokenClaims(online)
            #expect(claims["tid"]?.stringValue == OIDCQuirks.microsoftWorkTenant)
            #expect(claims["iss"]?.stringValue == microsoft.root + "/\(OIDCQuirks.microsoftWorkTenant)/v2.0")

            // A used code: invalid_grant, worded as Entra words it.
            let reused = await microsoft.send(.post, "/common/oauth2/v2.0/token", form: codeGrant(code))
            #expect(reused.status == 400)
            #expect(reused.json?["error"]?.stringValue == "invalid_grant")
            #expect(reused.json?["error_codes"] == .array([.number(70000)]))
            #expect(reused.json?["error_description"]?.stringValue?.hasPrefix("AADSTS70000: ") == true)
            #expect(reused.json?["trace_id"]?.stringValue != nil)
            #expect(reused.json?["correlation_id"]?.stringValue != nil)

            code = try await microsoft.code(
                at: path, authorization(scope: "openid offline_access"), user: "248289761002")
            let offline = await microsoft.send(.post, "/common/oauth2/v2.0/token", form: codeGrant(code))
            #expect(offline.json?["refresh_token"]?.stringValue != nil)
            #expect(try QuirkDriver.idTokenClaims(offline)["tid"]?.stringValue == OIDCQuirks.microsoftConsumerTenant)

            try await microsoft.emulator.activate(OIDCScenarioSetting(.wrongTenant))
            code = try await microsoft.code(at: path, authorization(scope: "openid"))
            let wrong = try QuirkDriver.idTokenClaims(
                await microsoft.send(.post, "/common/oauth2/v2.0/token", form: codeGrant(code)))
            #expect(wrong["iss"]?.stringValue == microsoft.root + "/\(OIDCQuirks.microsoftWorkTenant)/v2.0")
            #expect(wrong["tid"]?.stringValue != OIDCQuirks.microsoftWorkTenant)
        }
    }

    @Test("microsoft: a declined device login is authorization_declined with its AADSTS code")
    func microsoftDeviceDeclined() async throws {
        try await QuirkDriver.with(.microsoft) { microsoft in
            let started = await microsoft.send(
                .post, "/organizations/oauth2/v2.0/devicecode",
                form: [("client_id", OIDCEmulator.defaultClientID), ("scope", "openid offline_access")])
            let deviceCode = try #require(started.json?["device_code"]?.stringValue)
            let poll = [
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode),
                ("client_id", OIDCEmulator.defaultClientID),
            ]
            let pending = await microsoft.send(.post, "/organizations/oauth2/v2.0/token", form: poll)
            #expect(pending.json?["error"]?.stringValue == "authorization_pending")
            #expect(pending.json?["error_codes"] == .array([.number(70016)]))
            try await microsoft.emulator.denyDevice(userCode: try #require(started.json?["user_code"]?.stringValue))
            let declined = await microsoft.send(.post, "/organizations/oauth2/v2.0/token", form: poll)
            #expect(declined.json?["error"]?.stringValue == "authorization_declined")
        }
    }

    @Test("gitlab: Doorkeeper's paths, created_at, two-hour tokens, rotating refresh tokens")
    func gitlab() async throws {
        try await QuirkDriver.with(.gitlab) { gitlab in
            let discovery = await gitlab.send(.get, "/.well-known/openid-configuration")
            #expect(discovery.json?["token_endpoint"]?.stringValue == gitlab.root + "/oauth/token")
            #expect(
                discovery.json?["device_authorization_endpoint"]?.stringValue == gitlab.root + "/oauth/authorize_device"
            )
            let code = try await gitlab.code(at: "/oauth/authorize", authorization(scope: "openid read_user"))
            let answer = await gitlab.send(.post, "/oauth/token", form: codeGrant(code))
            #expect(answer.json?["created_at"]?.doubleValue != nil)
            #expect(answer.json?["expires_in"]?.doubleValue == 7200)
            let refresh = try #require(answer.json?["refresh_token"]?.stringValue)
            let form = [
                ("grant_type", "refresh_token"), ("refresh_token", refresh),
                ("client_id", OIDCEmulator.defaultClientID),
            ]
            let renewed = await gitlab.send(.post, "/oauth/token", form: form)
            #expect(renewed.json?["refresh_token"]?.stringValue.map { $0 != refresh } == true)
            #expect(await gitlab.send(.post, "/oauth/token", form: form).json?["error"]?.stringValue == "invalid_grant")
        }
    }

    @Test("dropbox: no discovery, offline refresh tokens that stay, .tag errors, get_current_account and revoke")
    func dropbox() async throws {
        try await QuirkDriver.with(.dropbox) { dropbox in
            #expect(await dropbox.send(.get, "/.well-known/openid-configuration").status == 404)
            var code = try await dropbox.code(at: "/oauth2/authorize", authorization(scope: "account_info.read"))
            let online = await dropbox.send(.post, "/oauth2/token", form: codeGrant(code))
            #expect(online.status == 200)
            #expect(online.json?["refresh_token"] == nil)
            #expect(online.json?["id_token"] == nil)
            #expect(online.json?["token_type"]?.stringValue == "bearer")
            #expect(online.json?["account_id"]?.stringValue == "dbid:248289761001")

            code = try await dropbox.code(
                at: "/oauth2/authorize", authorization(scope: "account_info.read", [("token_access_type", "offline")]))
            let offline = await dropbox.send(.post, "/oauth2/token", form: codeGrant(code))
            let refresh = try #require(offline.json?["refresh_token"]?.stringValue)
            let form = [
                ("grant_type", "refresh_token"), ("refresh_token", refresh),
                ("client_id", OIDCEmulator.defaultClientID),
            ]
            var access = ""
            for _ in 0..<2 {
                let renewed = await dropbox.send(.post, "/oauth2/token", form: form)
                #expect(renewed.json?["refresh_token"] == nil)
                access = try #require(renewed.json?["access_token"]?.stringValue)
            }

            let account = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer " + access])
            #expect(account.json?["account_id"]?.stringValue == "dbid:248289761001")
            #expect(account.json?["name"]?["display_name"]?.stringValue == "Alice Example")
            let formBody = await dropbox.send(
                .post, "/2/users/get_current_account", form: [("x", "y")],
                headers: ["Authorization": "Bearer " + access])
            #expect(formBody.status == 400)
            let invalid = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer nope"])
            #expect(invalid.status == 401)
            #expect(invalid.json?["error"]?[".tag"]?.stringValue == "invalid_access_token")
            #expect(invalid.json?["error_summary"]?.stringValue?.hasPrefix("invalid_access_token/") == true)

            try await dropbox.emulator.activate(OIDCScenarioSetting(.tooManyRequests, count: 1))
            let limited = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer " + access])
            #expect(limited.status == 429)
            #expect(limited.headers["Retry-After"] == "7")
            #expect(limited.json?["error"]?["reason"]?[".tag"]?.stringValue == "too_many_requests")

            await dropbox.emulator.advanceClock(by: 14_401)
            let expired = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer " + access])
            #expect(expired.json?["error"]?[".tag"]?.stringValue == "expired_access_token")

            // Revoking the access token ends its refresh token too.
            let fresh = try #require(
                await dropbox.send(.post, "/oauth2/token", form: form).json?["access_token"]?.stringValue)
            let revoked = await dropbox.send(
                .post, "/2/auth/token/revoke", headers: ["Authorization": "Bearer " + fresh])
            #expect(revoked.status == 200)
            #expect(String(decoding: revoked.body, as: UTF8.self) == "null")
            #expect(
                await dropbox.send(.post, "/oauth2/token", form: form).json?["error"]?.stringValue == "invalid_grant")
        }
    }

    @Test("slack: ok:false on HTTP 200, the user's token under authed_user, auth.test, rotation, auth.revoke")
    func slack() async throws {
        try await QuirkDriver.with(.slack) { slack in
            let secret = OIDCQuirks.slackClientSecret
            let bad = await slack.send(
                .post, "/api/oauth.v2.access",
                form: [("code", "nope"), ("client_id", OIDCEmulator.defaultClientID), ("client_secret", secret)])
            #expect(bad.status == 200)
            #expect(bad.json?["ok"] == .bool(false))
            #expect(bad.json?["error"]?.stringValue == "invalid_code")

            let query = [
                ("client_id", OIDCEmulator.defaultClientID), ("user_scope", "identify,chat:write"),
                ("redirect_uri", loopbackRedirect), ("state", "s1"),
            ]
            let code = try await slack.code(at: "/oauth/v2/authorize", query)
            let wrongSecret = await slack.send(
                .post, "/api/oauth.v2.access",
                form: [
                    ("code", code), ("redirect_uri", loopbackRedirect), ("client_id", OIDCEmulator.defaultClientID),
                    ("client_secret", "wrong"),
                ])
            #expect(wrongSecret.status == 200)
            #expect(wrongSecret.json?["error"]?.stringValue == "bad_client_secret")
            let code2 = try await slack.code(at: "/oauth/v2/authorize", query)
            let answer = await slack.send(
                .post, "/api/oauth.v2.access",
                form: [
                    ("code", code2), ("redirect_uri", loopbackRedirect), ("client_id", OIDCEmulator.defaultClientID),
                    ("client_secret", secret),
                ])
            #expect(answer.json?["ok"] == .bool(true))
            #expect(answer.json?["access_token"] == nil)
            let user = try #require(answer.json?["authed_user"])
            #expect(user["scope"]?.stringValue == "identify,chat:write")
            let access = try #require(user["access_token"]?.stringValue)
            let refresh = try #require(user["refresh_token"]?.stringValue)

            let test = await slack.send(.post, "/api/auth.test", headers: ["Authorization": "Bearer " + access])
            #expect(test.json?["ok"] == .bool(true))
            #expect(test.json?["user_id"]?.stringValue == "U248289761001")
            let invalid = await slack.send(.post, "/api/auth.test", headers: ["Authorization": "Bearer nope"])
            #expect(invalid.status == 200)
            #expect(invalid.json?["error"]?.stringValue == "invalid_auth")

            let form = [
                ("grant_type", "refresh_token"), ("refresh_token", refresh),
                ("client_id", OIDCEmulator.defaultClientID),
                ("client_secret", secret),
            ]
            let renewed = await slack.send(.post, "/api/oauth.v2.access", form: form)
            #expect(renewed.json?["ok"] == .bool(true))
            let newAccess = try #require(renewed.json?["access_token"]?.stringValue)
            #expect(renewed.json?["refresh_token"]?.stringValue.map { $0 != refresh } == true)
            let revoked = await slack.send(.post, "/api/auth.revoke", headers: ["Authorization": "Bearer " + newAccess])
            #expect(revoked.json?["revoked"] == .bool(true))
            let after = await slack.send(.post, "/api/auth.test", headers: ["Authorization": "Bearer " + newAccess])
            #expect(after.json?["error"]?.stringValue == "invalid_auth")
            let reused = await slack.send(.post, "/api/oauth.v2.access", form: form)
            #expect(reused.status == 200)
            #expect(reused.json?["error"]?.stringValue == "invalid_refresh_token")
        }
    }
}

@Suite("The Dropbox and Slack descriptions read what their providers' emulators answer")
struct PresetDescriptionTests {
    @Test("dropbox: the error code is the nested .tag, a 429's reason too; the account id is read from the identity")
    func dropbox() async throws {
        let described = OAuth2Description.dropbox
        #expect(described.identity.method == .post)
        #expect(!described.refreshTokensRotate)
        #expect(described.authorizationParameters.contains { $0 == ("token_access_type", "offline") })
        #expect(described.supportedLoginFlows == [.browser])
        try await QuirkDriver.with(.dropbox) { dropbox in
            let invalid = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer nope"])
            #expect(described.errors.code(in: invalid.json) == "invalid_access_token")
            let taxonomy = OAuth2ErrorTaxonomy(described)
            #expect(taxonomy.classify(invalid).category == .authenticationReopenSession)
            try await dropbox.emulator.activate(OIDCScenarioSetting(.tooManyRequests, count: 1))
            let limited = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer nope"])
            #expect(described.errors.code(in: limited.json) == "too_many_requests")
            #expect(taxonomy.classify(limited).category == .throttling)
            #expect(taxonomy.classify(limited).retryAfter != nil)
            let token = await dropbox.send(
                .post, "/oauth2/token",
                form: [
                    ("grant_type", "refresh_token"), ("refresh_token", "nope"),
                    ("client_id", OIDCEmulator.defaultClientID),
                ])
            #expect(described.errors.code(in: token.json) == "invalid_grant")

            let code = try await dropbox.code(at: "/oauth2/authorize", authorization(scope: "account_info.read"))
            let access = try #require(
                await dropbox.send(.post, "/oauth2/token", form: codeGrant(code)).json?["access_token"]?.stringValue)
            let account = await dropbox.send(
                .post, "/2/users/get_current_account", headers: ["Authorization": "Bearer " + access])
            #expect(account.json?[path: described.identity.id]?.stringValue == "dbid:248289761001")
        }
    }

    @Test("slack: ok:false on HTTP 200 is a failure with its error; the person's token and id are where it says")
    func slack() async throws {
        let described = OAuth2Description.slack
        #expect(described.tokenAnswerPath == ["authed_user"])
        #expect(described.scopeParameter == "user_scope")
        try await QuirkDriver.with(.slack) { slack in
            let bad = await slack.send(.post, "/api/oauth.v2.access", form: [("code", "nope")])
            #expect(bad.status == 200)
            #expect(described.errors.isFailure(bad.json))
            #expect(described.errors.code(in: bad.json) == "invalid_client_id")
            let taxonomy = OAuth2ErrorTaxonomy(described)
            #expect(taxonomy.classify(bad).category == .invalid)
            let refused = await slack.send(.get, "/api/auth.test", headers: ["Authorization": "Bearer nope"])
            #expect(refused.status == 200)
            #expect(taxonomy.classify(refused).category == .authenticationReopenSession)
            let query = [
                ("client_id", OIDCEmulator.defaultClientID), ("user_scope", "identify"),
                ("redirect_uri", loopbackRedirect), ("state", "s1"),
            ]
            let code = try await slack.code(at: "/oauth/v2/authorize", query)
            let answer = await slack.send(
                .post, "/api/oauth.v2.access",
                form: [
                    ("code", code), ("redirect_uri", loopbackRedirect), ("client_id", OIDCEmulator.defaultClientID),
                    ("client_secret", OIDCQuirks.slackClientSecret),
                ])
            #expect(!described.errors.isFailure(answer.json))
            let access = try #require(answer.json?[path: described.tokenAnswerPath + ["access_token"]]?.stringValue)
            let test = await slack.send(.get, "/api/auth.test", headers: ["Authorization": "Bearer " + access])
            #expect(test.json?[path: described.identity.id]?.stringValue == "U248289761001")
        }
    }
}

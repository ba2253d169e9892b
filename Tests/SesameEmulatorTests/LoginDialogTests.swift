import Foundation
import Sesame
import SesameFacebookEmulator
import Testing

@Suite("Login dialog and the token endpoint")
struct LoginDialogTests {
    static let redirect = "http://127.0.0.1:53682/callback"

    func dialogQuery(
        _ h: Harness, scope: String = "email,user_friends,publish_actions", state: String = "st4te", pkce: PKCE? = nil,
        extra: [(String, String)] = []
    ) -> [(String, String)] {
        var query = [
            ("client_id", h.app.id), ("redirect_uri", Self.redirect), ("state", state), ("response_type", "code"),
            ("scope", scope),
        ]
        if let pkce { query += [("code_challenge", pkce.challenge), ("code_challenge_method", "S256")] }
        return query + extra
    }

    /// The hidden `request_id` of a consent page.
    func requestID(in html: String) throws -> String {
        let marker = "name=\"request_id\" value=\""
        let start = try #require(html.range(of: marker))
        let rest = html[start.upperBound...]
        return String(rest[..<rest.firstIndex(of: "\"")!])
    }

    @Test("the consent page names the app and has a checkbox per permission, Continue and Cancel")
    func consentPage() async throws {
        try await Harness.with { h in
            let page = try await h.get("/v19.0/dialog/oauth", dialogQuery(h))
            #expect(page.status == 200)
            #expect(page.headers["Content-Type"]?.hasPrefix("text/html") == true)
            let html = page.text
            #expect(html.contains("Log in to Sesame Emulator App with Facebook"))
            for name in ["email", "user_friends", "publish_actions"] {
                #expect(html.contains("name=\"permission\" value=\"\(name)\" checked"), "\(name)")
            }
            #expect(html.contains("value=\"continue\">Continue</button>"))
            #expect(html.contains("value=\"cancel\">Cancel</button>"))
        }
    }

    @Test("everything on the page is escaped")
    func escaping() async throws {
        try await Harness.with({
            $0.apps = [EmulatedApp(id: "42", name: "<b>Evil & Co</b>", secret: "s", clientToken: "c")]
        }) {
            h in
            let page = try await h.get(
                "/dialog/oauth",
                [("client_id", "42"), ("redirect_uri", Self.redirect), ("state", "\"><script>alert(1)</script>")])
            #expect(!page.text.contains("<script>alert"))
            #expect(!page.text.contains("<b>Evil"))
            #expect(page.text.contains("&lt;b&gt;Evil &amp; Co&lt;/b&gt;"))
        }
    }

    @Test("config_id asks for the configuration's permissions instead of scope; debug_token lists their objects")
    func businessConfiguration() async throws {
        try await Harness.with { h in
            let pkce = try PKCE.generate()
            let page = try await h.get(
                "/v27.0/dialog/oauth",
                dialogQuery(h, scope: "user_friends", pkce: pkce, extra: [("config_id", "800000000000001")]))
            #expect(page.text.contains("pages_show_list") && page.text.contains("business_management"))
            #expect(!page.text.contains("user_friends"), "the configuration replaces scope")
            let id = try requestID(in: page.text)
            let submit = try await h.post(
                "/v27.0/dialog/oauth/confirm", nil,
                [
                    ("request_id", id), ("user", h.userID), ("permission", "public_profile"), ("permission", "email"),
                    ("permission", "pages_show_list"), ("permission", "business_management"), ("action", "continue"),
                ])
            let location = try #require(submit.location)
            let code = try #require(parameters(of: location)["code"])
            let exchange = try await h.get(
                "/v27.0/oauth/access_token",
                [
                    ("client_id", h.app.id), ("redirect_uri", Self.redirect), ("code_verifier", pkce.verifier),
                    ("code", code),
                ])
            let token = try #require(exchange.json?["access_token"]?.stringValue)
            let debug = try await h.get("/v27.0/debug_token", token: token, [("input_token", token)])
            #expect(
                debug.json?["data"]?["granular_scopes"]
                    == .array([
                        .object([
                            "scope": .string("pages_show_list"),
                            "target_ids": .array([.string("200000000000001"), .string("200000000000002")]),
                        ]),
                        .object([
                            "scope": .string("business_management"), "target_ids": .array([.string("300000000000001")]),
                        ]),
                    ]), "\(debug.text)")
            let unknown = try await h.get("/v27.0/dialog/oauth", dialogQuery(h, extra: [("config_id", "999")]))
            #expect(unknown.text.contains("999") && unknown.text.contains("does not exist"), "\(unknown.text)")
        }
    }

    @Test("approving some and declining some on the form, then the PKCE exchange, gives a token with those grants")
    func formApproveSomeDeclineSome() async throws {
        try await Harness.with { h in
            let pkce = try PKCE.generate()
            let page = try await h.get("/v19.0/dialog/oauth", dialogQuery(h, pkce: pkce))
            let id = try requestID(in: page.text)
            // The person unchecks user_friends.
            let submit = try await h.post(
                "/v19.0/dialog/oauth/confirm", nil,
                [
                    ("request_id", id), ("user", h.userID), ("permission", "public_profile"), ("permission", "email"),
                    ("permission", "publish_actions"), ("action", "continue"),
                ])
            #expect(submit.status == 302)
            let location = try #require(submit.location)
            #expect(location.absoluteString.hasPrefix(Self.redirect + "?"))
            let back = parameters(of: location)
            #expect(back["state"] == "st4te")
            let code = try #require(back["code"])

            let exchange = try await h.get(
                "/v19.0/oauth/access_token",
                [
                    ("client_id", h.app.id), ("redirect_uri", Self.redirect), ("code_verifier", pkce.verifier),
                    ("code", code),
                ])
            #expect(exchange.status == 200)
            let token = try #require(exchange.json?["access_token"]?.stringValue)
            #expect(exchange.json?["token_type"] == .string("bearer"))
            #expect((exchange.json?["expires_in"]?.lenientInt ?? 0) > 3000)

            let permissions = try await h.get("/me/permissions", token: token)
            let table = Dictionary(
                uniqueKeysWithValues: (permissions.json?["data"]?.arrayValue ?? []).compactMap { entry in
                    entry["permission"]?.stringValue.map { ($0, entry["status"]?.stringValue ?? "") }
                })
            #expect(
                table == [
                    "public_profile": "granted", "email": "granted", "publish_actions": "granted",
                    "user_friends": "declined",
                ])
        }
    }

    @Test("a reused code is 100/36009; a wrong verifier and a wrong redirect_uri are refused")
    func codeChecks() async throws {
        try await Harness.with { h in
            let pkce = try PKCE.generate()
            func freshCode() async throws -> String {
                let location = try await h.emulator.approveDialog(
                    url: h.url("/v19.0/dialog/oauth", dialogQuery(h, pkce: pkce)))
                return try #require(parameters(of: location)["code"])
            }
            let code = try await freshCode()
            let exchange: [(String, String)] = [
                ("client_id", h.app.id), ("redirect_uri", Self.redirect), ("code_verifier", pkce.verifier),
                ("code", code),
            ]
            #expect(try await h.post("/oauth/access_token", token: nil, exchange).status == 200)
            let again = try await h.post("/oauth/access_token", token: nil, exchange)
            #expect(again.status == 400)
            #expect(again.code == 100)
            #expect(again.subcode == 36009)

            let wrongVerifier = try await h.post(
                "/oauth/access_token", nil,
                [
                    ("client_id", h.app.id), ("redirect_uri", Self.redirect),
                    ("code_verifier", try PKCE.generate().verifier), ("code", try await freshCode()),
                ])
            #expect(wrongVerifier.code == 100)
            #expect(wrongVerifier.error?["message"]?.stringValue?.contains("code_verifier") == true)

            let wrongRedirect = try await h.post(
                "/oauth/access_token", nil,
                [
                    ("client_id", h.app.id), ("redirect_uri", "http://127.0.0.1:1/other"),
                    ("code_verifier", pkce.verifier), ("code", try await freshCode()),
                ])
            #expect(wrongRedirect.subcode == 36008)

            let noVerifier = try await h.post(
                "/oauth/access_token", nil,
                [("client_id", h.app.id), ("redirect_uri", Self.redirect), ("code", try await freshCode())])
            #expect(noVerifier.code == 100)

            let wrongCode = try await h.post(
                "/oauth/access_token", nil,
                [("client_id", h.app.id), ("redirect_uri", Self.redirect), ("code", "made-up")])
            #expect(wrongCode.code == 100)
            #expect(wrongCode.status == 400)
        }
    }

    @Test("a code expires after ten minutes (100/36007)")
    func codeExpiry() async throws {
        try await Harness.with { h in
            let location = try await h.emulator.approveDialog(url: h.url("/dialog/oauth", dialogQuery(h)))
            let code = try #require(parameters(of: location)["code"])
            await h.emulator.advanceClock(by: 601)
            let reply = try await h.post(
                "/oauth/access_token", nil,
                [
                    ("client_id", h.app.id), ("client_secret", h.app.secret), ("redirect_uri", Self.redirect),
                    ("code", code),
                ])
            #expect(reply.subcode == 36007)
        }
    }

    @Test("Cancel redirects with Facebook's access_denied parameters")
    func cancel() async throws {
        try await Harness.with { h in
            let page = try await h.get("/dialog/oauth", dialogQuery(h))
            let submit = try await h.post(
                "/dialog/oauth/confirm", nil, [("request_id", try requestID(in: page.text)), ("action", "cancel")])
            #expect(submit.status == 302)
            let location = try #require(submit.headers["Location"])
            #expect(
                location
                    == Self.redirect
                    + "?error=access_denied&error_code=200&error_description=Permissions+error&error_reason=user_denied&state=st4te"
            )
        }
    }

    @Test("declined permissions are not asked again, except with auth_type=rerequest")
    func rerequest() async throws {
        try await Harness.with { h in
            _ = try await h.emulator.approveDialog(
                url: h.url("/dialog/oauth", dialogQuery(h, scope: "email,user_friends")), decline: ["user_friends"])
            let again = try await h.get("/dialog/oauth", dialogQuery(h, scope: "email,user_friends"))
            #expect(!again.text.contains("value=\"user_friends\""))
            #expect(!again.text.contains("value=\"email\" checked"))
            #expect(again.text.contains("already given"))

            let rerequest = try await h.get(
                "/dialog/oauth", dialogQuery(h, scope: "email,user_friends", extra: [("auth_type", "rerequest")]))
            #expect(rerequest.text.contains("name=\"permission\" value=\"user_friends\" checked"))
            #expect(!rerequest.text.contains("value=\"email\" checked"))
        }
    }

    @Test("a bad client_id, a redirect_uri that is not allowed and an unknown permission get an error page")
    func dialogErrors() async throws {
        try await Harness.with { h in
            let badApp = try await h.get("/dialog/oauth", [("client_id", "999"), ("redirect_uri", Self.redirect)])
            #expect(badApp.status == 400)
            #expect(badApp.text.contains("Invalid App ID"))
            let blocked = try await h.get(
                "/dialog/oauth", [("client_id", h.app.id), ("redirect_uri", "https://evil.example/cb")])
            #expect(blocked.status == 400)
            #expect(blocked.text.contains("URL Blocked"))
            let scopes = try await h.get("/dialog/oauth", dialogQuery(h, scope: "email,read_minds"))
            #expect(scopes.text.contains("Invalid Scopes: read_minds"))
        }
    }

    @Test("a malformed PKCE challenge or method is refused with an invalid_request redirect")
    func badChallenge() async throws {
        try await Harness.with { h in
            let reply = try await h.get(
                "/dialog/oauth",
                dialogQuery(h, extra: [("code_challenge", "short"), ("code_challenge_method", "S256")]))
            #expect(reply.status == 302)
            #expect(reply.location.map { parameters(of: $0)["error"] } == "invalid_request")
            let method = try await h.get(
                "/dialog/oauth",
                dialogQuery(
                    h, extra: [("code_challenge", try PKCE.generate().challenge), ("code_challenge_method", "S512")]))
            #expect(method.location.map { parameters(of: $0)["error"] } == "invalid_request")
        }
    }

    @Test("response_type=token puts the token in the fragment, with granted_scopes when asked")
    func implicitToken() async throws {
        try await Harness.with { h in
            var query = dialogQuery(h, scope: "email")
            query.removeAll { $0.0 == "response_type" }
            query.append(("response_type", "token,granted_scopes"))
            let location = try await h.emulator.approveDialog(url: h.url("/dialog/oauth", query))
            let fragment = parameters(of: location, fragment: true)
            let token = try #require(fragment["access_token"])
            #expect(fragment["granted_scopes"] == "public_profile,email")
            #expect(fragment["state"] == "st4te")
            #expect(fragment["data_access_expiration_time"] != nil)
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }

    @Test("the admin API answers a pending dialog by request_id, by state, or from its URL")
    func adminDialog() async throws {
        try await Harness.with { h in
            _ = try await h.get("/dialog/oauth", dialogQuery(h, state: "by-state"))
            let list = try await h.admin(.get, "dialogs")
            let pending = try #require(list.json?["data"]?.arrayValue?.first)
            #expect(pending["state"] == .string("by-state"))

            let byState = try await h.admin(
                .post, "dialog/approve",
                .object([
                    "state": .string("by-state"), "user": .string(h.userID), "decline": .array([.string("email")]),
                ]))
            #expect(byState.status == 200)
            let redirect = try #require(byState.json?["redirect"]?.stringValue.flatMap(URL.init(string:)))
            #expect(parameters(of: redirect)["code"] != nil)

            _ = try await h.get("/dialog/oauth", dialogQuery(h, state: "by-id"))
            let id = try #require(try await h.admin(.get, "dialogs").json?["data"]?[0]?["request_id"]?.stringValue)
            let denied = try await h.admin(.post, "dialog/deny", .object(["request_id": .string(id)]))
            let deniedURL = try #require(denied.json?["redirect"]?.stringValue.flatMap(URL.init(string:)))
            #expect(parameters(of: deniedURL)["error_reason"] == "user_denied")

            let byURL = try await h.admin(
                .post, "dialog/approve",
                .object(["url": .string(h.url("/v19.0/dialog/oauth", dialogQuery(h, state: "by-url")).absoluteString)]))
            #expect(byURL.json?["redirect"]?.stringValue?.contains("state=by-url") == true)

            let missing = try await h.admin(.post, "dialog/approve", .object(["request_id": .string("nope")]))
            #expect(missing.status == 404)
        }
    }

    @Test("fb_exchange_token gives a long-lived token; it needs the right secret")
    func longLived() async throws {
        try await Harness.with { h in
            let short = try await h.token()
            let reply = try await h.get(
                "/oauth/access_token",
                [
                    ("grant_type", "fb_exchange_token"), ("client_id", h.app.id), ("client_secret", h.app.secret),
                    ("fb_exchange_token", short),
                ])
            let long = try #require(reply.json?["access_token"]?.stringValue)
            #expect(long != short)
            #expect((reply.json?["expires_in"]?.lenientInt ?? 0) > 5_000_000)
            #expect(try await h.get("/me", token: long).status == 200)

            let wrong = try await h.get(
                "/oauth/access_token",
                [
                    ("grant_type", "fb_exchange_token"), ("client_id", h.app.id), ("client_secret", "wrong"),
                    ("fb_exchange_token", short),
                ])
            #expect(wrong.code == 1)
            let unknownApp = try await h.get(
                "/oauth/access_token", [("grant_type", "fb_exchange_token"), ("client_id", "7")])
            #expect(unknownApp.code == 101)
            let noApp = try await h.get("/oauth/access_token", [("grant_type", "fb_exchange_token")])
            #expect(noApp.code == 101)
        }
    }

    @Test("an expired token cannot be exchanged: 190/463")
    func expiredExchange() async throws {
        try await Harness.with { h in
            let short = try await h.token()
            await h.emulator.advanceClock(by: 3 * 3600)
            let me = try await h.get("/me", token: short)
            #expect(me.code == 190)
            #expect(me.subcode == 463)
            let reply = try await h.get(
                "/oauth/access_token",
                [
                    ("grant_type", "fb_exchange_token"), ("client_id", h.app.id), ("client_secret", h.app.secret),
                    ("fb_exchange_token", short),
                ])
            #expect(reply.subcode == 463)
        }
    }

    @Test("client_credentials gives an app token that works on app-only endpoints")
    func clientCredentials() async throws {
        try await Harness.with { h in
            let reply = try await h.post(
                "/oauth/access_token", nil,
                [("grant_type", "client_credentials"), ("client_id", h.app.id), ("client_secret", h.app.secret)])
            let token = try #require(reply.json?["access_token"]?.stringValue)
            #expect(token.hasPrefix(h.app.id + "|"))
            let users = try await h.get("/\(h.app.id)/accounts/test-users", token: token)
            #expect(users.status == 200)
        }
    }

    @Test("fb_extend_sso_token extends a user token and reports expires_at")
    func extend() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            let reply = try await h.get(
                "/oauth/access_token", token: token, [("grant_type", "fb_extend_sso_token"), ("client_id", h.app.id)])
            #expect(reply.json?["access_token"] == .string(token))
            #expect((reply.json?["expires_at"]?.lenientInt ?? 0) > Int(Date().timeIntervalSince1970) + 5_000_000)
            #expect(reply.json?["data_access_expiration_time"]?.lenientInt != nil)
        }
    }
}

import Foundation
import Sesame
import SesameEmulator
import SesameFacebookEmulator
import Testing

@Suite("Graph API: me, permissions, debug_token, errors")
struct GraphAPITests {
    @Test(
        "GET /me answers id and name by default, under any version prefix",
        arguments: ["", "/v2.0", "/v19.0", "/v24.0"])
    func meDefaultFields(prefix: String) async throws {
        try await Harness.with { h in
            let token = try await h.token()
            let reply = try await h.get("\(prefix)/me", token: token)
            #expect(reply.status == 200)
            #expect(reply.json == .object(["id": .string(h.userID), "name": .string("Sam Sesame")]))
            #expect(reply.headers["Content-Type"]?.hasPrefix("application/json") == true)
        }
    }

    @Test("fields are honoured, and email only with the email permission")
    func meFields() async throws {
        try await Harness.with { h in
            let without = try await h.token()
            let a = try await h.get("/me", token: without, [("fields", "id,first_name,last_name,email,picture{url}")])
            #expect(a.json?["first_name"] == .string("Sam"))
            #expect(a.json?["last_name"] == .string("Sesame"))
            #expect(a.json?["email"] == nil)
            #expect(a.json?["picture"]?["data"]?["url"]?.stringValue?.hasSuffix("/\(h.userID)/picture") == true)

            let with = try await h.token(["email"])
            let b = try await h.get("/me", token: with, [("fields", "email,permissions")])
            #expect(b.json?["email"] == .string("sam.sesame@example.com"))
            let statuses = b.json?["permissions"]?["data"]?.arrayValue?.compactMap { $0["permission"]?.stringValue }
            #expect(statuses?.contains("email") == true)
        }
    }

    @Test("an unknown field is error 100 naming it")
    func unknownField() async throws {
        try await Harness.with { h in
            let reply = try await h.get("/me", token: try await h.token(), [("fields", "id,shoe_size")])
            #expect(reply.status == 400)
            #expect(reply.code == 100)
            #expect(reply.error?["message"]?.stringValue?.contains("shoe_size") == true)
        }
    }

    @Test("the token may come in an Authorization header, Bearer or OAuth", arguments: ["Bearer", "OAuth"])
    func authorizationHeader(scheme: String) async throws {
        try await Harness.with { h in
            let token = try await h.token()
            let reply = try await h.send(.get, "/me", headers: ["Authorization": "\(scheme) \(token)"])
            #expect(reply.status == 200)
            #expect(reply.json?["id"] == .string(h.userID))
        }
    }

    @Test("no token on /me is 2500, elsewhere 104; an unknown token is 190 with WWW-Authenticate")
    func tokenErrors() async throws {
        try await Harness.with { h in
            let me = try await h.get("/me")
            #expect(me.status == 400)
            #expect(me.code == 2500)
            let app = try await h.get("/\(h.app.id)")
            #expect(app.code == 104)
            let bogus = try await h.get("/me", token: "EAAnotatoken")
            #expect(bogus.status == 400)
            #expect(bogus.code == 190)
            #expect(bogus.error?["type"] == .string("OAuthException"))
            #expect(
                bogus.headers["WWW-Authenticate"]?.hasPrefix("OAuth \"Facebook Platform\" \"invalid_token\"") == true)
            let appOnMe = try await h.get("/me", token: h.appToken)
            #expect(appOnMe.code == 2500)
        }
    }

    @Test("every error has Facebook's envelope: message, type, code, fbtrace_id, is_transient")
    func envelope() async throws {
        try await Harness.with { h in
            let reply = try await h.get("/me", token: "nope")
            let error = try #require(reply.error?.objectValue)
            #expect(Set(error.keys).isSuperset(of: ["message", "type", "code", "fbtrace_id", "is_transient"]))
            #expect(error["is_transient"] == .bool(false))
            #expect(error["fbtrace_id"]?.stringValue?.isEmpty == false)
            #expect(reply.headers["x-fb-trace-id"] == error["fbtrace_id"]?.stringValue)
        }
    }

    @Test("every Graph answer carries X-App-Usage with call_count, total_cputime and total_time")
    func usageHeader() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            for path in ["/me", "/me/permissions", "/nothing-here", "/debug_token"] {
                let reply = try await h.get(path, token: token)
                let usage = try #require(reply.headers["X-App-Usage"].flatMap { JSONValue(parsing: Data($0.utf8)) })
                #expect(usage["call_count"]?.lenientInt != nil, "\(path)")
                #expect(usage["total_cputime"]?.lenientInt != nil, "\(path)")
                #expect(usage["total_time"]?.lenientInt != nil, "\(path)")
            }
            // The call count grows with calls: 200 calls per person per hour is the allowance.
            let before = try await h.get("/me", token: token).headers["X-App-Usage"]
            for _ in 0..<4 { _ = try await h.get("/me", token: token) }
            let after = try await h.get("/me", token: token).headers["X-App-Usage"]
            let count = { (text: String?) in
                JSONValue(parsing: Data((text ?? "").utf8))?["call_count"]?.lenientInt ?? -1
            }
            #expect(count(after) > count(before))
        }
    }

    @Test("GET /me/permissions lists granted and declined; GET of one name filters")
    func permissions() async throws {
        try await Harness.with { h in
            let token = try await h.emulator.issueToken(permissions: ["email"], declined: ["user_friends"])
            let reply = try await h.get("/me/permissions", token: token)
            #expect(
                reply.json?["data"]
                    == .array([
                        .object(["permission": .string("public_profile"), "status": .string("granted")]),
                        .object(["permission": .string("email"), "status": .string("granted")]),
                        .object(["permission": .string("user_friends"), "status": .string("declined")]),
                    ]))
            let one = try await h.get("/me/permissions/email", token: token)
            #expect(one.json?["data"]?.arrayValue?.count == 1)
        }
    }

    @Test("DELETE /me/permissions/{name} declines it; DELETE /me/permissions removes the app (then 190/458)")
    func revoke() async throws {
        try await Harness.with { h in
            let token = try await h.token(["email", "user_friends"])
            let one = try await h.delete("/me/permissions/email", token: token)
            #expect(one.json == .object(["success": .bool(true)]))
            let after = try await h.get("/me/permissions/email", token: token)
            #expect(after.json?["data"]?[0]?["status"] == .string("declined"))

            let all = try await h.delete("/me/permissions", token: token)
            #expect(all.json == .object(["success": .bool(true)]))
            let gone = try await h.get("/me", token: token)
            #expect(gone.status == 400)
            #expect(gone.code == 190)
            #expect(gone.subcode == 458)
            // A new login works again.
            let fresh = try await h.token()
            #expect(try await h.get("/me", token: fresh).status == 200)
        }
    }

    @Test("public_profile cannot be revoked on its own")
    func revokePublicProfile() async throws {
        try await Harness.with { h in
            let reply = try await h.delete("/me/permissions/public_profile", token: try await h.token())
            #expect(reply.code == 100)
        }
    }

    @Test("debug_token describes a valid user token, an app token, an invalid token and a revoked one")
    func debugToken() async throws {
        try await Harness.with { h in
            let token = try await h.emulator.issueToken(permissions: ["email"], longLived: true)
            let valid = try await h.get("/debug_token", token: h.appToken, [("input_token", token)])
            let data = try #require(valid.json?["data"])
            #expect(data["is_valid"] == .bool(true))
            #expect(data["app_id"] == .string(h.app.id))
            #expect(data["type"] == .string("USER"))
            #expect(data["user_id"] == .string(h.userID))
            #expect(data["scopes"] == .array([.string("public_profile"), .string("email")]))
            #expect(data["issued_at"]?.lenientInt != nil)
            #expect((data["expires_at"]?.lenientInt ?? 0) > Int(Date().timeIntervalSince1970))
            #expect(data["data_access_expires_at"]?.lenientInt != nil)

            let app = try await h.get("/debug_token", token: h.appToken, [("input_token", h.appToken)])
            #expect(app.json?["data"]?["type"] == .string("APP"))

            let garbage = try await h.get("/debug_token", token: h.appToken, [("input_token", "garbage")])
            #expect(garbage.status == 200)
            #expect(garbage.json?["data"]?["is_valid"] == .bool(false))
            #expect(garbage.json?["data"]?["error"]?["code"] == .int(190))

            _ = try await h.delete("/me/permissions", token: token)
            let revoked = try await h.get("/debug_token", token: h.appToken, [("input_token", token)])
            #expect(revoked.json?["data"]?["is_valid"] == .bool(false))
            #expect(revoked.json?["data"]?["error"]?["subcode"] == .int(458))

            let missing = try await h.get("/debug_token", token: h.appToken)
            #expect(missing.code == 100)
        }
    }

    @Test("the app node, an unknown object (100/33) and an unknown edge (2500)")
    func nodes() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            let app = try await h.get("/app", token: token)
            #expect(app.json == .object(["id": .string(h.app.id), "name": .string(h.app.name)]))
            let unknown = try await h.get("/123456789", token: token)
            #expect(unknown.code == 100)
            #expect(unknown.subcode == 33)
            #expect(unknown.error?["type"] == .string("GraphMethodException"))
            let edge = try await h.get("/me/photos", token: token)
            #expect(edge.code == 2500)
            #expect(edge.error?["message"] == .string("Unknown path components: /photos"))
        }
    }

    @Test("method=delete overrides a GET, as old SDKs send it, only for an app the legacy-forms scenario marks old")
    func methodOverride() async throws {
        try await Harness.with({ $0.scenarios = [ScenarioSetting(.legacyForms)] }) { h in
            let token = try await h.token(["email"])
            let reply = try await h.get("/me/permissions/email", token: token, [("method", "delete")])
            #expect(reply.json == .object(["success": .bool(true)]))
        }
    }

    @Test(
        "legacy request forms are refused with (#12) by default, as Graph refuses them to new apps",
        arguments: [
            ("GET", "/me/permissions/email", [("method", "delete")]), ("POST", "/debug_token", [("method", "get")]),
            ("GET", "/", [("ids", "me")]), ("GET", "/me", [("date_format", "U")]),
            ("GET", "/me", [("callback", "cb")]), ("GET", "/me", [("fields", "id,name.as(full_name)")]),
            ("POST", "/act_1/async_batch_requests", [("name", "x")]),
        ])
    func legacyFormsRefused(method: String, path: String, parameters: [(String, String)]) async throws {
        try await Harness.with { h in
            let token = try await h.token(["email"])
            let reply =
                method == "GET"
                ? try await h.get(path, token: token, parameters) : try await h.post(path, token: token, parameters)
            #expect(reply.status == 400 && reply.code == 12, "\(reply.text)")
            #expect(reply.error?["message"]?.stringValue?.contains("deprecated") == true)
            let permissions = try await h.get("/me/permissions", token: token)
            #expect(permissions.json?["data"]?.arrayValue?.isEmpty == false, "nothing was done")
        }
    }

    @Test("a JSON body is read like a form")
    func jsonBody() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            let reply = try await h.send(
                .post, "/me/feed", json: .object(["access_token": .string(token), "message": .string("from JSON")]))
            #expect(reply.status == 200)
            #expect(reply.json?["id"]?.stringValue?.hasPrefix(h.userID + "_") == true)
        }
    }

    @Test(
        "malformed input gets a Graph error, never a crash",
        arguments: [
            (HTTPMethod.put, "/me", ""),
            (HTTPMethod.get, "/me?fields=id{name", ""),
            (HTTPMethod.get, "/me?fields=id)", ""),
            (HTTPMethod.post, "/me/feed", "{not json"),
            (HTTPMethod.get, "/" + String(repeating: "a", count: 5000), ""),
            (HTTPMethod.post, "/", "batch=%5B"),
            (HTTPMethod.get, "/me/feed?limit=-3", ""),
            (HTTPMethod.get, "/me/feed?after=%%%", ""),
            (HTTPMethod.post, "/oauth/access_token", "client_id=nope&code=x&redirect_uri=y"),
            (HTTPMethod.patch, "/__sesame/scenarios", ""),
            (HTTPMethod.post, "/__sesame/scenarios", "[1,2]"),
        ])
    func malformed(method: HTTPMethod, target: String, body: String) async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            var request = HTTPRequest(
                method: method, url: URL(string: h.base.absoluteString + target)!,
                headers: ["Authorization": "Bearer \(token)"])
            if !body.isEmpty {
                request.body = Data(body.utf8)
                request.headers["Content-Type"] =
                    body.hasPrefix("{") || body.hasPrefix("[")
                    ? "application/json" : "application/x-www-form-urlencoded"
            }
            let response = try await h.transport.send(request)
            #expect((400..<500).contains(response.status))
            let error = try #require(response.json?["error"])
            #expect(error["message"]?.stringValue?.isEmpty == false)
            #expect(error["code"]?.lenientInt != nil)
            // Still healthy afterwards.
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }

    @Test("with rate limits enforced, going over the hourly allowance answers (#4) with the usage headers")
    func enforcedRateLimit() async throws {
        try await Harness.with({
            $0.hourlyCallsPerUser = 3
            $0.enforcesRateLimits = true
        }) { h in
            let token = try await h.token()
            // Usage is counted in minutes of the emulator's clock: start these calls at the top of
            // one, so that a slow run cannot spread them over two and make the estimate 59.
            let intoMinute = h.emulator.configuration.now().timeIntervalSince1970.truncatingRemainder(dividingBy: 60)
            await h.emulator.advanceClock(by: 60 - intoMinute)
            for _ in 0..<3 { #expect(try await h.get("/me", token: token).status == 200) }
            let throttled = try await h.get("/me", token: token)
            #expect(throttled.status == 400)
            #expect(throttled.code == 4)
            let usage = JSONValue(parsing: Data((throttled.headers["X-App-Usage"] ?? "").utf8))
            #expect((usage?["call_count"]?.lenientInt ?? 0) > 100)
            let business = JSONValue(parsing: Data((throttled.headers["X-Business-Use-Case-Usage"] ?? "").utf8))
            #expect(business?[h.app.id]?[0]?["estimated_time_to_regain_access"]?.lenientInt == 60)
            // An hour later the allowance is back.
            await h.emulator.advanceClock(by: 3600)
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }

    @Test("limits: too many parameters, a body over the limit, a non-object batch item")
    func limits() async throws {
        try await Harness.with({ $0.limits.maxParameters = 10 }) { h in
            let token = try await h.token()
            let many = (0..<20).map { ("p\($0)", "v") }
            #expect(try await h.get("/me", token: token, many).code == 100)
            let big = try await h.post(
                "/me/feed", token: token, [("message", String(repeating: "x", count: 2_000_000))])
            #expect((400..<500).contains(big.status))
            let batch = try await h.post("/", token: token, [("batch", "[1]")])
            #expect(batch.json?[0]?["code"] == .int(400))
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }
}

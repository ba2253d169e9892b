import Foundation
import Sesame
import SesameEmulator
import Testing

@Suite("Facebook Login for Devices")
struct DeviceLoginTests {
    func start(_ h: Harness, scope: String = "email") async throws -> (code: String, userCode: String) {
        let reply = try await h.post("/v19.0/device/login", token: h.clientToken, [("scope", scope)])
        #expect(reply.status == 200)
        let json = try #require(reply.json)
        #expect(json["verification_uri"]?.stringValue == h.base.absoluteString + "/device")
        #expect(json["expires_in"]?.lenientInt == 420)
        #expect(json["interval"]?.lenientInt == 5)
        return (try #require(json["code"]?.stringValue), try #require(json["user_code"]?.stringValue))
    }

    func poll(_ h: Harness, _ code: String) async throws -> Reply {
        try await h.post("/v19.0/device/login_status", token: h.clientToken, [("code", code)])
    }

    @Test("pending, then slow down when polled too fast, then the token once approved through the admin API")
    func approveThroughAdmin() async throws {
        // The emulator's clock stands still but for advanceClock: two polls are "too fast"
        // however long the machine takes between them (seconds, under ThreadSanitizer and load).
        let frozen = Date()
        try await Harness.with({ $0.now = { frozen } }) { h in
            let (code, userCode) = try await start(h)
            let pending = try await poll(h, code)
            #expect(pending.status == 400)
            #expect(pending.code == 31)
            #expect(pending.subcode == 1_349_174)
            #expect(pending.error?["error_user_title"] == .string("Device Login Authorization Pending"))
            let tooFast = try await poll(h, code)
            #expect(tooFast.code == 17)
            #expect(tooFast.subcode == 1_349_172)

            let approve = try await h.admin(
                .post, "device/approve",
                .object(["user_code": .string(userCode.lowercased()), "user": .string(h.userID)]))
            #expect(approve.status == 200)
            #expect(approve.json?["granted"] == .array([.string("public_profile"), .string("email")]))

            await h.emulator.advanceClock(by: 5)
            let done = try await poll(h, code)
            #expect(done.status == 200)
            let token = try #require(done.json?["access_token"]?.stringValue)
            #expect(done.json?["expires_in"]?.lenientInt != nil)
            #expect(done.json?["data_access_expiration_time"]?.lenientInt != nil)
            let me = try await h.get("/me", token: token, [("fields", "id,email")])
            #expect(me.json?["email"] == .string("sam.sesame@example.com"))
            // The code is spent.
            #expect(try await poll(h, code).subcode == 1_349_152)
        }
    }

    @Test("a declined device login answers 1349173; an expired one 1349152")
    func declinedAndExpired() async throws {
        try await Harness.with { h in
            let first = try await start(h)
            #expect(
                try await h.admin(.post, "device/deny", .object(["user_code": .string(first.userCode)])).status == 200)
            let declined = try await poll(h, first.code)
            #expect(declined.subcode == 1_349_173)

            let second = try await start(h)
            await h.emulator.advanceClock(by: 421)
            let expired = try await poll(h, second.code)
            #expect(expired.code == 463)
            #expect(expired.subcode == 1_349_152)
            #expect(expired.error?["error_user_title"] == .string("Activation Code Expired"))
            let late = try await h.admin(.post, "device/approve", .object(["user_code": .string(second.userCode)]))
            #expect(late.status == 409)
        }
    }

    @Test("the device page takes the code and shows the consent form, whose answer connects the device")
    func devicePage() async throws {
        try await Harness.with { h in
            let (code, userCode) = try await start(h, scope: "email,user_friends")
            let form = try await h.get("/device")
            #expect(form.text.contains("name=\"user_code\""))
            let wrong = try await h.post("/device", token: nil, [("user_code", "NOPE1234")])
            #expect(wrong.status == 400)
            let consent = try await h.post("/device", token: nil, [("user_code", userCode)])
            #expect(consent.text.contains("value=\"user_friends\" checked"))
            let done = try await h.post(
                "/device/confirm", nil,
                [("user_code", userCode), ("user", h.userID), ("permission", "email"), ("action", "continue")])
            #expect(done.text.contains("Success"))
            await h.emulator.advanceClock(by: 5)
            let token = try #require(try await poll(h, code).json?["access_token"]?.stringValue)
            let permissions = try await h.get("/me/permissions/user_friends", token: token)
            #expect(permissions.json?["data"]?[0]?["status"] == .string("declined"))
        }
    }

    @Test("device calls need the client token")
    func needsClientToken() async throws {
        try await Harness.with { h in
            let reply = try await h.post("/device/login", token: try await h.token(), [("scope", "email")])
            #expect(reply.code == 100)
            let none = try await h.post("/device/login", token: nil, [("scope", "email")])
            #expect(none.code == 104)
        }
    }
}

@Suite("Test-user API")
struct TestUserTests {
    @Test("POST creates a test user with id, access_token, login_url, email and password; the token works")
    func create() async throws {
        try await Harness.with { h in
            let reply = try await h.post(
                "/v19.0/\(h.app.id)/accounts/test-users", token: h.appToken,
                [("installed", "true"), ("permissions", "email,publish_actions"), ("name", "Tess Tuser")])
            #expect(reply.status == 200)
            let json = try #require(reply.json)
            let id = try #require(json["id"]?.stringValue)
            let token = try #require(json["access_token"]?.stringValue)
            #expect(json["login_url"]?.stringValue == "\(h.base.absoluteString)/test-user-login/\(id)")
            #expect(json["email"]?.stringValue?.hasSuffix("@tfbnw.net") == true)
            #expect(json["password"]?.stringValue?.isEmpty == false)
            let me = try await h.get("/me", token: token, [("fields", "id,name,email")])
            #expect(me.json?["id"] == .string(id))
            #expect(me.json?["name"] == .string("Tess Tuser"))
            #expect(try await h.post("/me/feed", token: token, [("message", "I am a test")]).status == 200)
        }
    }

    @Test("installed=false gives no token; GET lists the app's test users; DELETE removes one")
    func listAndDelete() async throws {
        try await Harness.with { h in
            let path = "/\(h.app.id)/accounts/test-users"
            let installed = try await h.post(path, token: h.appToken, [("installed", "true")])
            let uninstalled = try await h.post(path, token: h.appToken, [("installed", "false")])
            #expect(uninstalled.json?["access_token"] == nil)
            let list = try await h.get(path, token: h.appToken)
            let ids = list.json?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
            #expect(
                ids == [installed.json?["id"]?.stringValue, uninstalled.json?["id"]?.stringValue].compactMap { $0 })
            #expect(list.json?["data"]?[0]?["access_token"] != nil)
            #expect(list.json?["data"]?[1]?["access_token"] == nil)

            let id = try #require(installed.json?["id"]?.stringValue)
            let token = try #require(installed.json?["access_token"]?.stringValue)
            #expect(try await h.delete("/\(id)", token: h.appToken).json == .object(["success": .bool(true)]))
            let after = try await h.get("/me", token: token)
            #expect(after.code == 190)
            #expect(try await h.get(path, token: h.appToken).json?["data"]?.arrayValue?.count == 1)
        }
    }

    @Test("the test-user API needs the app token: (#15) otherwise")
    func needsAppToken() async throws {
        try await Harness.with { h in
            let reply = try await h.post("/\(h.app.id)/accounts/test-users", token: try await h.token())
            #expect(reply.code == 15)
        }
    }

    @Test("the login_url page makes the dialog act as that test user")
    func loginURL() async throws {
        try await Harness.with { h in
            let created = try await h.post(
                "/\(h.app.id)/accounts/test-users", token: h.appToken, [("name", "Cookie Person")])
            let id = try #require(created.json?["id"]?.stringValue)
            let login = try await h.get("/test-user-login/\(id)")
            let cookie = try #require(login.headers["Set-Cookie"])
            #expect(cookie.hasPrefix("sesame_user=\(id);"))
            let page = try await h.send(
                .get, "/dialog/oauth", query: [("client_id", h.app.id), ("redirect_uri", "http://127.0.0.1:9/cb")],
                headers: ["Cookie": "sesame_user=\(id)"])
            #expect(page.text.contains("<option value=\"\(id)\" selected>Cookie Person (test user)</option>"))
        }
    }
}

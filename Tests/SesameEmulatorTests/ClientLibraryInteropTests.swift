import Foundation
import Sesame
import SesameEmulator
import SesameFacebookEmulator
import Testing

/// What independent Graph client libraries send, answered as Facebook answers it (issue 18,
/// items 8-10). `scripts/interop` runs such a library against the built emulator too.
@Suite("Graph requests as client libraries send them")
struct ClientLibraryInteropTests {
    @Test("GET /?ids=a,b answers an object keyed by id (legacy forms allowed); ?id=x answers the object itself")
    func multiIDReads() async throws {
        try await Harness.with({ $0.scenarios = [ScenarioSetting(.legacyForms)] }) { harness in
            let token = try await harness.token()
            let both = try await harness.get(
                "/v19.0/", token: token, [("ids", "me,\(harness.userID)"), ("fields", "id,name")])
            #expect(both.status == 200, "\(both.text)")
            #expect(both.json?["me"]?["id"]?.stringValue == harness.userID)
            #expect(both.json?[harness.userID]?["name"]?.stringValue != nil)
            let one = try await harness.get("/", token: token, [("id", harness.userID)])
            #expect(one.json?["id"]?.stringValue == harness.userID)
            let url = try await harness.get("/", token: token, [("id", "https://example.com/page")])
            #expect(url.json?["id"]?.stringValue == "https://example.com/page")
            #expect(url.json?["share"]?["share_count"]?.lenientInt == 0)
            let missing = try await harness.get("/", token: token, [("ids", "me,999999999")])
            #expect(missing.status == 400 && missing.code == 100, "one unknown id fails the whole read")
        }
    }

    @Test("facebook-api-version names the version in the path, the oldest available one for an ended version")
    func servedVersion() async throws {
        // 2026-12-07: v20.0 ended on 2026-09-24 and v21.0 (ends 2027-01-21) is the oldest available.
        let today = Date(timeIntervalSince1970: 1_796_601_600)
        try await Harness.with({ $0.now = { today } }) { harness in
            let token = try await harness.token()
            let current = try await harness.get("/v22.0/me", token: token)
            #expect(current.status == 200 && current.headers["facebook-api-version"] == "v22.0")
            let short = try await harness.get("/v27/me", token: token)
            #expect(short.headers["facebook-api-version"] == "v27.0")
            for ended in ["/v19.0", "/v20.0", "/v2.0", "/v2"] {
                let reply = try await harness.get("\(ended)/me", token: token)
                #expect(reply.status == 200, "\(ended): \(reply.text)")
                #expect(reply.headers["facebook-api-version"] == "v21.0", "\(ended) is served by the oldest available")
            }
            let plain = try await harness.get("/me", token: token)
            #expect(plain.headers["facebook-api-version"] == harness.emulator.configuration.graphVersion)
            let failed = try await harness.get("/v19.0/me", token: "not-a-token")
            #expect(failed.status != 200 && failed.headers["facebook-api-version"] == "v21.0")
        }
    }

    @Test("suppress_http_code=1 answers an error with status 200 and the same envelope")
    func suppressedStatus() async throws {
        try await Harness.with { harness in
            let plain = try await harness.get("/me", token: "not-a-token")
            let suppressed = try await harness.get("/me", token: "not-a-token", [("suppress_http_code", "1")])
            #expect(plain.status == 400)
            #expect(suppressed.status == 200)
            #expect(suppressed.code == plain.code && suppressed.code == 190)
            let posted = try await harness.post("/me/feed", token: "not-a-token", [("suppress_http_code", "true")])
            #expect(posted.status == 200 && posted.code == 190)
        }
    }

    @Test("picture{url} answers only the url; picture.type(large) is accepted")
    func pictureSubfields() async throws {
        try await Harness.with { harness in
            let token = try await harness.token()
            let reply = try await harness.get("/me", token: token, [("fields", "id,picture{url}")])
            let data = try #require(reply.json?["picture"]?["data"]?.objectValue, "\(reply.text)")
            #expect(Array(data.keys) == ["url"])
            let whole = try await harness.get("/me", token: token, [("fields", "picture.type(large)")])
            #expect(whole.json?["picture"]?["data"]?["height"] != nil)
            let unknown = try await harness.get("/me", token: token, [("fields", "picture{nonsense}")])
            #expect(unknown.status == 400 && unknown.code == 100)
        }
    }

    @Test("a fields list asked again is answered the same (the parsed lists are kept); a bad one is refused each time")
    func fieldListsAskedAgain() async throws {
        try await Harness.with { harness in
            let token = try await harness.token(["email"])
            for fields in ["id,name,email", "email , id", "id,name,email", "email , id"] {
                let reply = try await harness.get("/me", token: token, [("fields", fields)])
                let keys = try #require(reply.json?.objectValue?.keys, "\(reply.text)")
                let expected = fields.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }
                #expect(Set(keys) == Set(expected), "\(fields): \(reply.text)")
            }
            for _ in 0..<2 {
                let bad = try await harness.get("/me", token: token, [("fields", "id,picture{url")])
                #expect(bad.status == 400 && bad.code == 100, "\(bad.text)")
            }
            // The defaults still apply to a blank list once lists have been kept.
            let blank = try await harness.get("/me", token: token, [("fields", " ")])
            #expect(Set(try #require(blank.json?.objectValue?.keys)) == ["id", "name"])
        }
    }

    @Test(".limit(n) in field expansion limits the nested edge")
    func nestedLimit() async throws {
        try await Harness.with { harness in
            let token = try await harness.token(["publish_actions", "user_posts"])
            for number in 1...3 {
                let posted = try await harness.post("/me/feed", token: token, [("message", "post \(number)")])
                #expect(posted.status == 200, "\(posted.text)")
            }
            let reply = try await harness.get("/me", token: token, [("fields", "id,feed.limit(2){message}")])
            let posts = try #require(reply.json?["feed"]?["data"]?.arrayValue, "\(reply.text)")
            #expect(posts.count == 2)
            #expect(posts.first?["message"]?.stringValue == "post 3")
            #expect(posts.first?["created_time"] == nil, "only the sub-fields asked for")
            #expect(reply.json?["feed"]?["paging"]?["next"] != nil)
            let permissions = try await harness.get("/me", token: token, [("fields", "permissions.limit(1)")])
            #expect(permissions.json?["permissions"]?["data"]?.arrayValue?.count == 1)
            let bad = try await harness.get("/me", token: token, [("fields", "feed.limit(x)")])
            #expect(bad.status == 400 && bad.code == 100)
        }
    }
}

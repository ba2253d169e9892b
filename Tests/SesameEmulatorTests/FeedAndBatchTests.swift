import Foundation
import Sesame
import SesameEmulator
import Testing

@Suite("Feed: publishing, audience, paging")
struct FeedTests {
    @Test("publishing needs publish_actions: without it (#200) with HTTP 403")
    func needsPermission() async throws {
        try await Harness.with { h in
            let reply = try await h.post("/me/feed", token: try await h.token(), [("message", "hello")])
            #expect(reply.status == 403)
            #expect(reply.code == 200)
            #expect(reply.error?["type"] == .string("OAuthException"))
        }
    }

    @Test("a post gets a {user}_{n} id and reads back with its message and audience")
    func publishAndRead() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            let reply = try await h.post("/me/feed", token: token, [("message", "Hello, Sesame")])
            let id = try #require(reply.json?["id"]?.stringValue)
            #expect(id.hasPrefix("\(h.userID)_"))
            let post = try await h.get("/\(id)", token: token, [("fields", "id,message,privacy,from")])
            #expect(post.json?["message"] == .string("Hello, Sesame"))
            #expect(post.json?["privacy"]?["value"] == .string("ALL_FRIENDS"))
            #expect(post.json?["from"]?["id"] == .string(h.userID))
        }
    }

    @Test("the audience granted in the dialog caps a post's privacy")
    func audience() async throws {
        try await Harness.with { h in
            let dialog = h.url(
                "/dialog/oauth",
                [
                    ("client_id", h.app.id), ("redirect_uri", "http://127.0.0.1:9/cb"), ("scope", "publish_actions"),
                    ("default_audience", "only_me"), ("response_type", "token"),
                ])
            let location = try await h.emulator.approveDialog(url: dialog)
            let token = try #require(parameters(of: location, fragment: true)["access_token"])
            let reply = try await h.post(
                "/me/feed", token: token, [("message", "to everyone?"), ("privacy", #"{"value":"EVERYONE"}"#)])
            let id = try #require(reply.json?["id"]?.stringValue)
            let post = try await h.get("/\(id)", token: token, [("fields", "privacy")])
            #expect(post.json?["privacy"]?["value"] == .string("SELF"))
            let bad = try await h.post("/me/feed", token: token, [("message", "x"), ("privacy", "PUBLIC")])
            #expect(bad.code == 100)
        }
    }

    @Test("posting the same message twice in a row is (#506) duplicate; an empty post is (#100)")
    func duplicateAndEmpty() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            #expect(try await h.post("/me/feed", token: token, [("message", "same")]).status == 200)
            let again = try await h.post("/me/feed", token: token, [("message", "same")])
            #expect(again.status == 400)
            #expect(again.code == 506)
            let empty = try await h.post("/me/feed", token: token, [("message", "  ")])
            #expect(empty.code == 100)
            let badLink = try await h.post("/me/feed", token: token, [("link", "javascript:alert(1)")])
            #expect(badLink.code == 100)
        }
    }

    @Test("GET /me/feed pages with cursors to the end: next disappears on the last page")
    func pagingToTheEnd() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            var ids: [String] = []
            for number in 1...11 {
                let reply = try await h.post("/me/feed", token: token, [("message", "post \(number)")])
                ids.append(try #require(reply.json?["id"]?.stringValue))
            }
            var seen: [String] = []
            var pages = 0
            var page = try await h.get("/v19.0/me/feed", token: token, [("limit", "4")])
            while true {
                pages += 1
                let data = try #require(page.json?["data"]?.arrayValue)
                seen += data.compactMap { $0["id"]?.stringValue }
                #expect(data.allSatisfy { $0["created_time"] != nil && $0["message"] != nil })
                guard let next = page.json?["paging"]?["next"]?.stringValue else { break }
                #expect(next.contains("/v19.0/me/feed?"))
                #expect(page.json?["paging"]?["cursors"]?["after"] != nil)
                page = try await h.send(.get, String(next.dropFirst(h.base.absoluteString.count)))
                #expect(pages < 10)
            }
            #expect(pages == 3)
            #expect(seen == Array(ids.reversed()))

            // The last page links back.
            let previous = try #require(page.json?["paging"]?["previous"]?.stringValue)
            let back = try await h.send(.get, String(previous.dropFirst(h.base.absoluteString.count)))
            #expect(back.json?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == Array(seen[4..<8]))
        }
    }

    @Test("an empty feed is an empty data list with no paging")
    func emptyFeed() async throws {
        try await Harness.with { h in
            let reply = try await h.get("/me/feed", token: try await h.token())
            #expect(reply.json == .object(["data": .array([])]))
        }
    }

    @Test("a post can be deleted by the app that made it")
    func deletePost() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            let id = try #require(
                try await h.post("/me/feed", token: token, [("message", "bye")]).json?["id"]?.stringValue)
            #expect(try await h.delete("/\(id)", token: token).json == .object(["success": .bool(true)]))
            #expect(try await h.get("/\(id)", token: token).subcode == 33)
        }
    }
}

@Suite("Batch requests")
struct BatchTests {
    func batch(_ operations: [JSONValue]) -> String { JSONValue.array(operations).jsonText }

    @Test("a batch answers one result per operation, in order, with a failing item's own error")
    func oneFailingItem() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            let reply = try await h.post(
                "/v19.0/", token: token,
                [
                    (
                        "batch",
                        batch([
                            .object(["method": .string("GET"), "relative_url": .string("me?fields=id,name")]),
                            .object(["method": .string("GET"), "relative_url": .string("me/not-an-edge")]),
                            .object([
                                "method": .string("POST"), "relative_url": .string("me/feed"),
                                "body": .string("message=from+a+batch"),
                            ]),
                        ])
                    )
                ])
            #expect(reply.status == 200)
            let results = try #require(reply.json?.arrayValue)
            #expect(results.count == 3)
            #expect(results.map { $0["code"]?.lenientInt } == [200, 400, 200])
            let first = results[0]["body"]?.stringValue.flatMap { JSONValue(parsing: Data($0.utf8)) }
            #expect(first?["id"] == .string(h.userID))
            let second = results[1]["body"]?.stringValue.flatMap { JSONValue(parsing: Data($0.utf8)) }
            #expect(second?["error"]?["code"] == .int(2500))
            #expect(results[0]["headers"]?.arrayValue?.isEmpty == false)
            let third = results[2]["body"]?.stringValue.flatMap { JSONValue(parsing: Data($0.utf8)) }
            #expect(third?["id"]?.stringValue?.hasPrefix(h.userID + "_") == true)
        }
    }

    @Test("more than 50 operations is (#100); a batch that is not a JSON array is (#100)")
    func limits() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            let many = batch(
                Array(repeating: .object(["method": .string("GET"), "relative_url": .string("me")]), count: 51))
            let tooMany = try await h.post("/", token: token, [("batch", many)])
            #expect(tooMany.code == 100)
            #expect(tooMany.error?["message"]?.stringValue?.contains("50") == true)
            let fifty = batch(
                Array(repeating: .object(["method": .string("GET"), "relative_url": .string("me")]), count: 50))
            #expect(try await h.post("/", token: token, [("batch", fifty)]).json?.arrayValue?.count == 50)
            let notArray = try await h.post("/", token: token, [("batch", "{}")])
            #expect(notArray.code == 100)
        }
    }

    @Test("a refused batch-level token answers one error object, not an array")
    func badBatchToken() async throws {
        try await Harness.with { h in
            let reply = try await h.post(
                "/", token: "bad-token",
                [("batch", batch([.object(["method": .string("GET"), "relative_url": .string("me")])]))])
            #expect(reply.status == 400)
            #expect(reply.code == 190)
        }
    }

    @Test("named results feed later operations and depends_on waits for them; include_headers=false drops headers")
    func dependencies() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            _ = try await h.post("/me/feed", token: token, [("message", "first")])
            func get(_ url: String, name: String? = nil, dependsOn: String? = nil) -> JSONValue {
                var object: [String: JSONValue] = ["method": .string("GET"), "relative_url": .string(url)]
                if let name { object["name"] = .string(name) }
                if let dependsOn { object["depends_on"] = .string(dependsOn) }
                return .object(object)
            }
            let reply = try await h.post(
                "/", token: token,
                [
                    ("include_headers", "false"),
                    (
                        "batch",
                        batch([
                            get("me/feed?limit=1", name: "feed"),
                            get("me?fields=id", dependsOn: "feed"),
                            get("me/nowhere", name: "broken"),
                            get("me", dependsOn: "broken"),
                            get("{result=feed:$.data.0.id}?fields=message"),
                        ])
                    ),
                ])
            let results = try #require(reply.json?.arrayValue)
            #expect(results.count == 5)
            #expect(results[0] == .null)  // named and successful: omitted
            #expect(results.dropFirst().map { $0["code"]?.lenientInt } == [200, 400, 400, 200])
            #expect(results[1]["headers"] == nil)
            let body = results[4]["body"]?.stringValue.flatMap { JSONValue(parsing: Data($0.utf8)) }
            #expect(body?["message"] == .string("first"))
        }
    }
}

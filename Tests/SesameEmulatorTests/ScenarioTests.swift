import Foundation
import Sesame
import SesameEmulator
import SesameFacebookEmulator
import Testing

/// What one scenario must answer: status, code, subcode, flags and headers.
struct ScenarioCase: Sendable, CustomTestStringConvertible {
    var scenario: EmulatorScenario
    var status: Int
    var code: Int
    var subcode: Int? = nil
    var isTransient = false
    var hasUserMessage = false
    /// Headers that must be present, beyond X-App-Usage (which every answer has).
    var headers: [String] = []
    /// The X-App-Usage call_count the answer must report, when the scenario sets it.
    var appUsageCallCount: Int? = nil
    /// Whether the request is a publish (POST /me/feed) rather than GET /me.
    var publishes = false

    var testDescription: String { scenario.rawValue }

    static let all: [ScenarioCase] = [
        ScenarioCase(scenario: .appRemoved, status: 400, code: 190, subcode: 458, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .passwordChanged, status: 400, code: 190, subcode: 460, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .checkpointed, status: 400, code: 190, subcode: 459, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .unconfirmedUser, status: 400, code: 190, subcode: 464, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .tokenExpired, status: 400, code: 190, subcode: 463, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .invalidSession, status: 400, code: 190, subcode: 492, headers: ["WWW-Authenticate"]),
        ScenarioCase(scenario: .permissionRevoked, status: 403, code: 200, publishes: true),
        ScenarioCase(
            scenario: .appThrottled, status: 400, code: 4, isTransient: true, headers: ["X-Business-Use-Case-Usage"],
            appUsageCallCount: 100),
        ScenarioCase(
            scenario: .userThrottled, status: 400, code: 17, isTransient: true, headers: ["X-Business-Use-Case-Usage"]),
        ScenarioCase(
            scenario: .pageThrottled, status: 400, code: 32, isTransient: true,
            headers: ["X-Page-Usage", "X-Business-Use-Case-Usage"]),
        ScenarioCase(
            scenario: .rateLimited, status: 400, code: 613, isTransient: true, headers: ["X-Business-Use-Case-Usage"],
            appUsageCallCount: 100),
        ScenarioCase(scenario: .transient, status: 500, code: 2, isTransient: true),
        ScenarioCase(scenario: .unknownError, status: 500, code: 1),
        ScenarioCase(scenario: .duplicatePost, status: 400, code: 506, publishes: true),
        ScenarioCase(scenario: .userMessage, status: 400, code: 368, hasUserMessage: true),
    ]
}

@Suite("Scenarios: each answers exactly as Facebook would")
struct ScenarioTests {
    @Test(
        "each error scenario answers its envelope, status and headers, and clearing it restores service",
        arguments: ScenarioCase.all)
    func envelope(_ expected: ScenarioCase) async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            let activated = try await h.admin(
                .post, "scenarios", .object(["scenario": .string(expected.scenario.rawValue)]))
            #expect(activated.status == 201)
            #expect(activated.json?["scenario"] == .string(expected.scenario.rawValue))

            func call() async throws -> Reply {
                expected.publishes
                    ? try await h.post("/v19.0/me/feed", token: token, [("message", "scenario \(UUID())")])
                    : try await h.get("/v19.0/me", token: token)
            }
            let reply = try await call()
            #expect(reply.status == expected.status)
            let error = try #require(reply.error?.objectValue)
            var keys: Set<String> = ["message", "type", "code", "fbtrace_id", "is_transient"]
            if expected.subcode != nil { keys.insert("error_subcode") }
            if expected.hasUserMessage { keys.formUnion(["error_user_title", "error_user_msg"]) }
            #expect(Set(error.keys) == keys)
            #expect(error["type"] == .string("OAuthException"))
            #expect(error["code"] == .int(expected.code))
            #expect(error["error_subcode"]?.lenientInt == expected.subcode)
            #expect(error["is_transient"] == .bool(expected.isTransient))
            #expect(reply.headers["X-App-Usage"] != nil)
            for name in expected.headers { #expect(reply.headers[name] != nil, "\(name)") }
            if let callCount = expected.appUsageCallCount {
                let usage = JSONValue(parsing: Data((reply.headers["X-App-Usage"] ?? "").utf8))
                #expect(usage?["call_count"]?.lenientInt == callCount)
            }
            if let business = reply.headers["X-Business-Use-Case-Usage"] {
                let entry = JSONValue(parsing: Data(business.utf8))?.objectValue?.values.first?[0]
                #expect(entry?["estimated_time_to_regain_access"] == .int(5))
                #expect(entry?["call_count"] == .int(100))
            }

            #expect(try await h.admin(.delete, "scenarios").status == 200)
            let after = try await call()
            #expect(after.status == 200)
        }
    }

    @Test("count limits a scenario to that many answers; the list shows what remains")
    func count() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            _ = try await h.admin(.post, "scenarios", .object(["scenario": .string("transient"), "count": .int(2)]))
            #expect(try await h.get("/me", token: token).code == 2)
            let list = try await h.admin(.get, "scenarios")
            #expect(list.json?["data"]?[0]?["remaining"] == .int(1))
            #expect(list.json?["available"]?.arrayValue?.count == EmulatorScenario.allCases.count)
            #expect(try await h.get("/me", token: token).code == 2)
            #expect(try await h.get("/me", token: token).status == 200)
            #expect(try await h.admin(.get, "scenarios").json?["data"] == .array([]))
        }
    }

    @Test("a scenario for one person leaves others alone")
    func userFilter() async throws {
        try await Harness.with { h in
            await h.emulator.addUser(EmulatedUser(id: "100000000000002", name: "Other Person"))
            let mine = try await h.token()
            let theirs = try await h.token(user: "100000000000002")
            _ = try await h.admin(
                .post, "scenarios",
                .object(["scenario": .string("user-throttled"), "user": .string("100000000000002")]))
            #expect(try await h.get("/me", token: mine).status == 200)
            #expect(try await h.get("/me", token: theirs).code == 17)
        }
    }

    @Test("session scenarios hit tokens issued before them; account scenarios hit later tokens too")
    func earlierAndLaterTokens() async throws {
        try await Harness.with { h in
            let before = try await h.token()
            try await h.emulator.activate(ScenarioSetting(.passwordChanged))
            let after = try await h.token()
            #expect(try await h.get("/me", token: before).subcode == 460)
            #expect(try await h.get("/me", token: after).status == 200)

            await h.emulator.clearScenarios()
            try await h.emulator.activate(ScenarioSetting(.checkpointed))
            let later = try await h.token()
            #expect(try await h.get("/me", token: later).subcode == 459)
            let debug = try await h.get("/debug_token", token: h.appToken, [("input_token", later)])
            #expect(debug.json?["data"]?["is_valid"] == .bool(false))
            #expect(debug.json?["data"]?["error"]?["subcode"] == .int(459))
        }
    }

    @Test("permission-revoked reads as declined; once its count is spent, publishing works again")
    func permissionRevoked() async throws {
        try await Harness.with { h in
            let token = try await h.token(["publish_actions"])
            _ = try await h.admin(
                .post, "scenarios", .object(["scenario": .string("permission-revoked"), "count": .int(1)]))
            let permissions = try await h.get("/me/permissions/publish_actions", token: token)
            #expect(permissions.json?["data"]?[0]?["status"] == .string("declined"))
            #expect(try await h.post("/me/feed", token: token, [("message", "one")]).code == 200)
            #expect(try await h.post("/me/feed", token: token, [("message", "two")]).status == 200)
        }
    }

    @Test("slow waits delayMs before answering")
    func slow() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            try await h.emulator.activate(ScenarioSetting(.slow, count: 1, delayMs: 250))
            let outcome = await h.emulator.respond(
                to: EmulatorRequest(method: .get, path: "/me", query: [("access_token", token)]))
            #expect(outcome.delay == .milliseconds(250))
            #expect(outcome.response?.status == 200)
            let next = await h.emulator.respond(
                to: EmulatorRequest(method: .get, path: "/me", query: [("access_token", token)]))
            #expect(next.delay == .zero)
        }
    }

    @Test("drop-connection closes without an answer, then service resumes once cleared")
    func dropConnection() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            // No count: an HTTP client may retry a request whose reused connection died unanswered.
            _ = try await h.admin(.post, "scenarios", .object(["scenario": .string("drop-connection")]))
            await #expect(throws: TransportError.self) { try await h.get("/me", token: token) }
            _ = try await h.admin(.delete, "scenarios")
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }

    @Test("an unknown scenario or option is refused with the known names")
    func unknownScenario() async throws {
        try await Harness.with { h in
            let reply = try await h.admin(.post, "scenarios", .object(["scenario": .string("meteor-strike")]))
            #expect(reply.status == 400)
            #expect(reply.error?["message"]?.stringValue?.contains("app-removed") == true)
            let option = try await h.admin(
                .post, "scenarios", .object(["scenario": .string("slow"), "delay": .int(3)]))
            #expect(option.status == 400)
            let negative = try await h.admin(
                .post, "scenarios", .object(["scenario": .string("transient"), "count": .int(-1)]))
            #expect(negative.status == 400)
        }
    }

    @Test("DELETE /__sesame/scenarios/{id} clears one")
    func deleteOne() async throws {
        try await Harness.with { h in
            let first = try await h.admin(.post, "scenarios", .object(["scenario": .string("transient")]))
            _ = try await h.admin(.post, "scenarios", .object(["scenario": .string("slow"), "delayMs": .int(1)]))
            let id = try #require(first.json?["id"]?.stringValue)
            #expect(try await h.admin(.delete, "scenarios/\(id)").status == 200)
            let names = try await h.admin(.get, "scenarios").json?["data"]?.arrayValue?.map { $0["scenario"] }
            #expect(names == [.string("slow")])
            #expect(try await h.admin(.delete, "scenarios/\(id)").status == 404)
        }
    }

    @Test("scenarios given at start-up are active from the first request")
    func startup() async throws {
        try await Harness.with({ $0.scenarios = [try! ScenarioSetting(argument: "unknown-error,count=1")] }) { h in
            let token = try await h.token()
            #expect(try await h.get("/me", token: token).code == 1)
            #expect(try await h.get("/me", token: token).status == 200)
        }
    }

    @Test(
        "--scenario values parse names and options",
        arguments: [
            ("app-removed", ScenarioSetting(.appRemoved)),
            ("transient,count=2", ScenarioSetting(.transient, count: 2)),
            ("slow, delayMs=250", ScenarioSetting(.slow, delayMs: 250)),
            (
                "user-throttled,user=100000000000001,regainAccessMinutes=9",
                ScenarioSetting(.userThrottled, user: "100000000000001", regainAccessMinutes: 9)
            ),
            ("permission-revoked,permission=email", ScenarioSetting(.permissionRevoked, permission: "email")),
            ("transient,count=2,path=/me/feed", ScenarioSetting(.transient, count: 2, path: "me/feed")),
        ])
    func parseArgument(text: String, expected: ScenarioSetting) throws {
        #expect(try ScenarioSetting(argument: text) == expected)
    }

    @Test(
        "bad --scenario values are refused",
        arguments: ["nope", "slow,delayMs", "slow,delayMs=-1", "slow,speed=3", "transient,count=0", "transient,path="])
    func parseBadArgument(text: String) {
        #expect(throws: EmulatorError.self) { try ScenarioSetting(argument: text) }
    }
}

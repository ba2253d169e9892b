import Foundation
import Sesame
import SesameEmulator

/// The GitHub emulator's state and request handling. Every request is handled under one lock,
/// start to finish, without suspending.
final class GitHubEngine: LoopbackEngine {
    struct Person: Sendable {
        var login: String
        var id: Int
        var name: String
    }
    struct Device: Sendable {
        var clientID: String
        var userCode: String
        var scopes: [String]
        var expiresAt: Date
        var interval: Int
        var approvedFor: String?
        var denied = false
    }
    struct Token: Sendable {
        var login: String
        /// `nil` for fine-grained tokens, whose permissions are not scopes.
        var scopes: [String]?
        var expiresAt: Date?
        var clientID: String?
        /// Whether GitHub says when it expires (`github-authentication-token-expiration`).
        var isPersonal: Bool
        /// The token family (one per device login) of an expiring user token; `nil` for others.
        var family: String? = nil
    }
    struct Refresh: Sendable {
        var login: String
        var scopes: [String]
        var clientID: String
        var expiresAt: Date
        /// The token family: every user token and refresh token descended from one device login.
        var family: String
    }
    typealias Scenario = CountedScenario<GitHubScenarioSetting>
    struct Window: Sendable {
        var resetAt: Date
        var used: Int
    }
    struct State: LoopbackState {
        var baseURL = "http://127.0.0.1"
        var clients: Set<String>
        var people: [Person]
        var devices: [String: Device] = [:]
        var tokens: [String: Token] = [:]
        var refreshTokens: [String: Refresh] = [:]
        /// The refresh tokens each family rotated away, and the refresh counters.
        var families = RefreshFamilies()
        var repositories: [String: [String]] = [:]
        var scenarios: [Scenario] = []
        var windows: [String: Window] = [:]
        var clockOffset: TimeInterval = 0
        var requestCounts: [String: Int] = [:]
        var devicePollInterval = 5
        var rateLimit = 5000
    }

    let expiringTokens: Bool
    let accessTokenLifetime: TimeInterval
    /// Seconds a refresh token lives from when it is issued (`refresh_token_expires_in`).
    let refreshTokenLifetime: TimeInterval
    private let state: Locked<State>

    static let documentation = "https://docs.github.com/rest"

    init(
        clients: [String], expiringTokens: Bool, accessTokenLifetime: TimeInterval,
        refreshTokenLifetime: TimeInterval = GitHubEmulator.defaultRefreshTokenLifetime, repositoryCount: Int
    ) {
        self.expiringTokens = expiringTokens
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        let people = [
            Person(login: "octocat", id: 583_231, name: "The Octocat"),
            Person(login: "hubot", id: 480_938, name: "Hubot"),
        ]
        var state = State(clients: Set(clients + [GitHubEmulator.defaultClientID]), people: people)
        state.repositories["octocat"] = (0..<max(0, repositoryCount)).map { String(format: "repo-%03d", $0 + 1) }
        state.repositories["hubot"] = ["hello-world"]
        self.state = Locked(state)
    }

    func locked<T>(_ body: (inout State) throws -> T) rethrows -> T { try state.withLock { try body(&$0) } }

    func setBaseURL(_ url: String) { locked { $0.baseURL = url } }

    static func person(_ id: String?, in state: State) throws -> Person {
        guard let id else { return state.people[0] }
        guard let person = state.people.first(where: { $0.login == id || String($0.id) == id }) else {
            throw EmulatorError(
                message: "No GitHub user '\(id)' in the emulator; it knows "
                    + state.people.map(\.login).joined(separator: ", ") + ".")
        }
        return person
    }

    func answerDevice(userCode: String, user: String?, approve: Bool) throws {
        try locked { state in
            guard let code = state.devices.first(where: { $0.value.userCode == userCode })?.key else {
                throw EmulatorError(message: "No device login is waiting with the code \(userCode).")
            }
            let person = try Self.person(user, in: state)
            if approve { state.devices[code]?.approvedFor = person.login } else { state.devices[code]?.denied = true }
        }
    }

    func issuePersonalToken(user: String?, scopes: [String]?, expiresIn: TimeInterval?) throws -> String {
        try locked { state in
            let person = try Self.person(user, in: state)
            let token = (scopes == nil ? "github_pat_" : "ghp_") + Self.random()
            state.tokens[token] = Token(
                login: person.login, scopes: scopes, expiresAt: expiresIn.map { now(state).addingTimeInterval($0) },
                clientID: nil, isPersonal: true)
            return token
        }
    }

    static func random(_ bytes: Int = 24) -> String {
        ((try? Crypto.randomURLSafeString(byteCount: bytes)) ?? UUID().uuidString)
            .replacingOccurrences(of: "-", with: "0").replacingOccurrences(of: "_", with: "1")
    }

    func now(_ state: State) -> Date { state.now }

    // MARK: Dispatch

    /// Counts the request and answers it, under the lock.
    func reply(to request: LoopbackRequest) -> Reply {
        locked { state in
            state.requestCounts[request.path, default: 0] += 1
            return route(request, &state)
        }
    }

    func route(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        switch (request.method, request.path) {
        case (.post, "/login/device/code"): return deviceCode(request, &state)
        case (.post, "/login/oauth/access_token"): return accessToken(request, &state)
        case (.get, "/login/device"):
            return Reply.html(
                Self.page(
                    title: "Device activation",
                    body: "<h1>Device activation</h1><p>Enter the code displayed on your device.</p>"
                        + "<form method=\"post\" action=\"/login/device\"><input name=\"user_code\" value=\""
                        + HTML.escape(request["user_code"] ?? "") + "\">"
                        + "<div class=\"buttons\"><button class=\"primary\" name=\"action\" value=\"authorize\">"
                        + "Authorize</button><button name=\"action\" value=\"cancel\">Cancel</button></div></form>"))
        case (.post, "/login/device"):
            guard let code = request["user_code"],
                let deviceCode = state.devices.first(where: { $0.value.userCode == code.uppercased() })?.key
            else {
                return Reply.html(Self.page(title: "Unknown code", body: "<p>That code is not valid.</p>"), status: 400)
            }
            if request["action"] == "cancel" {
                state.devices[deviceCode]?.denied = true
            } else {
                state.devices[deviceCode]?.approvedFor = state.people[0].login
            }
            return Reply.html(Self.page(title: "Done", body: "<p>You can return to your device.</p>"))
        default:
            if request.path.hasPrefix("/__sesame") { return admin(request, &state) }
            if request.path == "/api/v3" || request.path.hasPrefix("/api/v3/") { return api(request, &state) }
            return Self.message("Not Found", status: 404)
        }
    }

    // MARK: OAuth (device flow and refresh): errors come with HTTP 200

    /// An OAuth answer: JSON when asked for, else form-encoded text, as GitHub does.
    func oauthAnswer(_ request: LoopbackRequest, _ fields: [(String, JSONValue)]) -> Reply {
        if (request.headers["Accept"] ?? "").lowercased().contains("json") {
            return Reply.json(.object(Dictionary(fields, uniquingKeysWith: { first, _ in first })))
        }
        let pairs = fields.map { name, value in
            (name, value.stringValue ?? value.lenientInt.map(String.init) ?? value.jsonText)
        }
        return Reply(
            status: 200, headers: ["Content-Type": "application/x-www-form-urlencoded; charset=utf-8"],
            body: .bytes(Data(FormEncoding.encode(pairs).utf8)))
    }

    func oauthError(_ request: LoopbackRequest, _ error: String, _ description: String) -> Reply {
        oauthAnswer(
            request,
            [
                ("error", .string(error)), ("error_description", .string(description)),
                (
                    "error_uri",
                    .string(
                        "https://docs.github.com/developers/apps/authorizing-oauth-apps#error-codes-for-the-device-flow"
                    )
                ),
            ])
    }

    func deviceCode(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        if consume(.deviceFlowDisabled, &state) != nil {
            return oauthError(request, "device_flow_disabled", "Device Flow must be explicitly enabled for this App")
        }
        guard let clientID = request["client_id"], state.clients.contains(clientID) else {
            return oauthError(request, "incorrect_client_credentials", "The client_id passed is incorrect.")
        }
        let deviceCode = Self.random(20)
        let letters = Array("BCDFGHJKLMNPQRSTVWXZ0123456789")
        let userCode = String((0..<8).map { _ in letters.randomElement()! }).enumerated().map {
            $0.offset == 4 ? "-\($0.element)" : "\($0.element)"
        }.joined()
        let scopes = (request["scope"] ?? "").split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        state.devices[deviceCode] = Device(
            clientID: clientID, userCode: userCode, scopes: scopes, expiresAt: now(state).addingTimeInterval(900),
            interval: state.devicePollInterval)
        return oauthAnswer(
            request,
            [
                ("device_code", .string(deviceCode)), ("user_code", .string(userCode)),
                ("verification_uri", .string(state.baseURL + "/login/device")),
                ("expires_in", .number(900)), ("interval", .number(Double(state.devicePollInterval))),
            ])
    }

    func accessToken(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        guard let clientID = request["client_id"], state.clients.contains(clientID) else {
            return oauthError(
                request, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
        }
        switch request["grant_type"] {
        case "urn:ietf:params:oauth:grant-type:device_code":
            guard let code = request["device_code"], let device = state.devices[code], device.clientID == clientID
            else {
                return oauthError(request, "incorrect_device_code", "The device_code provided is not valid.")
            }
            if device.expiresAt <= now(state) {
                state.devices[code] = nil
                return oauthError(request, "expired_token", "The device_code has expired.")
            }
            if device.denied {
                state.devices[code] = nil
                return oauthError(request, "access_denied", "The authorization request was denied.")
            }
            if consume(.slowDown, &state) != nil {
                state.devices[code]?.interval += 5
                var response = oauthError(
                    request, "slow_down", "Too many requests have been made in the same timeframe.")
                if var json = response.body.json?.objectValue,
                    (request.headers["Accept"] ?? "").contains("json")
                {
                    json["interval"] = .number(Double(device.interval + 5))
                    response = Reply.json(.object(json))
                }
                return response
            }
            guard let login = device.approvedFor else {
                return oauthError(request, "authorization_pending", "The authorization request is still pending.")
            }
            state.devices[code] = nil
            return issue(login: login, scopes: device.scopes, clientID: clientID, family: nil, request, &state)
        case "refresh_token":
            let (reply, refreshed) = refreshGrant(request, clientID: clientID, &state)
            state.families.count(refreshGranted: refreshed)
            return reply
        default:
            return oauthError(request, "unsupported_grant_type", "The grant type is not supported.")
        }
    }

    /// The refresh token grant, with rotation: each refresh token works once, and one that was
    /// rotated away and comes back revokes its whole family (RFC 9700 §4.14.2). Whether it
    /// issued new tokens comes back with the answer, whose errors are HTTP 200 as GitHub's.
    private func refreshGrant(
        _ request: LoopbackRequest, clientID: String, _ state: inout State
    ) -> (Reply, refreshed: Bool) {
        let refresh = request["refresh_token"] ?? ""
        // GitHub says the same of an unknown, used, revoked or expired refresh token.
        let refused = oauthError(request, "bad_refresh_token", "The refresh token passed is incorrect or expired.")
        // A used token revokes its family whichever client presents it: the server cannot tell
        // the thief from the owner.
        if let family = state.families.family(ofUsed: refresh) {
            revokeFamily(family, &state)
            return (refused, false)
        }
        guard let grant = state.refreshTokens[refresh], grant.clientID == clientID else { return (refused, false) }
        guard grant.expiresAt > now(state) else {
            state.refreshTokens[refresh] = nil
            state.families.forget(grant.family)
            return (refused, false)
        }
        state.refreshTokens[refresh] = nil
        state.families.retire(refresh, family: grant.family)
        let reply = issue(
            login: grant.login, scopes: grant.scopes, clientID: clientID, family: grant.family, request, &state)
        return (reply, true)
    }

    /// Revokes every user token and refresh token of `family`, as a provider that saw one of its
    /// used refresh tokens come back does.
    func revokeFamily(_ family: String, _ state: inout State) {
        state.refreshTokens = state.refreshTokens.filter { $0.value.family != family }
        state.tokens = state.tokens.filter { $0.value.family != family }
        state.families.revoke(family)
    }

    /// Issues a user token, and with expiring tokens a refresh token of `family` (a new family
    /// when `nil`: a device login).
    func issue(
        login: String, scopes: [String], clientID: String, family: String?, _ request: LoopbackRequest,
        _ state: inout State
    ) -> Reply {
        let token = (expiringTokens ? "ghu_" : "gho_") + Self.random()
        let issued = now(state)
        let family = expiringTokens ? (family ?? Self.random(12)) : nil
        state.tokens[token] = Token(
            login: login, scopes: scopes,
            expiresAt: expiringTokens ? issued.addingTimeInterval(accessTokenLifetime) : nil,
            clientID: clientID, isPersonal: false, family: family)
        var fields: [(String, JSONValue)] = [
            ("access_token", .string(token)), ("token_type", .string("bearer")),
            ("scope", .string(scopes.joined(separator: ","))),
        ]
        if let family {
            let refresh = "ghr_" + Self.random(48)
            state.refreshTokens[refresh] = Refresh(
                login: login, scopes: scopes, clientID: clientID,
                expiresAt: issued.addingTimeInterval(refreshTokenLifetime), family: family)
            fields += [
                ("expires_in", .number(accessTokenLifetime)), ("refresh_token", .string(refresh)),
                ("refresh_token_expires_in", .number(refreshTokenLifetime)),
            ]
        }
        return oauthAnswer(request, fields)
    }

    // MARK: Scenarios

    /// The scenario's setting when it is active, using up one of its count.
    func consume(_ scenario: GitHubScenario, _ state: inout State) -> GitHubScenarioSetting? {
        state.scenarios.consumeFirst { $0.scenario == scenario }
    }

    func activate(_ setting: GitHubScenarioSetting) {
        locked { $0.scenarios.append(Scenario(setting: setting, remaining: setting.count)) }
    }

    // MARK: Admin

    func admin(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let json = request.json
        func failure(_ text: String, status: Int = 400) -> Reply {
            Reply.json(.object(["error": .string(text)]), status: status)
        }
        switch (request.method, request.path) {
        case (.post, "/__sesame/scenarios"):
            guard let name = json?["scenario"]?.stringValue, let scenario = GitHubScenario(rawValue: name) else {
                return failure("Name a scenario: " + GitHubScenario.allCases.map(\.rawValue).joined(separator: ", "))
            }
            let setting = GitHubScenarioSetting(
                scenario, count: json?["count"]?.lenientInt, seconds: json?["seconds"]?.lenientInt,
                scope: json?["scope"]?.stringValue)
            state.scenarios.append(Scenario(setting: setting, remaining: setting.count))
            return Reply.json(.object(["scenario": .string(name)]), status: 201)
        case (.post, "/__sesame/device"):
            guard let userCode = json?["user_code"]?.stringValue,
                let code = state.devices.first(where: { $0.value.userCode == userCode })?.key
            else { return failure("No device login has that user_code.", status: 404) }
            guard let person = try? Self.person(json?["user"]?.stringValue, in: state) else {
                return failure("No such user.", status: 404)
            }
            if json?["action"]?.stringValue == "deny" {
                state.devices[code]?.denied = true
            } else {
                state.devices[code]?.approvedFor = person.login
            }
            return Reply.json(.object(["user_code": .string(userCode)]))
        case (.post, "/__sesame/tokens"):
            guard let person = try? Self.person(json?["user"]?.stringValue, in: state) else {
                return failure("No such user.", status: 404)
            }
            let scopes: [String]? =
                json?["kind"]?.stringValue == "fine-grained"
                ? nil
                : (json?["scopes"]?.arrayValue?.compactMap(\.stringValue)
                    ?? (json?["scopes"]?.stringValue ?? "repo,read:org").split(separator: ",").map {
                        $0.trimmingCharacters(in: .whitespaces)
                    })
            let token = (scopes == nil ? "github_pat_" : "ghp_") + Self.random()
            state.tokens[token] = Token(
                login: person.login, scopes: scopes,
                expiresAt: json?["expiresInDays"]?.doubleValue.map { now(state).addingTimeInterval($0 * 86_400) },
                clientID: nil, isPersonal: true)
            return Reply.json(.object(["token": .string(token), "login": .string(person.login)]), status: 201)
        default:
            return state.commonAdmin(request)
                ?? failure("No such admin endpoint.", status: 404)
        }
    }

    static func page(title: String, body: String) -> String {
        HTML.page(title: title, body: body, header: "GitHub <small>Sesame emulator: not the real GitHub</small>")
    }
}

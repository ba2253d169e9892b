import Foundation
import Sesame
import SesameEmulator

extension FacebookState {
    /// The admin API under `/__sesame/`: JSON in, JSON out. See <doc:AdminAPI>.
    func admin(_ request: EmulatorRequest, segments: [String]) -> Reply {
        do {
            try checkAdminOrigin(request)
            let body = try adminRoute(request, segments: segments)
            return adminResponse(body.value, status: body.status)
        } catch let error as GraphError {
            return adminResponse(error.envelope(traceID: Self.makeTraceID()), status: error.status)
        } catch let error as EmulatorError {
            return adminResponse(GraphError.admin(error.message).envelope(traceID: Self.makeTraceID()), status: 400)
        } catch {
            return adminResponse(GraphError.unknown.envelope(traceID: Self.makeTraceID()), status: 500)
        }
    }

    func adminResponse(_ value: JSONValue, status: Int) -> Reply {
        Reply(
            status: status, headers: ["Content-Type": "application/json; charset=UTF-8", "Cache-Control": "no-store"],
            body: .json(value))
    }

    private func adminRoute(_ request: EmulatorRequest, segments: [String]) throws -> (value: JSONValue, status: Int) {
        let method = request.method
        func ok(_ value: JSONValue, _ status: Int = 200) -> (value: JSONValue, status: Int) { (value, status) }
        switch (segments, method) {
        case ([], .get):
            return ok(Self.adminIndex)
        case (["health"], .get):
            return ok(.object(["ok": .bool(true)]))
        case (["scenarios"], .get):
            return ok(.object(["data": .array(scenarios.map(Self.json)), "available": Self.availableScenarios]))
        case (["scenarios"], .post):
            let setting = try Self.scenarioSetting(try adminBody(request))
            return ok(Self.json(activate(setting)), 201)
        case (["scenarios"], .delete):
            let count = scenarios.count
            scenarios.removeAll()
            return ok(.object(["success": .bool(true), "cleared": .int(count)]))
        case (let path, .delete) where path.count == 2 && path[0] == "scenarios":
            guard let index = scenarios.firstIndex(where: { $0.id == path[1] }) else {
                throw GraphError.admin("No active scenario has the id '\(path[1])'.", status: 404)
            }
            scenarios.remove(at: index)
            return ok(.object(["success": .bool(true)]))
        case (["dialogs"], .get):
            let list = dialogs.values.sorted { $0.createdAt < $1.createdAt }.map(dialogJSON)
            return ok(.object(["data": .array(list)]))
        case (["dialog", "approve"], .post), (["dialog", "deny"], .post):
            let body = try adminBody(request)
            let dialog = try selectDialog(body)
            let location = try completeDialog(
                dialog, userID: body["user"]?.stringValue, grant: try Self.names(body["grant"]),
                decline: try Self.names(body["decline"]), cancel: segments[1] == "deny")
            return ok(.object(["redirect": .string(location), "request_id": .string(dialog.id)]))
        case (["devices"], .get):
            let list = devices.values.sorted { $0.createdAt < $1.createdAt }.map(deviceJSON)
            return ok(.object(["data": .array(list)]))
        case (["device", "approve"], .post), (["device", "deny"], .post):
            let body = try adminBody(request)
            guard let userCode = body["user_code"]?.stringValue else {
                throw GraphError.admin("Give the device's user_code.")
            }
            let approve = segments[1] == "approve"
            let result = try answerDevice(
                userCode: userCode, userID: body["user"]?.stringValue, grant: try Self.names(body["grant"]),
                decline: try Self.names(body["decline"]), approve: approve)
            return ok(
                .object([
                    "success": .bool(true), "granted": .array(result.granted.map { .string($0) }),
                    "declined": .array(result.declined.map { .string($0) }),
                ]))
        case (["users"], .get):
            return ok(.object(["data": .array(userOrder.compactMap { users[$0] }.map(Self.json))]))
        case (["users"], .post):
            return ok(Self.json(try createUser(try adminBody(request))), 201)
        case (["tokens"], .post):
            return ok(try adminToken(try adminBody(request)), 201)
        case (["clock"], .get):
            return ok(clockJSON())
        case (["clock"], .post):
            let body = try adminBody(request)
            guard let seconds = body["advance_seconds"]?.doubleValue, seconds >= 0, seconds <= 10 * 365 * 86_400 else {
                throw GraphError.admin("Give advance_seconds: a number of seconds from 0 to ten years.")
            }
            advanceClock(by: seconds)
            return ok(clockJSON())
        case (["apps"], .get):
            return ok(.object(["data": .array(configuration.apps.compactMap { apps[$0.id] }.map(Self.json))]))
        case (["reset"], .post):
            reset()
            return ok(.object(["success": .bool(true)]))
        default:
            throw GraphError.admin(
                "The admin API has no \(method.rawValue) /__sesame/\(segments.joined(separator: "/")). "
                    + "GET /__sesame/ lists what it has.", status: 404)
        }
    }

    /// Refuses what a web page could send: a `Host` that is not loopback (DNS rebinding), and a
    /// change without a JSON content type (a cross-site form post, which needs no CORS preflight).
    func checkAdminOrigin(_ request: EmulatorRequest) throws {
        if let host = request.headers["Host"], !Self.isLoopbackHost(host) {
            throw GraphError.admin("The admin API answers only requests to 127.0.0.1 or localhost.", status: 403)
        }
        if request.method != .get, request.method != .head, request.contentType != "application/json" {
            throw GraphError.admin(
                "Admin requests that change something need Content-Type: application/json (even with no body).",
                status: 415)
        }
    }

    static let adminIndex: JSONValue = .object([
        "endpoints": .array(
            [
                "GET /__sesame/health", "GET /__sesame/scenarios", "POST /__sesame/scenarios",
                "DELETE /__sesame/scenarios", "DELETE /__sesame/scenarios/{id}", "GET /__sesame/dialogs",
                "POST /__sesame/dialog/approve", "POST /__sesame/dialog/deny", "GET /__sesame/devices",
                "POST /__sesame/device/approve", "POST /__sesame/device/deny", "GET /__sesame/users",
                "POST /__sesame/users", "POST /__sesame/tokens", "GET /__sesame/clock", "POST /__sesame/clock",
                "GET /__sesame/apps", "POST /__sesame/reset",
            ].map { .string($0) })
    ])

    static let availableScenarios: JSONValue = .array(
        EmulatorScenario.allCases.map {
            .object(["name": .string($0.rawValue), "summary": .string($0.summary)])
        })

    /// The request's JSON object body (an empty body is an empty object).
    func adminBody(_ request: EmulatorRequest) throws -> [String: JSONValue] {
        if request.body.isEmpty { return [:] }
        guard request.body.count <= 65_536 else { throw GraphError.admin("The body is larger than 64 KiB.") }
        guard case .object(let members)? = request.jsonBody else {
            throw GraphError.admin("The body must be a JSON object.")
        }
        return members
    }

    /// A list of permission names, or `nil` when absent.
    static func names(_ value: JSONValue?) throws -> [String]? {
        guard let value, value != .null else { return nil }
        if let text = value.stringValue { return splitList(text) }
        guard let list = value.arrayValue, list.count <= 100 else {
            throw GraphError.admin("A permission list must be an array of names (or a comma-separated string).")
        }
        return try list.map {
            guard let name = $0.stringValue else { throw GraphError.admin("Permission names are strings.") }
            return name
        }
    }

    static func scenarioSetting(_ body: [String: JSONValue]) throws -> ScenarioSetting {
        guard let name = body["scenario"]?.stringValue else {
            throw GraphError.admin("Give the scenario's name in \"scenario\". GET /__sesame/scenarios lists them.")
        }
        guard let scenario = EmulatorScenario(rawValue: name) else {
            throw GraphError.admin(EmulatorError.unknownScenario(name).message)
        }
        let known: Set<String> = [
            "scenario", "user", "count", "delayMs", "permission", "regainAccessMinutes", "path",
        ]
        if let unknown = body.keys.sorted().first(where: { !known.contains($0) }) {
            throw GraphError.admin(
                "Unknown scenario option '\(unknown)'; known: \(known.sorted().joined(separator: ", ")).")
        }
        func integer(_ key: String) throws -> Int? {
            guard let value = body[key], value != .null else { return nil }
            guard let number = value.lenientInt else { throw GraphError.admin("\(key) must be a whole number.") }
            return number
        }
        func text(_ key: String) throws -> String? {
            guard let value = body[key], value != .null else { return nil }
            if let number = value.lenientInt, key == "user" { return String(number) }
            guard let string = value.stringValue else { throw GraphError.admin("\(key) must be a string.") }
            return string
        }
        let setting = ScenarioSetting(
            scenario, user: try text("user"), count: try integer("count"), delayMs: try integer("delayMs"),
            permission: try text("permission"), regainAccessMinutes: try integer("regainAccessMinutes"),
            path: try text("path"))
        try setting.validate()
        return setting
    }

    static func json(_ active: ActiveScenario) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(active.id), "scenario": .string(active.setting.scenario.rawValue),
        ]
        if let user = active.setting.user { object["user"] = .string(user) }
        if let count = active.setting.count { object["count"] = .int(count) }
        if let remaining = active.remaining { object["remaining"] = .int(remaining) }
        if let delay = active.setting.delayMs { object["delayMs"] = .int(delay) }
        if let permission = active.setting.permission { object["permission"] = .string(permission) }
        if let minutes = active.setting.regainAccessMinutes { object["regainAccessMinutes"] = .int(minutes) }
        if let path = active.setting.path { object["path"] = .string(path) }
        return .object(object)
    }

    static func json(_ user: EmulatedUser) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(user.id), "name": .string(user.name), "email": .string(user.email),
            "is_test_user": .bool(user.isTestUser),
        ]
        if let app = user.testUserAppID { object["app_id"] = .string(app) }
        return .object(object)
    }

    static func json(_ app: EmulatedApp) -> JSONValue {
        .object([
            "id": .string(app.id), "name": .string(app.name), "secret": .string(app.secret),
            "client_token": .string(app.clientToken), "redirect_uris": .array(app.redirectURIs.map { .string($0) }),
            "allows_loopback_redirects": .bool(app.allowsLoopbackRedirects),
        ])
    }

    func dialogJSON(_ dialog: PendingDialog) -> JSONValue {
        var object: [String: JSONValue] = [
            "request_id": .string(dialog.id), "app_id": .string(dialog.appID),
            "redirect_uri": .string(dialog.redirectURI), "scope": .array(dialog.requested.map { .string($0) }),
            "created_time": .string(Self.graphTime(dialog.createdAt)),
        ]
        if let state = dialog.state { object["state"] = .string(state) }
        if let authType = dialog.authType { object["auth_type"] = .string(authType) }
        return .object(object)
    }

    func deviceJSON(_ record: DeviceRecord) -> JSONValue {
        let status: String
        switch record.status {
        case .pending: status = now < record.expiresAt ? "pending" : "expired"
        case .approved: status = "approved"
        case .declined: status = "declined"
        case .consumed: status = "consumed"
        }
        return .object([
            "user_code": .string(record.userCode), "app_id": .string(record.appID),
            "scope": .array(record.scopes.map { .string($0) }), "status": .string(status),
            "expires_time": .string(Self.graphTime(record.expiresAt)),
        ])
    }

    func clockJSON() -> JSONValue {
        .object([
            "now": .int(Int(now.timeIntervalSince1970)), "offset_seconds": .number(clockOffset),
            "now_time": .string(Self.graphTime(now)),
        ])
    }

    /// The pending dialog named by `request_id` or `state`, or opened now from `url`.
    func selectDialog(_ body: [String: JSONValue]) throws -> PendingDialog {
        if let id = body["request_id"]?.stringValue {
            guard let dialog = dialogs[id] else {
                throw GraphError.admin("No login dialog is waiting with request_id '\(id)'.", status: 404)
            }
            return dialog
        }
        if let state = body["state"]?.stringValue {
            guard let dialog = dialogs.values.filter({ $0.state == state }).max(by: { $0.createdAt < $1.createdAt })
            else { throw GraphError.admin("No login dialog is waiting with that state.", status: 404) }
            return dialog
        }
        if let text = body["url"]?.stringValue {
            guard let components = URLComponents(string: text),
                components.path.hasSuffix("/dialog/oauth")
            else { throw GraphError.admin("url must be a login dialog URL (…/dialog/oauth?client_id=…).") }
            do {
                return try openDialog(Parameters(FormEncoding.decode(components.percentEncodedQuery ?? "")))
            } catch DialogFailure.page(let title, let message) {
                throw GraphError.admin("\(title): \(message)")
            } catch DialogFailure.redirect(let location) {
                throw GraphError.admin("The dialog refused the request and redirects to: \(location)")
            }
        }
        throw GraphError.admin("Name the dialog with request_id, state or url.")
    }

    func createUser(_ body: [String: JSONValue]) throws -> EmulatedUser {
        guard users.count < limits.maxUsers else { throw GraphError.admin("The emulator holds its limit of people.") }
        guard let name = body["name"]?.stringValue, !name.isEmpty, name.count <= 100 else {
            throw GraphError.admin("Give the person's name (1 to 100 characters).")
        }
        var id = try makeUserID()
        if let requested = body["id"]?.stringValue {
            guard !requested.isEmpty, requested.count <= 20, requested.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw GraphError.admin("A user id is 1 to 20 digits.")
            }
            guard users[requested] == nil, apps[requested] == nil else {
                throw GraphError.admin("The id \(requested) is taken.", status: 409)
            }
            id = requested
        }
        let user = EmulatedUser(
            id: id, name: name, email: body["email"]?.stringValue, birthday: body["birthday"]?.stringValue)
        addUser(user)
        return user
    }

    func adminToken(_ body: [String: JSONValue]) throws -> JSONValue {
        let appID = body["app"]?.stringValue ?? defaultApp.id
        guard apps[appID] != nil else { throw GraphError.admin("There is no app with the id '\(appID)'.", status: 404) }
        let userID = body["user"]?.stringValue ?? dialogUser(nil, appID: appID)?.id ?? ""
        guard let user = users[userID] else {
            throw GraphError.admin("There is no person with the id '\(userID)'.", status: 404)
        }
        let permissions = try PermissionCatalogue.checked(try Self.names(body["permissions"]) ?? [])
        let declined = try Self.names(body["declined"]) ?? []
        recordLogin(appID: appID, userID: user.id, granted: permissions, declined: declined, audience: .allFriends)
        let record = try issueUserToken(
            appID: appID, userID: user.id, longLived: body["long_lived"]?.boolValue ?? false)
        var answer = tokenAnswer(record).body.objectValue ?? [:]
        answer["user_id"] = .string(user.id)
        answer["app_id"] = .string(appID)
        return .object(answer)
    }

    /// Forgets everything but the configuration: people, tokens, grants, posts, codes, scenarios, time.
    func reset() {
        users = [:]
        userOrder = []
        tokens = TokenTable()
        grants = [:]
        posts = [:]
        codes = [:]
        dialogs = [:]
        devices = [:]
        userCodes = [:]
        scenarios = []
        installedCount = [:]
        clockOffset = 0
        usage.withLock { $0 = UsageMeter() }
        for user in configuration.users { addUser(user) }
        markDirty()
    }
}

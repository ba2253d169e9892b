import Foundation
import Sesame
import SesameEmulator

extension FacebookState {
    /// `GET|POST /{app-id}/accounts/test-users`, with the app's token.
    func testUsers(_ context: GraphContext, appID: String) throws -> GraphAnswer {
        let caller = try requireCaller(context, forMe: false)
        guard caller.kind == .app, caller.appID == appID else { throw GraphError.appTokenRequired }
        switch context.method {
        case .post: return try createTestUser(context, appID: appID)
        case .get: return try listTestUsers(context, appID: appID)
        default: throw GraphError.unsupportedMethod(context.method)
        }
    }

    func createTestUser(_ context: GraphContext, appID: String) throws -> GraphAnswer {
        let parameters = context.parameters
        let existing = users.values.filter { $0.testUserAppID == appID }.count
        guard existing < limits.maxTestUsersPerApp else { throw GraphError.tooManyTestUsers }
        guard users.count < limits.maxUsers else {
            throw GraphError.invalidParameter("The emulator holds its limit of \(limits.maxUsers) people.")
        }
        let installed = parameters.bool("installed", default: true)
        let permissions = try PermissionCatalogue.checked(splitList(parameters["permissions"]))
        let id = try makeUserID()
        var name = parameters.nonEmpty("name") ?? "Open Graph Test User"
        guard name.count <= 100 else { throw GraphError.invalidParameter("The name is longer than 100 characters.") }
        name = name.filter { !$0.isNewline }
        var user = EmulatedUser(id: id, name: name, email: "\(Self.emailName(name))_\(id.suffix(6))@tfbnw.net")
        user.testUserAppID = appID
        user.password = try Crypto.randomURLSafeString(byteCount: 12)
        addUser(user)
        var body: [String: JSONValue] = [
            "id": .string(id),
            "login_url": .string("\(origin(for: context.request))/test-user-login/\(id)"),
            "email": .string(user.email),
            "password": .string(user.password ?? ""),
        ]
        if installed {
            recordLogin(appID: appID, userID: id, granted: permissions, declined: [], audience: .allFriends)
            let token = try issueUserToken(appID: appID, userID: id, longLived: false)
            body["access_token"] = .string(token.token)
        }
        return GraphAnswer(body: .object(body))
    }

    static func emailName(_ name: String) -> String {
        let letters = name.lowercased().map { $0.isLetter && $0.isASCII ? $0 : "_" }
        return String(String(letters).prefix(30))
    }

    func listTestUsers(_ context: GraphContext, appID: String) throws -> GraphAnswer {
        var limit = 50
        if let text = context.parameters.nonEmpty("limit") {
            guard let value = Int(text), value >= 1 else {
                throw GraphError.invalidParameter("The parameter limit must be a positive whole number.")
            }
            limit = min(value, 500)
        }
        let all = userOrder.compactMap { users[$0] }.filter { $0.testUserAppID == appID }
        var start = 0
        if let after = context.parameters.nonEmpty("after") {
            guard let data = Base64URL.decode(after), let index = Int(String(decoding: data, as: UTF8.self)),
                index >= 0
            else { throw GraphError.invalidParameter("The after cursor is not valid.") }
            start = min(index, all.count)
        }
        let page = all[start..<min(all.count, start + limit)]
        let origin = origin(for: context.request)
        let data: [JSONValue] = page.map { user in
            var entry: [String: JSONValue] = [
                "id": .string(user.id), "login_url": .string("\(origin)/test-user-login/\(user.id)"),
            ]
            // Facebook lists a token for test users who installed the app.
            if grant(appID: appID, userID: user.id)?.isInstalled == true,
                let token = tokens.values.filter({ $0.userID == user.id && $0.appID == appID })
                    .max(by: { $0.serial < $1.serial }),
                tokenProblem(token, consumeScenarios: false) == nil
            {
                entry["access_token"] = .string(token.token)
            }
            return .object(entry)
        }
        var body: [String: JSONValue] = ["data": .array(data)]
        if !page.isEmpty {
            let before = Base64URL.encode(Data(String(start).utf8))
            let after = Base64URL.encode(Data(String(start + page.count).utf8))
            var paging: [String: JSONValue] = [
                "cursors": .object(["before": .string(before), "after": .string(after)])
            ]
            if start + page.count < all.count {
                var items: [(String, String)] = []
                if context.parameters["access_token"] != nil, let token = context.caller?.token {
                    items.append(("access_token", token))
                }
                items += [("limit", String(limit)), ("after", after)]
                paging["next"] = .string(
                    FormWriter.appending(items, to: "\(origin)\(context.versionPrefix)/\(appID)/accounts/test-users"))
            }
            body["paging"] = .object(paging)
        }
        return GraphAnswer(body: .object(body))
    }

    /// `DELETE /{test-user-id}` with the app's token or the test user's own.
    func deleteTestUser(_ context: GraphContext, userID: String, caller: Caller) throws -> GraphAnswer {
        guard let user = users[userID], let appID = user.testUserAppID else {
            throw GraphError.unsupported(.delete, id: userID)
        }
        let allowed =
            (caller.kind == .app && caller.appID == appID) || (caller.kind == .user && caller.userID == userID)
        guard allowed else { throw GraphError.appTokenRequired }
        removeUser(userID)
        return GraphAnswer(body: .object(["success": .bool(true)]))
    }
}

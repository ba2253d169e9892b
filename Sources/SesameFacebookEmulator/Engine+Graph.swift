import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

extension FacebookState {
    // MARK: - Routing

    func route(_ context: inout GraphContext) throws -> GraphAnswer {
        let segments = context.segments
        let method = context.method
        guard let first = segments.first else {
            if method == .get, context.parameters["ids"] != nil || context.parameters["id"] != nil {
                return try multiRead(context)
            }
            if method == .post, context.parameters["batch"] != nil { return try batch(context) }
            if method == .post { throw GraphError.invalidParameter("The parameter batch is required") }
            throw GraphError.unsupported(method, id: "")
        }
        switch first {
        case "oauth":
            guard segments == ["oauth", "access_token"] else {
                throw GraphError.unknownPath(pathText(segments.dropFirst()))
            }
            guard method != .delete else { throw GraphError.unsupportedMethod(method) }
            return try tokenEndpoint(context)
        case "debug_token":
            guard segments.count == 1 else { throw GraphError.unknownPath(pathText(segments.dropFirst())) }
            guard method == .get else { throw GraphError.unsupportedMethod(method) }
            return try debugToken(context)
        case "device" where segments.count == 2 && segments[1] == "login":
            guard method == .post else { throw GraphError.unsupportedMethod(method) }
            return try deviceLogin(context)
        case "device" where segments.count == 2 && segments[1] == "login_status":
            guard method == .post else { throw GraphError.unsupportedMethod(method) }
            return try deviceLoginStatus(context)
        case "me":
            let caller = try requireCaller(context, forMe: true)
            guard caller.kind == .user, let userID = caller.userID else { throw GraphError.activeTokenRequired }
            return try userRoute(context, userID: userID, rest: Array(segments.dropFirst()), pathName: "me")
        case "app":
            guard segments.count == 1, method == .get else { throw GraphError.unsupported(method, id: "app") }
            let caller = try requireCaller(context, forMe: false)
            return try appNode(context, appID: caller.appID)
        default:
            if apps[first] != nil { return try appRoute(context, appID: first, rest: Array(segments.dropFirst())) }
            if users[first] != nil {
                return try userRoute(context, userID: first, rest: Array(segments.dropFirst()), pathName: first)
            }
            if segments.count == 1, let post = findPost(first) { return try postRoute(context, post: post) }
            throw GraphError.unsupported(method, id: first)
        }
    }

    /// `GET /?ids=a,b` (an object keyed by id, failing whole when one fails, as Facebook does) and
    /// `GET /?id=x` (the object itself); a URL as an id reads the URL's share counts.
    func multiRead(_ context: GraphContext) throws -> GraphAnswer {
        if let single = context.parameters.nonEmpty("id"), context.parameters["ids"] == nil {
            return try objectAnswer(context, id: single)
        }
        let ids = (context.parameters["ids"] ?? "").split(separator: ",").map { $0.trimmedASCII }.filter {
            !$0.isEmpty
        }
        guard !ids.isEmpty else { throw GraphError.invalidParameter("The parameter ids is empty.") }
        guard ids.count <= 50 else {
            throw GraphError.invalidParameter("The parameter ids names more than 50 objects.")
        }
        var result: [String: JSONValue] = [:]
        for id in ids where result[id] == nil { result[id] = try objectAnswer(context, id: id).body }
        return GraphAnswer(body: .object(result))
    }

    private func objectAnswer(_ context: GraphContext, id: String) throws -> GraphAnswer {
        let lowered = id.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            return GraphAnswer(
                body: .object([
                    "id": .string(id), "share": .object(["comment_count": .int(0), "share_count": .int(0)]),
                ]))
        }
        var item = context
        item.segments = id.split(separator: "/").map(String.init)
        guard !item.segments.isEmpty else { throw GraphError.unsupported(.get, id: id) }
        return try route(&item)
    }

    /// The version that serves a call to `versionPrefix` at `date`: the one in its path, written
    /// `vN.M`, unless it has ended (or is older than every version Facebook lists), when it is
    /// the oldest version still available. The platform versioning guide
    /// (https://developers.facebook.com/docs/apps/versions): "once a version is no longer usable,
    /// any calls made to it will be defaulted to the next oldest, usable version". `nil` for an
    /// unversioned call (the emulator's default serves it).
    static func servedVersion(_ versionPrefix: String, at date: Date) -> String? {
        guard versionPrefix.hasPrefix("/") else { return nil }
        var version = String(versionPrefix.dropFirst())
        if !version.utf8.contains(UInt8(ascii: ".")) { version += ".0" }
        if case .ended = GraphAPIVersions.standing(of: version, at: date) {
            return GraphAPIVersions.oldestAvailable(at: date).name
        }
        return version
    }

    /// What every Graph answer gets last: `facebook-api-version` naming the version that served
    /// it, and status 200 for errors when the caller asked for `suppress_http_code=1`. It needs
    /// no state: the engine applies it after releasing the lock.
    ///
    /// In place: the reply's headers are changed where they are, with no copy of them.
    static func finish(
        _ outcome: inout PendingOutcome, _ request: EmulatorRequest, versionPrefix: String, graphVersion: String
    ) {
        guard outcome.reply != nil else { return }
        outcome.graphVersionPrefix = nil
        outcome.reply?.headers["facebook-api-version"] = outcome.servedGraphVersion ?? graphVersion
        // The first `suppress_http_code`: in the query, else in the form as it was decoded before
        // the lock (no copy of the query per call).
        let name = "suppress_http_code"
        var suppress = request.query.first { $0.0 == name }?.1
        if suppress == nil, !request.body.isEmpty, request.contentType == "application/x-www-form-urlencoded" {
            suppress = request.formPairs()?.first { $0.0 == name }?.1
        }
        if let suppress, Parameters.isTrue(suppress) { outcome.reply?.status = 200 }
    }

    func pathText(_ rest: some Collection<String>) -> String { "/" + rest.joined(separator: "/") }

    /// The caller, or the error that stands for its token: the token's refusal, or a missing token.
    func requireCaller(_ context: GraphContext, forMe: Bool) throws -> Caller {
        if let error = context.tokenError { throw error }
        guard let caller = context.caller else {
            throw forMe ? GraphError.activeTokenRequired : GraphError.tokenRequired
        }
        return caller
    }

    /// How much of a person's data the caller may see.
    enum Access { case own, app, publicOnly }

    func access(of caller: Caller, to userID: String) -> Access {
        switch caller.kind {
        case .user: return caller.userID == userID ? .own : .publicOnly
        case .app:
            let installed = grant(appID: caller.appID, userID: userID)?.isInstalled ?? false
            return installed || users[userID]?.testUserAppID == caller.appID ? .app : .publicOnly
        case .client: return .publicOnly
        }
    }

    // MARK: - People

    func userRoute(_ context: GraphContext, userID: String, rest: [String], pathName: String) throws -> GraphAnswer {
        let caller = try requireCaller(context, forMe: false)
        let access = access(of: caller, to: userID)
        let method = context.method
        guard let edge = rest.first else {
            switch method {
            case .get: return GraphAnswer(body: try userNode(context, userID: userID, caller: caller, access: access))
            case .delete: return try deleteTestUser(context, userID: userID, caller: caller)
            default: throw GraphError.unsupported(method, id: userID)
            }
        }
        switch (edge, rest.count) {
        case ("permissions", 1), ("permissions", 2):
            guard access != .publicOnly else { throw GraphError.unsupported(method, id: userID) }
            return try permissionsEdge(
                context, userID: userID, appID: caller.appID, name: rest.count == 2 ? rest[1] : nil)
        case ("feed", 1):
            switch method {
            case .get:
                guard access != .publicOnly else { throw GraphError.unsupported(method, id: userID) }
                return try feed(context, userID: userID, appID: caller.appID, pathName: pathName)
            case .post:
                guard access == .own else { throw GraphError.notAuthorizedToPublish }
                return try publish(context, userID: userID, appID: caller.appID)
            default: throw GraphError.unsupportedMethod(method)
            }
        case ("picture", 1):
            guard method == .get else { throw GraphError.unsupportedMethod(method) }
            return picture(userID: userID)
        default:
            throw GraphError.unknownPath(pathText(rest))
        }
    }

    /// `text` (a `fields` parameter) parsed, or `defaults` when it is missing or blank: from
    /// ``parsedFieldLists`` when it was parsed before. A list that fails to parse is not kept.
    func fieldList(_ text: String?, defaults: [String]) throws -> FieldList {
        guard let text, !text.trimmedASCII.isEmpty else { return FieldList(names: defaults) }
        // A list of bare names (`id,name,email`) is split at once, cheaper than the cache's lock,
        // which every server thread would take on every call.
        if let names = try FieldList.parseNames(text, limit: limits.maxFields) { return names }
        if let parsed = parsedFieldLists.withLock({ $0[text] }) { return parsed }
        let parsed = try FieldList.parse(text, defaults: defaults, limit: limits.maxFields)
        parsedFieldLists.withLock { lists in
            if lists.count >= 256 { lists.removeAll(keepingCapacity: true) }
            lists[text] = parsed
        }
        return parsed
    }

    func userNode(_ context: GraphContext, userID: String, caller: Caller, access: Access) throws -> JSONValue {
        guard let user = users[userID] else { throw GraphError.unsupported(.get, id: userID) }
        let fields = try fieldList(context.parameters["fields"], defaults: ["id", "name"])
        // Worked out when a field needs it (a plain `id,name` does not). A list, not a set: a
        // person grants a few permissions, and a set cost an allocation and a hash per name.
        var grantedList: [String]?
        func isGranted(_ permission: String) -> Bool {
            if grantedList == nil { grantedList = effectivePermissions(appID: caller.appID, userID: userID).granted }
            return grantedList!.contains(permission)
        }
        var node = [String: JSONValue](minimumCapacity: fields.entries.count)
        for entry in fields.entries {
            let field = entry.name
            switch field {
            case "id": node["id"] = .string(user.id)
            case "name": node["name"] = .string(user.name)
            case "first_name": node["first_name"] = .string(user.firstName)
            case "last_name": node["last_name"] = .string(user.lastName)
            case "short_name": node["short_name"] = .string(user.firstName)
            case "name_format": node["name_format"] = .string("{first} {last}")
            case "email":
                if access != .publicOnly, isGranted("email") { node["email"] = .string(user.email) }
            case "birthday":
                if access != .publicOnly, isGranted("user_birthday"), let birthday = user.birthday {
                    node["birthday"] = .string(birthday)
                }
            case "installed":
                if access != .publicOnly {
                    node["installed"] = .bool(grant(appID: caller.appID, userID: userID)?.isInstalled ?? false)
                }
            case "picture":
                var data: [String: JSONValue] = [
                    "height": .int(50), "width": .int(50), "is_silhouette": .bool(true),
                    "url": .string("\(origin(for: context.request))\(context.versionPrefix)/\(user.id)/picture"),
                ]
                if let subfields = entry.subfields {
                    let wanted = try FieldList.parse(subfields, defaults: [], limit: limits.maxFields).names
                    for name in wanted where data[name] == nil {
                        throw GraphError.nonexistingField(name, node: "ProfilePictureSource")
                    }
                    data = data.filter { wanted.contains($0.key) }
                }
                node["picture"] = .object(["data": .object(data)])
            case "permissions":
                if access != .publicOnly {
                    var entries = permissionEntries(appID: caller.appID, userID: userID)
                    if let limit = try entry.limit() { entries = Array(entries.prefix(limit)) }
                    node["permissions"] = .object(["data": .array(entries)])
                }
            case "feed", "posts":
                // Field expansion of the feed edge: `feed.limit(2){message}`.
                if access != .publicOnly {
                    var edge = context
                    var pairs: [(String, String)] = []
                    if let subfields = entry.subfields { pairs.append(("fields", subfields)) }
                    if let limit = try entry.limit() { pairs.append(("limit", String(max(limit, 1)))) }
                    if let token = context.parameters["access_token"] { pairs.append(("access_token", token)) }
                    edge.parameters = Parameters(pairs)
                    node[field] = try feed(edge, userID: userID, appID: caller.appID, pathName: userID).body
                }
            default: throw GraphError.nonexistingField(field, node: "User")
            }
        }
        return .object(node)
    }

    /// A small SVG with the person's initials, so `picture.url` leads somewhere on loopback.
    func picture(userID: String) -> GraphAnswer {
        let user = users[userID]
        let initials = [user?.firstName.first, user?.lastName.first].compactMap { $0 }.map(String.init).joined()
        let svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><rect width="50" height="50" fill="#4267b2"/>\
            <text x="25" y="32" font-family="sans-serif" font-size="20" fill="#fff" text-anchor="middle">\
            \(HTML.escape(initials))</text></svg>
            """
        // The answer's body is JSON everywhere else; a picture is the one exception.
        return GraphAnswer(body: .null, headers: ["Content-Type": "image/svg+xml"], rawBody: Data(svg.utf8))
    }

    // MARK: - Permissions

    func permissionEntries(appID: String, userID: String, only name: String? = nil) -> [JSONValue] {
        let (granted, declined) = effectivePermissions(appID: appID, userID: userID)
        let entries =
            granted.map { ($0, "granted") } + declined.filter { !granted.contains($0) }.map { ($0, "declined") }
        return entries.filter { name == nil || $0.0 == name }.map {
            .object(["permission": .string($0.0), "status": .string($0.1)])
        }
    }

    func permissionsEdge(_ context: GraphContext, userID: String, appID: String, name: String?) throws -> GraphAnswer {
        switch context.method {
        case .get:
            return GraphAnswer(
                body: .object(["data": .array(permissionEntries(appID: appID, userID: userID, only: name))]))
        case .delete:
            if let name {
                guard name != "public_profile" else {
                    throw GraphError.invalidParameter(
                        "public_profile cannot be revoked on its own; DELETE /me/permissions removes the app.")
                }
                guard PermissionCatalogue.isKnown(name) else {
                    throw GraphError.invalidParameter("Invalid permission: \(name)")
                }
                let key = GrantKey(appID: appID, userID: userID)
                if var record = grants[key], record.isInstalled {
                    record.decline([name])
                    grants[key] = record
                    markDirty()
                }
            } else {
                removeApp(appID: appID, userID: userID)
            }
            return GraphAnswer(body: .object(["success": .bool(true)]))
        default:
            throw GraphError.unsupportedMethod(context.method)
        }
    }

    // MARK: - Posts

    func findPost(_ id: String) -> PostRecord? {
        guard let underscore = id.firstIndex(of: "_") else { return nil }
        let userID = String(id[..<underscore])
        guard let number = Int(id[id.index(after: underscore)...]), let list = posts[userID] else { return nil }
        return binarySearch(list, number: number).flatMap { list[$0].id == id ? list[$0] : nil }
    }

    func binarySearch(_ list: [PostRecord], number: Int) -> Int? {
        var low = 0
        var high = list.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if list[middle].number == number { return middle }
            if list[middle].number < number { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    func publish(_ context: GraphContext, userID: String, appID: String) throws -> GraphAnswer {
        let publishPermission = PermissionCatalogue.publishPermission
        let (granted, _) = effectivePermissions(appID: appID, userID: userID)
        guard granted.contains(publishPermission) else {
            if grant(appID: appID, userID: userID)?.granted.contains(publishPermission) == true {
                consumeRevocation(of: publishPermission, userID: userID)
            }
            throw GraphError.notAuthorizedToPublish
        }
        let parameters = context.parameters
        let message = parameters["message"] ?? ""
        let link = parameters.nonEmpty("link")
        guard !message.trimmedASCII.isEmpty || link != nil else {
            throw GraphError.missingMessage
        }
        guard message.count <= limits.maxMessageCharacters else {
            throw GraphError.invalidParameter("The message is longer than \(limits.maxMessageCharacters) characters.")
        }
        if let link {
            guard link.count <= 2048, let url = URL(string: link),
                ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host != nil
            else { throw GraphError.invalidParameter("The parameter link must be an http or https URL.") }
        }
        let allowed = grant(appID: appID, userID: userID)?.audience ?? .allFriends
        var audience = allowed
        if let privacy = parameters.nonEmpty("privacy") {
            guard let value = JSONValue(parsing: Data(privacy.utf8))?["value"]?.stringValue,
                let requested = Audience(rawValue: value.uppercased())
            else {
                throw GraphError.invalidParameter(
                    "privacy must be a JSON object such as {\"value\":\"SELF\"}; value is one of EVERYONE, "
                        + "FRIENDS_OF_FRIENDS, ALL_FRIENDS, SELF.")
            }
            audience = min(requested, allowed)
        }
        if let last = posts[userID]?.last, last.message == message, last.link == link { throw GraphError.duplicatePost }
        let number = nextPostNumber
        nextPostNumber += 1
        let post = PostRecord(
            id: "\(userID)_\(number)", number: number, userID: userID, appID: appID, message: message, link: link,
            audience: audience, createdAt: now)
        posts[userID, default: []].append(post)
        if let count = posts[userID]?.count, count > limits.maxPostsPerUser {
            posts[userID]?.removeFirst(count - limits.maxPostsPerUser)
        }
        markDirty()
        return GraphAnswer(body: .object(["id": .string(post.id)]))
    }

    func postFields(_ post: PostRecord, fields: FieldList) throws -> JSONValue {
        var node: [String: JSONValue] = [:]
        for field in fields.names {
            switch field {
            case "id": node["id"] = .string(post.id)
            case "message": if !post.message.isEmpty { node["message"] = .string(post.message) }
            case "created_time": node["created_time"] = .string(Self.graphTime(post.createdAt))
            case "updated_time": node["updated_time"] = .string(Self.graphTime(post.createdAt))
            case "link": if let link = post.link { node["link"] = .string(link) }
            case "privacy":
                node["privacy"] = .object([
                    "value": .string(post.audience.rawValue), "description": .string(post.audience.description),
                    "friends": .string(""), "allow": .string(""), "deny": .string(""),
                ])
            case "from":
                node["from"] = .object(["id": .string(post.userID), "name": .string(users[post.userID]?.name ?? "")])
            case "application":
                node["application"] = .object([
                    "id": .string(post.appID), "name": .string(apps[post.appID]?.name ?? ""),
                ])
            default: throw GraphError.nonexistingField(field, node: "Post")
            }
        }
        return .object(node)
    }

    static func graphTime(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { String(value ?? 0).leftPadded(2) }
        return "\(c.year ?? 1970)-\(two(c.month))-\(two(c.day))T\(two(c.hour)):\(two(c.minute)):\(two(c.second))+0000"
    }

    func feed(_ context: GraphContext, userID: String, appID: String, pathName: String) throws -> GraphAnswer {
        let parameters = context.parameters
        let fields = try fieldList(parameters["fields"], defaults: ["created_time", "message", "id"])
        var limit = 25
        if let text = parameters.nonEmpty("limit") {
            guard let value = Int(text), value >= 1 else {
                throw GraphError.invalidParameter("The parameter limit must be a positive whole number.")
            }
            limit = min(value, 100)
        }
        func cursor(_ name: String) throws -> Int? {
            guard let text = parameters.nonEmpty(name) else { return nil }
            guard let data = Base64URL.decode(text), let number = Int(String(decoding: data, as: UTF8.self)) else {
                throw GraphError.invalidParameter("The \(name) cursor is not valid.")
            }
            return number
        }
        let after = try cursor("after")
        let before = try cursor("before")
        let seesAll = effectivePermissions(appID: appID, userID: userID).granted.contains("user_posts")
        // Newest first.
        let visible = (posts[userID] ?? []).reversed().filter { seesAll || $0.appID == appID }
        let page: [PostRecord]
        if let after {
            page = Array(visible.lazy.filter { $0.number < after }.prefix(limit))
        } else if let before {
            page = Array(visible.filter { $0.number > before }.suffix(limit))
        } else {
            page = Array(visible.prefix(limit))
        }
        var body: [String: JSONValue] = ["data": .array(try page.map { try postFields($0, fields: fields) })]
        if let first = page.first, let last = page.last {
            let beforeCursor = Base64URL.encode(Data(String(first.number).utf8))
            let afterCursor = Base64URL.encode(Data(String(last.number).utf8))
            var paging: [String: JSONValue] = [
                "cursors": .object(["before": .string(beforeCursor), "after": .string(afterCursor)])
            ]
            var common: [(String, String)] = []
            if let token = context.caller?.token, parameters["access_token"] != nil {
                common.append(("access_token", token))
            }
            if let text = parameters.nonEmpty("fields") { common.append(("fields", text)) }
            common.append(("limit", String(limit)))
            let base = "\(origin(for: context.request))\(context.versionPrefix)/\(pathName)/feed"
            if visible.contains(where: { $0.number < last.number }) {
                paging["next"] = .string(FormWriter.appending(common + [("after", afterCursor)], to: base))
            }
            if visible.contains(where: { $0.number > first.number }) {
                paging["previous"] = .string(FormWriter.appending(common + [("before", beforeCursor)], to: base))
            }
            body["paging"] = .object(paging)
        }
        return GraphAnswer(body: .object(body))
    }

    func postRoute(_ context: GraphContext, post: PostRecord) throws -> GraphAnswer {
        let caller = try requireCaller(context, forMe: false)
        let mayRead =
            (caller.kind == .user && caller.userID == post.userID)
            || (caller.kind == .app && caller.appID == post.appID)
        guard mayRead else { throw GraphError.unsupported(context.method, id: post.id) }
        switch context.method {
        case .get:
            let fields = try fieldList(context.parameters["fields"], defaults: ["created_time", "message", "id"])
            return GraphAnswer(body: try postFields(post, fields: fields))
        case .delete:
            guard caller.appID == post.appID else { throw GraphError.permissionRequired("publish_actions") }
            if let index = posts[post.userID].flatMap({ binarySearch($0, number: post.number) }) {
                posts[post.userID]?.remove(at: index)
                markDirty()
            }
            return GraphAnswer(body: .object(["success": .bool(true)]))
        default:
            throw GraphError.unsupportedMethod(context.method)
        }
    }

    // MARK: - Apps

    func appRoute(_ context: GraphContext, appID: String, rest: [String]) throws -> GraphAnswer {
        if rest.isEmpty {
            guard context.method == .get else { throw GraphError.unsupported(context.method, id: appID) }
            _ = try requireCaller(context, forMe: false)
            return try appNode(context, appID: appID)
        }
        if rest == ["accounts", "test-users"] { return try testUsers(context, appID: appID) }
        throw GraphError.unknownPath(pathText(rest))
    }

    func appNode(_ context: GraphContext, appID: String) throws -> GraphAnswer {
        guard let app = apps[appID] else { throw GraphError.unsupported(.get, id: appID) }
        let fields = try fieldList(context.parameters["fields"], defaults: ["id", "name"])
        var node: [String: JSONValue] = [:]
        for field in fields.names {
            switch field {
            case "id": node["id"] = .string(app.id)
            case "name": node["name"] = .string(app.name)
            case "link": node["link"] = .string("\(origin(for: context.request))/\(app.id)")
            case "category": node["category"] = .string("Utilities")
            default: throw GraphError.nonexistingField(field, node: "Application")
            }
        }
        return GraphAnswer(body: .object(node))
    }
}

import Foundation
import Sesame
import SesameEmulator

extension GitHubEngine {
    // MARK: The REST API

    static func message(
        _ text: String, status: Int, headers: HTTPHeaders = [:], extra: [String: JSONValue] = [:]
    )
        -> Reply
    {
        var body: [String: JSONValue] = [
            "message": .string(text), "documentation_url": .string(documentation), "status": .string(String(status)),
        ]
        for (key, value) in extra { body[key] = value }
        var response = Reply.json(.object(body), status: status)
        for field in headers { response.headers.add(name: field.name, value: field.value) }
        return response
    }

    func api(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let path = String(request.path.dropFirst("/api/v3".count))
        if request.method == .get, path == "" || path == "/" {
            // The API root answers without a token, as GitHub's does.
            return Reply.json(
                .object([
                    "current_user_url": .string(state.baseURL + "/api/v3/user"),
                    "repository_url": .string(state.baseURL + "/api/v3/repos/{owner}/{repo}"),
                ]))
        }
        let authorization = request.headers["Authorization"] ?? ""
        let presented = authorization.split(separator: " ", maxSplits: 1).last.map(String.init)
        guard !authorization.isEmpty, let presented else {
            return Self.message("Requires authentication", status: 401)
        }
        if consume(.badCredentials, &state) != nil { return Self.message("Bad credentials", status: 401) }
        guard let token = state.tokens[presented], token.expiresAt.map({ $0 > now(state) }) ?? true else {
            return Self.message("Bad credentials", status: 401)
        }
        if consume(.serverError, &state) != nil { return Self.message("Server Error", status: 502) }
        if consume(.ssoRequired, &state) != nil {
            let url = state.baseURL + "/orgs/sesame-org/sso?authorization_request=" + Self.random(12)
            return Self.message(
                "Resource protected by organization SAML enforcement. You must grant your Personal Access token "
                    + "access to this organization.", status: 403, headers: ["X-GitHub-SSO": "required; url=\(url)"])
        }
        // The primary limit, per token, in a window of an hour.
        let nowDate = now(state)
        var window = state.windows[presented] ?? Window(resetAt: nowDate.addingTimeInterval(3600), used: 0)
        if window.resetAt <= nowDate { window = Window(resetAt: nowDate.addingTimeInterval(3600), used: 0) }
        if let primary = consume(.primaryRateLimit, &state) {
            window.used = state.rateLimit
            window.resetAt = nowDate.addingTimeInterval(TimeInterval(primary.seconds ?? 60))
        }
        if window.used >= state.rateLimit {
            state.windows[presented] = window
            let person = state.people.first { $0.login == token.login }
            return Self.message(
                "API rate limit exceeded for user ID \(person?.id ?? 0). If you reach out to GitHub Support for "
                    + "help, please include the request ID.", status: 403,
                headers: rateHeaders(window, state))
        }
        if let secondary = consume(.secondaryRateLimit, &state) {
            return Self.message(
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                status: 403, headers: ["retry-after": String(secondary.seconds ?? 30)])
        }
        window.used += 1
        state.windows[presented] = window
        var headers = rateHeaders(window, state)
        if let scopes = token.scopes { headers.add(name: "X-OAuth-Scopes", value: scopes.joined(separator: ", ")) }
        if token.isPersonal, let expiry = token.expiresAt {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss 'UTC'"
            headers.add(name: "github-authentication-token-expiration", value: formatter.string(from: expiry))
        }
        if let missing = consume(.scopeMissing, &state) {
            headers.add(name: "X-Accepted-OAuth-Scopes", value: missing.scope ?? "admin:org")
            return Self.message("Resource not accessible by integration", status: 403, headers: headers)
        }
        var response = endpoint(request, path: path, token: token, &headers, &state)
        for field in headers { response.headers.add(name: field.name, value: field.value) }
        return response
    }

    /// What `path` answers for `token`, once the token and the limits have let the call through.
    func endpoint(
        _ request: LoopbackRequest, path: String, token: Token, _ headers: inout HTTPHeaders, _ state: inout State
    ) -> Reply {
        switch (request.method, path) {
        case (.get, "/user"):
            headers.add(name: "X-Accepted-OAuth-Scopes", value: "")
            let person = state.people.first { $0.login == token.login } ?? state.people[0]
            return Reply.json(
                .object([
                    "login": .string(person.login), "id": .number(Double(person.id)),
                    "node_id": .string("MDQ6VXNlcj\(person.id)"), "type": .string("User"),
                    "name": .string(person.name), "html_url": .string(state.baseURL + "/" + person.login),
                ]))
        case (.get, "/user/repos"):
            headers.add(name: "X-Accepted-OAuth-Scopes", value: "")
            return repositories(request, login: token.login, &headers, state)
        case (.post, "/user/repos"):
            headers.add(name: "X-Accepted-OAuth-Scopes", value: "public_repo, repo")
            let granted = Set(token.scopes ?? ["repo"])
            guard granted.contains("repo") || granted.contains("public_repo") else {
                return Self.message("Not Found", status: 404)
            }
            return createRepository(request, login: token.login, &state)
        default:
            return Self.message("Not Found", status: 404)
        }
    }

    func rateHeaders(_ window: Window, _ state: State) -> HTTPHeaders {
        [
            "x-ratelimit-limit": String(state.rateLimit),
            "x-ratelimit-remaining": String(max(0, state.rateLimit - window.used)),
            "x-ratelimit-reset": String(Int(window.resetAt.timeIntervalSince1970.rounded(.up))),
            "x-ratelimit-used": String(window.used), "x-ratelimit-resource": "core",
        ]
    }

    func repositories(
        _ request: LoopbackRequest, login: String, _ headers: inout HTTPHeaders, _ state: State
    ) -> Reply {
        let names = state.repositories[login] ?? []
        guard let perPage = Int(request["per_page"] ?? "30"), let page = Int(request["page"] ?? "1"), page >= 1 else {
            return Self.message("Invalid request: per_page and page must be numbers.", status: 400)
        }
        let size = min(max(perPage, 1), 100)
        let last = max(1, (names.count + size - 1) / size)
        let slice = names.dropFirst((page - 1) * size).prefix(size)
        let base = state.baseURL + "/api/v3/user/repos"
        func link(_ number: Int, _ relation: String) -> String {
            "<\(base)?per_page=\(size)&page=\(number)>; rel=\"\(relation)\""
        }
        var links: [String] = []
        if page > 1 { links += [link(page - 1, "prev"), link(1, "first")] }
        if page < last { links += [link(page + 1, "next"), link(last, "last")] }
        if !links.isEmpty { headers.add(name: "Link", value: links.joined(separator: ", ")) }
        let person = state.people.first { $0.login == login }
        let items: [JSONValue] = slice.enumerated().map { offset, name in
            .object([
                "id": .number(Double((person?.id ?? 0) * 1000 + (page - 1) * size + offset + 1)),
                "name": .string(name), "full_name": .string("\(login)/\(name)"), "private": .bool(false),
            ])
        }
        return Reply.json(.array(items))
    }

    func createRepository(_ request: LoopbackRequest, login: String, _ state: inout State) -> Reply {
        let json = request.json
        guard let name = json?["name"]?.stringValue, !name.isEmpty else {
            return Self.message(
                "Repository creation failed.", status: 422,
                extra: [
                    "errors": .array([
                        .object([
                            "resource": .string("Repository"), "code": .string("missing_field"),
                            "field": .string("name"),
                        ])
                    ])
                ])
        }
        if state.repositories[login, default: []].contains(name) {
            return Self.message(
                "Repository creation failed.", status: 422,
                extra: [
                    "errors": .array([
                        .object([
                            "resource": .string("Repository"), "code": .string("custom"), "field": .string("name"),
                            "message": .string("name already exists on this account"),
                        ])
                    ])
                ])
        }
        state.repositories[login, default: []].append(name)
        return Reply.json(
            .object(["name": .string(name), "full_name": .string("\(login)/\(name)"), "private": .bool(false)]),
            status: 201)
    }
}

import Foundation
import Sesame

/// One answer of the REST API, with what its headers say.
public struct GitHubResponse: Sendable, Hashable {
    /// The HTTP status (2xx: failures are thrown).
    public var status: Int
    /// The headers.
    public var headers: HTTPHeaders
    /// The body.
    public var body: Data

    /// Creates a value.
    public init(status: Int, headers: HTTPHeaders, body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as JSON (`.null` when it is not JSON).
    public var json: JSONValue { JSONValue(parsing: body) ?? .null }
    /// The `Link` header's links by relation (`next`, `prev`, `first`, `last`).
    public var links: [String: URL] { GitHubLinks.parse(headers.values(for: "Link").joined(separator: ", ")) }
    /// The next page, when there is one.
    public var nextPage: URL? { links["next"] }
    /// The scopes the token has (`X-OAuth-Scopes`); `nil` when not sent.
    public var scopes: [String]? { headers["X-OAuth-Scopes"].map(GitHubText.scopes) }
    /// The scopes the endpoint accepts (`X-Accepted-OAuth-Scopes`); `nil` when not sent.
    public var acceptedScopes: [String]? { headers["X-Accepted-OAuth-Scopes"].map(GitHubText.scopes) }
    /// The primary rate limit after this call.
    public var rateLimit: GitHubRateLimit? { GitHubRateLimit(headers: headers) }
}

/// RFC 8288 `Link` headers as GitHub sends them: `<https://…?page=2>; rel="next", <…>; rel="last"`.
public enum GitHubLinks {
    /// The links by relation; a link whose URL cannot be read is left out.
    public static func parse(_ header: String) -> [String: URL] {
        var links: [String: URL] = [:]
        var rest = Substring(header)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { break }
            let target = String(rest[rest.index(after: open)..<close])
            rest = rest[rest.index(after: close)...]
            let end = rest.firstIndex(of: "<") ?? rest.endIndex
            let parameters = rest[..<end]
            rest = rest[end...]
            guard let url = URL(string: target.trimmingCharacters(in: .whitespaces)) else { continue }
            for parameter in parameters.split(separator: ";") {
                let pair = parameter.split(separator: "=", maxSplits: 1).map {
                    $0.trimmingCharacters(in: CharacterSet(charactersIn: " ,\""))
                }
                guard pair.count == 2, pair[0].lowercased() == "rel" else { continue }
                for relation in pair[1].split(separator: " ") where links[String(relation)] == nil {
                    links[String(relation)] = url
                }
            }
        }
        return links
    }
}

/// Calls GitHub's REST API: `send` any method and path, `user()`, and `Link`-header paging as
/// an `AsyncSequence`.
///
/// ```swift
/// let client = session.client()
/// let me = try await client.user()
/// for try await repo in client.items("user/repos", query: [("per_page", "100")]) { ... }
/// ```
///
/// Every failure is an `AuthError` classified by ``GitHubErrorTaxonomy`` (errors as data: see
/// `GitHubErrors.json`). Server errors (5xx) and rate limits are retried by ``policy`` on
/// ``clock``: a primary limit waits until `x-ratelimit-reset`, a secondary one for
/// `retry-after` (a minute without one), never longer than the policy's `maxServerHint`; other
/// errors are thrown at once. Calls are paced before the limit is reached (see
/// ``GitHubRateLimitGovernor``). The token goes in the `Authorization` header, never in a URL,
/// and a paging link that leaves the API host is refused.
public struct GitHubClient: Sendable {
    /// The host and app.
    public let github: GitHubProvider
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// Retries server errors and rate limits; `nil` leaves every error to the caller.
    public var policy: RecoveryPolicy?
    /// Paces calls by the rate-limit headers.
    public var governor: GitHubRateLimitGovernor
    /// What waits are measured on.
    public var clock: any Clock<Duration>
    let credential: Credential

    enum Credential: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        case none
        case token(String)
        /// A session's token, sent through the core's authorized request (`Session.send`).
        case session(Session)

        var description: String {
            switch self {
            case .none: "none"
            case .token: "token(\(Redaction.placeholder))"
            case .session: "session"
            }
        }

        var debugDescription: String { description }

        var customMirror: Mirror { Mirror(self, children: ["credential": description], displayStyle: .enum) }
    }

    /// The headers GitHub recommends on every call.
    public static let standardHeaders: HTTPHeaders = [
        "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "Sesame",
    ]

    /// A client that calls with a fixed token (or none, for public data).
    public init(
        github: GitHubProvider, transport: any HTTPTransport, token: String?,
        policy: RecoveryPolicy? = RecoveryPolicy(), governor: GitHubRateLimitGovernor? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.init(
            github: github, transport: transport, credential: token.map { .token($0) } ?? .none, policy: policy,
            governor: governor, clock: clock)
    }

    /// A client that calls with `session`'s token, through the core's authorized request
    /// (`Session.send(_:taxonomy:authorization:allowLoginUI:loginUI:exchange:)`): the token is
    /// renewed first when it is due, and a token GitHub refuses (401) is renewed once and the call
    /// made once more.
    ///
    /// - Parameters:
    ///   - github: the host.
    ///   - transport: what sends the calls.
    ///   - session: the login whose token is sent; it must be open.
    ///   - policy: how failed calls are retried; `nil` for no retries.
    ///   - governor: paces calls by the rate limit GitHub reports; `nil` for none.
    ///   - clock: what retries and pacing wait on.
    public init(
        github: GitHubProvider, transport: any HTTPTransport, session: Session,
        policy: RecoveryPolicy? = RecoveryPolicy(), governor: GitHubRateLimitGovernor? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.init(
            github: github, transport: transport, credential: .session(session), policy: policy, governor: governor,
            clock: clock)
    }

    init(
        github: GitHubProvider, transport: any HTTPTransport, credential: Credential, policy: RecoveryPolicy?,
        governor: GitHubRateLimitGovernor?, clock: any Clock<Duration>
    ) {
        self.github = github
        self.transport = transport
        self.credential = credential
        self.policy = policy
        self.governor = governor ?? GitHubRateLimitGovernor(now: github.now)
        self.clock = clock
    }

    // MARK: Calls

    /// Sends `method path` (a path under the API, such as `user/repos`), with `query`, and a
    /// JSON `body` when given.
    ///
    /// - Throws: the classified `AuthError`.
    @discardableResult
    public func send(
        _ method: HTTPMethod = .get, _ path: String, query: [(String, String)] = [], body: JSONValue? = nil
    ) async throws -> GitHubResponse {
        try await send(method, url: OAuth.appendingQuery(query, to: github.host.apiURL(path)), body: body)
    }

    /// `GET path` as JSON.
    ///
    /// - Throws: `AuthError` as `GitHubErrorTaxonomy` classifies GitHub's answer or a failure below
    ///   HTTP; `CancellationError` when the task is cancelled.
    public func get(_ path: String, query: [(String, String)] = []) async throws -> JSONValue {
        try await send(.get, path, query: query).json
    }

    /// `GET /user`: who the token is for, and its scopes.
    ///
    /// - Throws: `AuthError` as `GitHubErrorTaxonomy` classifies GitHub's answer or a failure below
    ///   HTTP; `CancellationError` when the task is cancelled.
    public func user() async throws -> GitHubUser {
        let response = try await send(.get, "user")
        return try GitHubUser(
            response: HTTPResponse(status: response.status, headers: response.headers, body: response.body))
    }

    /// The pages of a list, fetched one by one as they are iterated, following each answer's
    /// `Link: <…>; rel="next"` until there is none.
    public func pages(_ path: String, query: [(String, String)] = []) -> GitHubPages {
        GitHubPages(client: self, first: OAuth.appendingQuery(query, to: github.host.apiURL(path)))
    }

    /// The items of every page of a list, in order.
    public func items(_ path: String, query: [(String, String)] = []) -> GitHubItems {
        GitHubItems(pages: pages(path, query: query))
    }

    /// Sends to `url`, which must be on the API host (a paging link).
    func send(_ method: HTTPMethod, url: URL, body: JSONValue? = nil) async throws -> GitHubResponse {
        guard github.host.isAPIURL(url) else {
            throw AuthError(
                category: .invalid,
                message: "A link points away from the GitHub API (\(url.host ?? "no host")); it was not followed, so "
                    + "the token is not sent there.",
                provider: .github)
        }
        var attempt = 1
        while true {
            do {
                return try await exchange(method, url, body: body)
            } catch let error as AuthError {
                guard let policy, error.recoveryTactic == .retry || error.recoveryTactic == .retryAfterBackoff,
                    case .retry(let delay) = policy.decide(for: error, attempt: attempt)
                else { throw error }
                if delay > .zero { try await clock.sleep(for: delay) }
                try Task.checkCancellation()
                attempt += 1
            }
        }
    }

    /// One call: the token on it (for a session, through the core's authorized request, which
    /// renews a refused token once), the answer classified.
    func exchange(_ method: HTTPMethod, _ url: URL, body: JSONValue?) async throws -> GitHubResponse {
        var request = HTTPRequest(method: method, url: url, headers: Self.standardHeaders)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = Data(body.jsonText.utf8)
        }
        let response: HTTPResponse
        switch credential {
        case .none: response = try await paced(request)
        case .token(let token):
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            response = try await paced(request)
        case .session(let session):
            response = try await session.send(request, taxonomy: github.taxonomy) { try await paced($0) }
        }
        guard response.isSuccess else { throw github.taxonomy.classify(response) }
        return GitHubResponse(status: response.status, headers: response.headers, body: response.body)
    }

    /// One HTTP exchange: paced, sent, its rate limit recorded.
    private func paced(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await governor.pace(resource: Self.rateLimitResource(of: request.url, host: github.host), on: clock)
        let response = try await LoginHTTP.send(request, through: transport, taxonomy: github.taxonomy)
        governor.record(response.headers)
        return response
    }
}

extension GitHubClient {
    /// Which of GitHub's limits a call counts against: `search` for the search API, `core` for
    /// the rest (the value of `x-ratelimit-resource`).
    static func rateLimitResource(of url: URL, host: GitHubHost) -> String {
        let base = host.apiBaseURL.path.hasSuffix("/") ? host.apiBaseURL.path : host.apiBaseURL.path + "/"
        let path = url.path.hasPrefix(base) ? String(url.path.dropFirst(base.count)) : url.path
        return path.hasPrefix("search/") || path == "search" ? "search" : "core"
    }
}

/// The pages of a list; see ``GitHubClient/pages(_:query:)``.
public struct GitHubPages: AsyncSequence, Sendable {
    public typealias Element = GitHubResponse
    let client: GitHubClient
    let first: URL

    public func makeAsyncIterator() -> Iterator { Iterator(client: client, next: first) }

    /// Fetches the next page when asked.
    public struct Iterator: AsyncIteratorProtocol {
        let client: GitHubClient
        var next: URL?
        var seen: Set<URL> = []

        public mutating func next() async throws -> GitHubResponse? {
            guard let url = next else { return nil }
            let page = try await client.send(.get, url: url)
            seen.insert(url)
            // A link back to a page already fetched would never end.
            next = page.nextPage.flatMap { seen.contains($0) ? nil : $0 }
            return page
        }
    }
}

/// The items of every page of a list; see ``GitHubClient/items(_:query:)``.
public struct GitHubItems: AsyncSequence, Sendable {
    public typealias Element = JSONValue
    let pages: GitHubPages

    public func makeAsyncIterator() -> Iterator { Iterator(pages: pages.makeAsyncIterator()) }

    /// Yields each page's items, fetching pages as needed.
    public struct Iterator: AsyncIteratorProtocol {
        var pages: GitHubPages.Iterator
        var buffer: [JSONValue] = []
        var index = 0

        public mutating func next() async throws -> JSONValue? {
            while index == buffer.count {
                guard let page = try await pages.next() else { return nil }
                guard let items = page.json.arrayValue else {
                    throw AuthError(
                        category: .providerOther,
                        message: "A page of a GitHub list is not a JSON array; it cannot be read as items.",
                        provider: .github)
                }
                buffer = items
                index = 0
            }
            defer { index += 1 }
            return buffer[index]
        }
    }
}

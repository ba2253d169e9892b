import Foundation
import Sesame

/// Calls the Graph API: `get`, `post` and `delete` of a path, `batch` of up to 50 calls, and
/// cursor paging as an `AsyncSequence`.
///
/// ```swift
/// let me: Me = try await session.graph.get("me", parameters: ["fields": "id,name"], as: Me.self)
/// try await session.graph.post("me/feed", parameters: ["message": "Hello"],
///     requiredPermissions: [.publish("publish_actions")])
/// for try await page in session.graph.pages("me/feed", parameters: ["limit": "100"]) { ... }
/// ```
///
/// Every failure is classified by ``FacebookErrorTaxonomy``. A client made by a
/// ``FacebookSession`` hands each error to the session first, which closes and clears itself
/// when the error invalidates it (190/458, 460, 463, 464; not 459), and then, when a
/// ``recovery`` processor is set, to the processor, which retries with back-off, re-requests a
/// permission, asks for a new login, or shows the message. The token is sent in an
/// `Authorization` header, never in a URL; `appsecret_proof` is added when the provider has a
/// secret (server-side use only). Rate-limit usage headers slow calls down before the app
/// reaches its limit, and an app-wide throttling answer stops calls for its regain time (see
/// ``GraphUsageGovernor``, whose budget a fleet may share).
public struct GraphClient: Sendable {
    /// The app.
    public let provider: FacebookProvider
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// The Graph API version for calls that name none; the provider's when `nil`.
    public var version: String?
    /// Recovers from errors; `nil` leaves every error to the caller.
    public var recovery: FacebookRecoveryProcessor?
    /// Paces calls by the usage headers.
    public var governor: GraphUsageGovernor
    /// What waits are measured on.
    public var clock: any Clock<Duration>
    let credential: Credential
    /// Why the provider's Graph origin may not be called (plain http to a host that is not
    /// loopback nor allowed), found once: `provider` cannot change.
    private let graphOriginProblem: AuthError?
    /// The provider's Graph origin as text, written out once.
    private let graphBaseText: String

    enum Credential: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        case none
        case token(String)
        case session(FacebookSession)

        var description: String {
            switch self {
            case .none: "none"
            case .token: "token(\(Redaction.placeholder))"
            case .session: "session"
            }
        }

        /// The token of a client made with one, else `nil`.
        var fixedToken: String? {
            if case .token(let token) = self { return token }
            return nil
        }

        var debugDescription: String { description }

        var customMirror: Mirror { Mirror(self, children: ["credential": description], displayStyle: .enum) }
    }

    /// A client that calls with a fixed token (or none, for public data and app calls).
    public init(
        provider: FacebookProvider, transport: any HTTPTransport, accessToken: String? = nil, version: String? = nil,
        recovery: FacebookRecoveryProcessor? = nil, governor: GraphUsageGovernor = GraphUsageGovernor(),
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.init(
            provider: provider, transport: transport, credential: accessToken.map { .token($0) } ?? .none,
            version: version, recovery: recovery, governor: governor, clock: clock)
    }

    init(
        provider: FacebookProvider, transport: any HTTPTransport, credential: Credential, version: String?,
        recovery: FacebookRecoveryProcessor?, governor: GraphUsageGovernor, clock: any Clock<Duration>
    ) {
        self.provider = provider
        self.transport = transport
        self.credential = credential
        graphBaseText = provider.graphBaseText
        do {
            try provider.checkGraphOrigin()
            graphOriginProblem = nil
        } catch {
            graphOriginProblem = error
        }
        self.version = version
        self.recovery = recovery
        self.governor = governor
        self.clock = clock
    }

    /// This client with a recovery processor (or none).
    public func withRecovery(_ recovery: FacebookRecoveryProcessor?) -> GraphClient {
        var copy = self
        copy.recovery = recovery
        return copy
    }

    // MARK: Calls

    /// Sends `request`, recovering from errors when ``recovery`` is set.
    ///
    /// - Throws: the classified `AuthError`.
    public func send(_ request: GraphRequest) async throws -> GraphResponse {
        let target = try graphTarget(request.path, version: request.version ?? self.version)
        return try await recovering(request.requiredPermissions) {
            try await exchange(request.method, target, parameters: request.pairs)
        }
    }

    /// `…/{version}/{path}` on the Graph origin, as text: ``exchange(_:_:parameters:)`` parses
    /// it once, with its query, where ``FacebookProvider/graphURL(_:version:query:)`` and then
    /// the query made two `URL`s a call.
    func graphTarget(_ path: String, version: String?) throws -> String {
        if let graphOriginProblem { throw graphOriginProblem }
        return try provider.graphPathText(path, version: version, base: graphBaseText)
    }

    /// `GET path` as JSON.
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer or a failure
    ///   below HTTP (after the recovery policy's retries); `CancellationError` when the task is
    ///   cancelled.
    public func get(
        _ path: String, parameters: [String: String] = [:], version: String? = nil
    ) async throws
        -> JSONValue
    {
        try await send(GraphRequest(.get, path, parameters: parameters, version: version)).json
    }

    /// `GET path` decoded as `T`.
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer or a failure
    ///   below HTTP (after the recovery policy's retries); `CancellationError` when the task is
    ///   cancelled.
    public func get<T: Decodable & Sendable>(
        _ path: String, parameters: [String: String] = [:], version: String? = nil, as type: T.Type
    ) async throws -> T {
        try await send(GraphRequest(.get, path, parameters: parameters, version: version)).decode(T.self)
    }

    /// `POST path` with form parameters, as JSON.
    @discardableResult
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer or a failure
    ///   below HTTP (after the recovery policy's retries); `CancellationError` when the task is
    ///   cancelled.
    public func post(
        _ path: String, parameters: [String: String] = [:], version: String? = nil,
        requiredPermissions: [Permission] = []
    ) async throws -> JSONValue {
        try await send(
            GraphRequest(
                .post, path, parameters: parameters, version: version, requiredPermissions: requiredPermissions)
        ).json
    }

    /// `POST path` decoded as `T`.
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer or a failure
    ///   below HTTP (after the recovery policy's retries); `CancellationError` when the task is
    ///   cancelled.
    public func post<T: Decodable & Sendable>(
        _ path: String, parameters: [String: String] = [:], version: String? = nil,
        requiredPermissions: [Permission] = [], as type: T.Type
    ) async throws -> T {
        try await send(
            GraphRequest(
                .post, path, parameters: parameters, version: version, requiredPermissions: requiredPermissions)
        ).decode(T.self)
    }

    /// `DELETE path`, as JSON (`{"success": true}` for the bare `true` of older versions).
    @discardableResult
    ///
    /// - Throws: `AuthError` as `FacebookErrorTaxonomy` classifies the Graph answer or a failure
    ///   below HTTP (after the recovery policy's retries); `CancellationError` when the task is
    ///   cancelled.
    public func delete(
        _ path: String, parameters: [String: String] = [:], version: String? = nil
    ) async throws
        -> JSONValue
    {
        try await send(GraphRequest(.delete, path, parameters: parameters, version: version)).json
    }

    // MARK: Batch

    /// The most calls one batch may carry (Facebook's limit).
    public static let maximumBatchSize = 50

    /// Sends up to 50 calls in one request (`POST /` with `batch=`), and returns one result per
    /// call, in order: the answer, or that call's own classified error.
    ///
    /// An item's error is handed to the session like any other (an invalid token closes it)
    /// but is not retried (``batchRetryingFailedItems(_:version:policy:)`` retries the passing
    /// ones); the batch request itself goes through ``recovery``. Calls in a
    /// batch use the batch's version unless they name their own.
    ///
    /// - Throws: `AuthError` for an empty or oversized batch, or when the whole batch
    ///   failed (for example its token was refused).
    public func batch(
        _ requests: [GraphRequest], version: String? = nil
    ) async throws
        -> [Result<GraphResponse, AuthError>]
    {
        guard !requests.isEmpty, requests.count <= Self.maximumBatchSize else {
            throw AuthError(
                category: .invalid,
                message: "A Graph batch carries 1 to \(Self.maximumBatchSize) calls; this one has \(requests.count). "
                    + "Split it.",
                provider: .facebook)
        }
        let items: [JSONValue] = try requests.map { request in
            var path = String(request.path.drop { $0 == "/" })
            if let version = request.version { path = "\(try provider.version(version))/\(path)" }
            var item: [String: JSONValue] = ["method": .string(request.method.rawValue)]
            if request.method == .post {
                item["relative_url"] = .string(path)
                if !request.parameters.isEmpty { item["body"] = .string(FormEncoding.encode(request.pairs)) }
            } else {
                item["relative_url"] = .string(
                    request.parameters.isEmpty ? path : "\(path)?\(FormEncoding.encode(request.pairs))")
            }
            return .object(item)
        }
        let target = try graphTarget("", version: version ?? self.version)
        let response = try await recovering(requests.flatMap(\.requiredPermissions)) {
            try await exchange(.post, target, parameters: [("batch", JSONValue.array(items).jsonText)])
        }
        guard let answers = response.json.arrayValue, answers.count == requests.count else {
            throw AuthError.unreadableGraphAnswer("batch answer (it is not a list of \(requests.count) results)")
        }
        var results: [Result<GraphResponse, AuthError>] = []
        results.reserveCapacity(answers.count)
        for answer in answers {
            guard let status = answer["code"]?.lenientInt else {
                results.append(
                    .failure(
                        AuthError(
                            category: .providerOther,
                            message: "Facebook did not run this call of the batch (its answer is empty); send it "
                                + "again on its own.",
                            provider: .facebook)))
                continue
            }
            var headers = HTTPHeaders()
            for field in answer["headers"]?.arrayValue ?? [] {
                if let name = field["name"]?.stringValue, let value = field["value"]?.stringValue {
                    headers.add(name: name, value: value)
                }
            }
            let body = Data((answer["body"]?.stringValue ?? "").utf8)
            if (200..<300).contains(status) {
                results.append(.success(GraphResponse(status: status, headers: headers, body: body)))
            } else {
                let error = provider.taxonomy.classify(status: status, headers: headers, body: body)
                await report(error)
                results.append(.failure(error))
            }
        }
        return results
    }

    /// Sends a batch like ``batch(_:version:)``, then sends again, in a new batch of just
    /// those, the calls whose own errors say to retry, until they succeed or `policy` stops.
    ///
    /// Those are the errors whose recovery tactic is `RecoveryTactic.retry` or
    /// `RecoveryTactic.retryAfterBackoff`: passing (`is_transient`) and throttling
    /// errors, and Facebook's temporary server failures (1, 2). A checkpointed account (459) is
    /// a retry-category error that only the person can fix, so it is not sent again.
    ///
    /// `policy` decides per call, from its error and how many times it was sent: at most
    /// `RecoveryPolicy.maxAttempts` sends, back-off with jitter, never shorter than a
    /// server hint, and no wait longer than `RecoveryPolicy.maxServerHint`. A round
    /// waits the longest delay among the calls it sends again, on ``clock``. Answers that
    /// succeeded and errors of other kinds (a duplicate post, a missing permission) are kept as
    /// they came and never sent twice. When a whole retry batch fails, its calls get that error.
    ///
    /// - Parameters:
    ///   - requests: 1 to 50 calls.
    ///   - version: the batch's version, the client's when `nil`.
    ///   - policy: the retry rules; the ``recovery`` processor's, or the default, when `nil`.
    /// - Returns: one result per call, in order.
    /// - Throws: `AuthError` for an empty or oversized batch, or when the first batch
    ///   failed as a whole; `CancellationError`.
    public func batchRetryingFailedItems(
        _ requests: [GraphRequest], version: String? = nil, policy: RecoveryPolicy? = nil
    ) async throws -> [Result<GraphResponse, AuthError>] {
        let policy = policy ?? recovery?.policy ?? RecoveryPolicy()
        var results = try await batch(requests, version: version)
        var sends = Array(repeating: 1, count: requests.count)
        while true {
            var again: [Int] = []
            var wait = Duration.zero
            for (index, result) in results.enumerated() {
                guard case .failure(let error) = result,
                    error.recoveryTactic == .retry || error.recoveryTactic == .retryAfterBackoff,
                    case .retry(let delay) = policy.decide(for: error, attempt: sends[index])
                else { continue }
                again.append(index)
                wait = max(wait, delay)
            }
            guard !again.isEmpty else { return results }
            if let recovery, case .failure(let error) = results[again[0]] {
                await recovery.delegate.willRetry(after: wait, attempt: sends[again[0]] + 1, error: error)
            }
            if wait > .zero { try await clock.sleep(for: wait) }
            try Task.checkCancellation()
            for index in again { sends[index] += 1 }
            do {
                let answers = try await batch(again.map { requests[$0] }, version: version)
                for (position, index) in again.enumerated() { results[index] = answers[position] }
            } catch let error as AuthError {
                for index in again { results[index] = .failure(error) }
                return results
            }
        }
    }

    // MARK: Paging

    /// The pages of a Graph list, fetched one by one as they are iterated; the sequence ends
    /// when a page has no `next` link (short or empty pages do not end it). Each page is
    /// fetched with the current token; a `next` link that leaves the Graph origin is refused.
    public func pages(_ path: String, parameters: [String: String] = [:], version: String? = nil) -> GraphPages {
        GraphPages(client: self, first: GraphRequest(.get, path, parameters: parameters, version: version))
    }

    /// The items of every page of a Graph list, in order.
    public func items(_ path: String, parameters: [String: String] = [:], version: String? = nil) -> GraphItems {
        GraphItems(pages: pages(path, parameters: parameters, version: version))
    }

    func page(after url: URL) async throws -> GraphPage {
        guard provider.isGraphOrigin(url), var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else {
            throw AuthError(
                category: .invalid,
                message: "A paging link points away from the Graph API (\(url.host ?? "no host")); it was not "
                    + "followed, so the token is not sent there.",
                provider: .facebook)
        }
        let query = FormEncoding.decode(components.percentEncodedQuery ?? "").filter {
            $0.0 != "access_token" && $0.0 != "appsecret_proof"
        }
        components.percentEncodedQuery = nil
        guard let base = components.url else {
            throw AuthError.unreadableGraphAnswer("paging link")
        }
        let response = try await recovering([]) { try await exchange(.get, base.absoluteString, parameters: query) }
        return GraphPage(json: response.json)
    }

    // MARK: The exchange

    private func recovering(
        _ permissions: [Permission], _ operation: () async throws -> GraphResponse
    ) async throws -> GraphResponse {
        guard let recovery else { return try await operation() }
        return try await recovery.run(permissions: permissions, operation)
    }

    /// One call: the token on it (for a session, through the core's authorized request, which
    /// renews a refused token once), each HTTP exchange metered by the rate-limit budget, the
    /// answer classified.
    func exchange(_ method: HTTPMethod, _ target: String, parameters: [(String, String)]) async throws -> GraphResponse
    {
        let response: HTTPResponse
        let token: String?
        switch credential {
        case .none, .token:
            token = credential.fixedToken
            response = try await metered(try request(method, target, parameters, token: token))
        case .session(let session):
            let sent = Locked<String?>(nil)
            let authorization = RequestAuthorization { _, current in
                sent.withLock { $0 = current.tokenString }
                return try request(method, target, parameters, token: current.tokenString)
            }
            // The request is made by `authorization`, from the parameters and the token sent.
            let placeholder = HTTPRequest(method: method, url: provider.graphBaseURL)
            do {
                response = try await session.session.send(
                    placeholder, taxonomy: provider.taxonomy, authorization: authorization
                ) { try await metered($0) }
            } catch let error as AuthError {
                await report(error)
                throw error
            }
            token = sent.withLock { $0 }
        }
        guard response.isSuccess else {
            // A server may echo the token back; whatever its characters, it leaves the error here.
            let error = provider.taxonomy.classify(response).redacting(token.map { [$0] } ?? [])
            await report(error)
            throw error
        }
        return GraphResponse(status: response.status, headers: response.headers, body: response.body)
    }

    /// One HTTP exchange: a turn from the rate-limit budget, the call, and the turn handed back
    /// with the answer's usage whatever happened; a transport failure classified and reported.
    private func metered(_ request: HTTPRequest) async throws -> HTTPResponse {
        let budget = governor.budget
        let turn = try await budget.waitForTurn(on: clock)
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch let error as TransportError {
            await budget.finish(turn, .noAnswer)
            let token = request.headers["Authorization"].map { String($0.dropFirst("Bearer ".count)) }
            let classified = provider.taxonomy.classify(error).redacting(token.map { [$0] } ?? [])
            await report(classified)
            throw classified
        } catch {
            await budget.finish(turn, .noAnswer)
            throw error
        }
        let usage = governor.read(response.headers)
        // Only an app-wide refusal stops the whole app's calls: a person's or a Page's
        // throttling (17, 32) is that caller's to wait out.
        let throttled =
            !response.isSuccess && (usage?.percentages["app"] ?? 0) >= 100
            && provider.taxonomy.classify(response).category == .throttling
        await budget.finish(turn, throttled ? .throttled(usage) : .answered(usage))
        return response
    }

    /// The request for a Graph call with `token`: the proof added when the provider has a secret,
    /// the token in the `Authorization` header.
    private func request(
        _ method: HTTPMethod, _ target: String, _ parameters: [(String, String)], token: String?
    ) throws -> HTTPRequest {
        var parameters = parameters
        if let token, let proof = provider.appSecretProof(for: token) { parameters.append(("appsecret_proof", proof)) }
        var request: HTTPRequest
        if method == .post {
            guard let url = URL(string: target) else { throw FacebookProvider.unparsableGraphCall }
            request = HTTPRequest(
                method: .post, url: url, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(FormEncoding.encode(parameters).utf8))
        } else {
            guard let url = URL(string: OAuth.appendingQuery(parameters, toText: target)) else {
                throw FacebookProvider.unparsableGraphCall
            }
            request = HTTPRequest(method: method, url: url)
        }
        request.headers.add(name: "Accept", value: "application/json")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request
    }

    private func report(_ error: AuthError) async {
        if case .session(let session) = credential { await session.handleGraphError(error) }
    }
}

/// The pages of a Graph list; see ``GraphClient/pages(_:parameters:version:)``.
public struct GraphPages: AsyncSequence, Sendable {
    public typealias Element = GraphPage
    let client: GraphClient
    let first: GraphRequest

    public func makeAsyncIterator() -> Iterator { Iterator(client: client, first: first) }

    /// Fetches the next page when asked.
    public struct Iterator: AsyncIteratorProtocol {
        let client: GraphClient
        var first: GraphRequest?
        var next: URL?

        init(client: GraphClient, first: GraphRequest) {
            self.client = client
            self.first = first
        }

        public mutating func next() async throws -> GraphPage? {
            let page: GraphPage
            if let request = first {
                first = nil
                page = GraphPage(json: try await client.send(request).json)
            } else if let url = next {
                page = try await client.page(after: url)
            } else {
                return nil
            }
            next = page.next
            return page
        }
    }
}

/// The items of every page of a Graph list; see ``GraphClient/items(_:parameters:version:)``.
public struct GraphItems: AsyncSequence, Sendable {
    public typealias Element = JSONValue
    let pages: GraphPages

    public func makeAsyncIterator() -> Iterator { Iterator(pages: pages.makeAsyncIterator()) }

    /// Yields each page's items, fetching pages as needed.
    public struct Iterator: AsyncIteratorProtocol {
        var pages: GraphPages.Iterator
        var buffer: [JSONValue] = []
        var index = 0

        public mutating func next() async throws -> JSONValue? {
            while index == buffer.count {
                guard let page = try await pages.next() else { return nil }
                buffer = page.data
                index = 0
            }
            defer { index += 1 }
            return buffer[index]
        }
    }
}

extension AuthError {
    /// A 2xx Graph answer that does not have the shape it should.
    static func unreadableGraphAnswer(_ what: String) -> AuthError {
        AuthError(
            category: .providerOther,
            message: "The Graph API's \(what) could not be read. Try again; if it keeps happening, check the "
                + "Graph base URL and version.",
            provider: .facebook)
    }
}

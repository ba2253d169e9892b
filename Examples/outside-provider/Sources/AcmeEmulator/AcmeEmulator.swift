import Foundation
import Sesame
import SesameHTTPServer
import Synchronization

/// A person the emulator knows.
public struct AcmeEmulatorUser: Sendable, Hashable, Codable {
    /// The stable id.
    public var id: String
    /// The login name.
    public var login: String
    /// The display name.
    public var name: String
}

/// A small Acme server on 127.0.0.1, for tests and offline use: a consent page for the
/// authorization code grant with PKCE (S256 only), device login (RFC 8628), the token endpoint
/// (codes, device codes, refresh tokens rotated on every use, a reused one revoking its whole
/// family), `GET /api/me`, revocation (RFC 7009), and an admin API under `/__acme`.
///
/// ```swift
/// let emulator = AcmeEmulator()
/// let base = try emulator.start()          // http://127.0.0.1:<port>
/// try emulator.approveDevice(userCode: code)
/// await emulator.stop()
/// ```
///
/// | admin call | body | does |
/// |---|---|---|
/// | `POST /__acme/device` | `{"user_code": "…", "user": "roadrunner", "deny": false}` | answers a device login |
/// | `POST /__acme/clock` | `{"advance": 3600}` | moves the emulator's clock forward |
/// | `POST /__acme/revoke-all` | | forgets every token, as an administrator revoking the app |
/// | `GET /__acme/stats` | | counts of tokens and refresh grants |
public final class AcmeEmulator: Sendable {
    /// The public client every emulator knows.
    public static let defaultClientID = "acme-sesame-demo"
    /// The people it knows; the first approves logins unless told otherwise.
    public static let users = [
        AcmeEmulatorUser(id: "1001", login: "wile", name: "Wile E. Coyote"),
        AcmeEmulatorUser(id: "1002", login: "roadrunner", name: "Road Runner"),
    ]
    /// The scopes it grants.
    public static let scopes: Set<String> = ["read", "write", "profile"]

    /// How long an access token lives, in seconds.
    public let accessTokenLifetime: TimeInterval
    /// The interval a device login asks clients to wait between polls, in seconds.
    public let devicePollInterval: Int
    private let clientIDs: Set<String>
    private let state = Mutex(AcmeEmulatorState())
    private let server = Mutex<HTTPServer?>(nil)

    /// Creates an emulator (it listens once ``start(port:)`` is called).
    ///
    /// - Parameters:
    ///   - accessTokenLifetime: seconds an access token lives (`expires_in`).
    ///   - devicePollInterval: the `interval` of a device login, in seconds.
    ///   - clientIDs: the public clients it accepts.
    public init(
        accessTokenLifetime: TimeInterval = 3600, devicePollInterval: Int = 5,
        clientIDs: Set<String> = [AcmeEmulator.defaultClientID]
    ) {
        self.accessTokenLifetime = accessTokenLifetime
        self.devicePollInterval = max(1, devicePollInterval)
        self.clientIDs = clientIDs
    }

    /// Starts listening on 127.0.0.1 (`port` 0 picks a free one); returns its address, without a
    /// trailing slash.
    ///
    /// - Throws: `HTTPServerError` when the port cannot be had or it already runs.
    @discardableResult
    public func start(port: Int = 0) throws -> URL {
        let server = HTTPServer(
            configuration: HTTPServer.Configuration(
                host: "127.0.0.1", port: port, stopGracePeriod: .seconds(2), requestHeadTimeout: .seconds(10))
        ) { [self] request in respond(to: request) }
        try self.server.withLock { running in
            guard running == nil else { throw HTTPServerError.alreadyStarted("127.0.0.1:\(port)") }
            try server.start()
            running = server
        }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        state.withLock { $0.baseURL = base }
        return base
    }

    /// Stops listening, answering the requests in flight first.
    public func stop() async {
        let running = server.withLock { running -> HTTPServer? in
            defer { running = nil }
            return running
        }
        await running?.stop()
    }

    /// Where it listens, once started.
    public var baseURL: URL? { state.withLock { $0.baseURL } }

    /// Approves (or, with `deny`, declines) a pending device login as `user` (a login name; the
    /// first person when `nil`); the code may be typed in any case, with or without its dash.
    ///
    /// - Throws: ``AcmeEmulatorError`` for an unknown code or person.
    public func approveDevice(userCode: String, user: String? = nil, deny: Bool = false) throws {
        try state.withLock { try $0.answerDevice(userCode: userCode, user: user, approve: !deny) }
    }

    /// Approves the browser login whose authorization address is `url` as `user` (a login name;
    /// the first person when `nil`), as a person pressing "Allow" on the consent page would;
    /// returns the redirect back to the app (with the code, or the error).
    ///
    /// - Throws: ``AcmeEmulatorError`` when the address is not one to redirect back from (an
    ///   unknown client, a redirect that is not a loopback address).
    public func approveAuthorization(_ url: URL, user: String? = nil) throws -> URL {
        let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        let parameters = query.map { ($0.name, $0.value ?? "") }
        return try state.withLock { state in
            switch state.authorize(parameters, clientIDs: clientIDs, decision: "allow", user: user) {
            case .redirect(let redirect): return redirect
            case .refused(let reason), .consent(let reason): throw AcmeEmulatorError(message: reason)
            }
        }
    }

    /// Moves the emulator's clock forward (codes, device codes and access tokens expire by it).
    public func advanceClock(by seconds: TimeInterval) { state.withLock { $0.clockOffset += seconds } }

    /// Forgets every token, as an administrator revoking the app would.
    public func revokeAll() { state.withLock { $0.revokeAll() } }

    /// Whether it has issued or remembers any token (a state worth saving).
    public var hasIssuedTokens: Bool {
        state.withLock { !$0.saved.accessTokens.isEmpty || !$0.saved.refreshTokens.isEmpty }
    }

    /// Refresh grants answered and refused so far.
    public var refreshCounts: (answered: Int, refused: Int) {
        state.withLock { ($0.saved.refreshGrants, $0.saved.refusedRefreshGrants) }
    }

    /// Requests per path so far.
    public func requestCount(path: String) -> Int { state.withLock { $0.requestCounts[path] ?? 0 } }

    /// The tokens it issued and its clock, as JSON, to keep between runs (``restoreState(from:)``).
    public func stateData() throws -> Data {
        let saved = state.withLock { $0.saved }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .secondsSince1970
        return try encoder.encode(saved)
    }

    /// Adds the tokens of a saved state (``stateData()``) to its own: a token it already knows
    /// keeps its own record; a refresh token used here stays used.
    ///
    /// - Throws: ``AcmeEmulatorError`` when `data` is not such a state.
    public func restoreState(from data: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let saved: AcmeEmulatorState.Saved
        do {
            saved = try decoder.decode(AcmeEmulatorState.Saved.self, from: data)
        } catch {
            throw AcmeEmulatorError(message: "The Acme emulator's saved state cannot be read (\(error)).")
        }
        state.withLock { $0.merge(saved) }
    }

    // MARK: Answers

    private func respond(to request: HTTPServerRequest) -> HTTPServerResponse {
        let parameters = request.query + (request.isFormEncoded ? request.form : [])
        return state.withLock { state in
            state.requestCounts[request.path, default: 0] += 1
            switch (request.method, request.path) {
            case (.get, "/oauth/authorize"), (.post, "/oauth/authorize"):
                let decision = request.method == .post ? value("decision", parameters) ?? "deny" : nil
                switch state.authorize(
                    parameters, clientIDs: clientIDs, decision: decision, user: value("user", parameters))
                {
                case .redirect(let url): return .redirect(to: url)
                case .consent(let page): return .html(page)
                case .refused(let reason): return .html(Page.message("This login cannot go on", reason), status: 400)
                }
            case (.post, "/oauth/device"):
                return state.startDevice(parameters, clientIDs: clientIDs, interval: devicePollInterval)
            case (.get, "/device"):
                return .html(Page.deviceForm(userCode: value("user_code", parameters) ?? ""))
            case (.post, "/device"):
                do {
                    try state.answerDevice(
                        userCode: value("user_code", parameters) ?? "", user: value("user", parameters),
                        approve: value("decision", parameters) != "deny")
                    return .html(Page.message("Done", "You can go back to the app now."))
                } catch {
                    return .html(Page.message("That code did not work", "\(error)"), status: 400)
                }
            case (.post, "/oauth/token"):
                return state.token(parameters, clientIDs: clientIDs, lifetime: accessTokenLifetime)
            case (.get, "/api/me"):
                return state.me(authorization: request.headers["Authorization"])
            case (.post, "/oauth/revoke"):
                state.revoke(value("token", parameters) ?? "")
                return .json(JSONValue.object([:]))
            case (_, let path) where path.hasPrefix("/__acme/"):
                return state.admin(request.method, String(path.dropFirst("/__acme/".count)), json: request.json)
            default:
                return AcmeEmulatorState.oauthError("invalid_request", "There is nothing at \(request.path).", 404)
            }
        }
    }
}

/// What the emulator refused, in a sentence.
public struct AcmeEmulatorError: Error, Sendable, CustomStringConvertible {
    /// The sentence.
    public var message: String
    /// Creates the error.
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// A request's parameters, the query's then the form's, in order.
typealias Parameters = [(String, String)]

/// The first non-empty value of `name`.
func value(_ name: String, _ parameters: Parameters) -> String? {
    parameters.first { $0.0 == name && !$0.1.isEmpty }?.1
}

import Foundation
import Sesame
import Synchronization

/// The emulator's state and its request handling: maps a request value to a response value.
///
/// Concurrent clients see one consistent Facebook: every entry point (``handle(_:)``, ``run(_:)``,
/// ``saveNow()``) takes `lock`, and a request is handled start to finish under it without
/// suspending, so it is atomic. Only the `slow` scenario's delay, the state file's write and the
/// parsing of a JSON request body happen outside it. A lock rather than an actor: handling takes microseconds, and an actor hop per
/// request halved the throughput under load.
package final class EmulatorEngine: @unchecked Sendable {  // All mutable state is guarded by `lock`.
    struct GrantKey: Hashable, Sendable {
        var appID: String
        var userID: String
    }

    let configuration: EmulatorConfiguration
    var limits: EmulatorLimits { configuration.limits }
    private let lock = Mutex(())

    var apps: [String: EmulatedApp] = [:]
    var users: [String: EmulatedUser] = [:]
    /// User ids in the order they were added (the dialog lists them so).
    var userOrder: [String] = []
    var tokens = TokenTable()
    var grants: [GrantKey: GrantRecord] = [:]
    /// Each person's posts, oldest first.
    var posts: [String: [PostRecord]] = [:]
    var codes: [String: CodeRecord] = [:]
    var dialogs: [String: PendingDialog] = [:]
    var devices: [String: DeviceRecord] = [:]
    var userCodes: [String: String] = [:]
    var scenarios: [ActiveScenario] = []
    var nextSerial = 1
    var nextPostNumber = 1
    var nextScenarioNumber = 1
    var clockOffset: TimeInterval = 0
    var usage = UsageMeter()
    var installedCount: [String: Int] = [:]
    /// Where the emulator listens, once started; absolute URLs are built from it.
    var baseURL: URL?

    let writer: StateWriter?
    private var savedState: PersistedState?
    private var isPrepared = false
    private var isDirty = false
    private var saveScheduled = false

    /// Creates an engine, reading the state file when there is one. The state is applied on first use.
    ///
    /// - Throws: ``EmulatorError`` for a bad configuration or a state file that cannot be used.
    package init(configuration: EmulatorConfiguration) throws {
        self.configuration = configuration
        guard !configuration.apps.isEmpty else {
            throw EmulatorError(message: "The emulator needs at least one app; add one to EmulatorConfiguration.apps.")
        }
        for app in configuration.apps {
            guard !app.id.isEmpty, app.id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw EmulatorError(message: "The app id '\(app.id)' is not valid: Facebook app ids are digits.")
            }
            guard !app.secret.isEmpty, !app.clientToken.isEmpty else {
                throw EmulatorError(message: "The app \(app.id) needs a secret and a client token.")
            }
            apps[app.id] = app
        }
        for setting in configuration.scenarios { try setting.validate() }
        if let url = configuration.stateFileURL {
            writer = StateWriter(url: url)
            savedState = try StateWriter.load(url)
        } else {
            writer = nil
        }
        prepare()
    }

    /// Applies the saved state, the configured people and the start-up scenarios, once.
    func prepare() {
        guard !isPrepared else { return }
        isPrepared = true
        if let savedState { restore(savedState) }
        savedState = nil
        for user in configuration.users where users[user.id] == nil { addUser(user) }
        for setting in configuration.scenarios { activate(setting) }
    }

    private func restore(_ saved: PersistedState) {
        for user in saved.users { addUser(user) }
        for token in saved.tokens { tokens[token.token] = token }
        for grant in saved.grants {
            grants[GrantKey(appID: grant.appID, userID: grant.userID)] = grant
            if grant.isInstalled { installedCount[grant.appID, default: 0] += 1 }
        }
        for post in saved.posts { posts[post.userID, default: []].append(post) }
        for key in posts.keys { posts[key]?.sort { $0.number < $1.number } }
        nextSerial = max(saved.nextSerial, (saved.tokens.map(\.serial).max() ?? 0) + 1)
        nextPostNumber = max(saved.nextPostNumber, (saved.posts.map(\.number).max() ?? 0) + 1)
        clockOffset = saved.clockOffset
    }

    /// The emulator's current time: the configured clock plus any admin offset.
    var now: Date { configuration.now().addingTimeInterval(clockOffset) }

    var defaultApp: EmulatedApp { apps[configuration.defaultApp.id] ?? configuration.defaultApp }

    package func setBaseURL(_ url: URL) { lock.withLock { _ in baseURL = url } }

    /// Runs `body` under the lock, turning its Graph errors into ``EmulatorError``.
    func run<T>(_ body: (EmulatorEngine) throws -> T) throws -> T {
        try lock.withLock { _ in
            do {
                return try body(self)
            } catch let error as GraphError {
                throw EmulatorError(message: error.message)
            }
        }
    }

    // MARK: - Dispatch

    /// Answers one request.
    package func handle(_ request: EmulatorRequest) -> EmulatorOutcome {
        // A JSON body is parsed before the lock: a large one then delays only its own client.
        let request = request.parsingBody()
        let outcome = lock.withLock { _ in handleLocked(request) }
        // Outside the lock: the log is the caller's code.
        if let log = configuration.requestLog {
            let status = outcome.response.map { String($0.status) } ?? "dropped"
            log(
                "\(Self.loggable(request.method.rawValue)) \(Self.loggable(String(request.path.prefix(200)))) \(status)"
            )
        }
        return outcome
    }

    /// `text` safe to print on one terminal line: control characters (a decoded `%0a` would
    /// start a forged log line, `%1b` a terminal escape), `\` and the Unicode line and format
    /// controls are written as `\xNN` or `\u{NNNN}`.
    static func loggable(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x5C: output += "\\\\"
            case 0..<0x20, 0x7F:
                let digits = Array("0123456789abcdef")
                output += "\\x\(digits[Int(scalar.value >> 4)])\(digits[Int(scalar.value & 0xF)])"
            case 0x80...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0xFEFF:
                output += "\\u{\(String(scalar.value, radix: 16))}"
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        return output
    }

    private func handleLocked(_ request: EmulatorRequest) -> EmulatorOutcome {
        let started = ContinuousClock.now
        let outcome = dispatch(request)
        usage.addTime(ContinuousClock.now - started, at: now)
        return outcome
    }

    private func dispatch(_ request: EmulatorRequest) -> EmulatorOutcome {
        guard request.path.utf8.count <= limits.maxPathBytes else {
            return .respond(graphErrorResponse(.invalidParameter("The path is too long."), appID: defaultApp.id))
        }
        guard request.body.count <= limits.maxBodyBytes else {
            return .respond(
                graphErrorResponse(.invalidParameter("The request body is too large."), appID: defaultApp.id))
        }
        let all = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if all.first == "__sesame" {
            return .respond(admin(request, segments: Array(all.dropFirst())))
        }
        let (segments, versionPrefix) = Self.splitVersion(all)
        if let page = page(request, segments: segments, versionPrefix: versionPrefix) { return .respond(page) }
        return finishing(
            graph(request, segments: segments, versionPrefix: versionPrefix), request, versionPrefix: versionPrefix)
    }

    /// Whether `segment` is a Graph API version such as `v19.0` or `v2`.
    /// A path's segments without a leading Graph version, and that version as `/vN.N` (or "").
    static func splitVersion(_ segments: [String]) -> (segments: [String], versionPrefix: String) {
        guard let first = segments.first, isVersion(first) else { return (segments, "") }
        return (Array(segments.dropFirst()), "/" + first)
    }

    static func isVersion(_ segment: String) -> Bool {
        let bytes = segment.utf8
        guard bytes.count >= 2, bytes.count <= 8, bytes.first == UInt8(ascii: "v") else { return false }
        var digitsInPart = 0
        var dots = 0
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: ".") {
                guard digitsInPart > 0, dots == 0 else { return false }
                dots += 1
                digitsInPart = 0
            } else if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                digitsInPart += 1
            } else {
                return false
            }
        }
        return digitsInPart > 0
    }

    // MARK: - Graph requests

    /// Everything a Graph handler needs to know about its request.
    struct GraphContext {
        var request: EmulatorRequest
        var method: HTTPMethod
        var segments: [String]
        var parameters: Parameters
        /// The caller the token names; `nil` when no token was sent.
        var caller: Caller?
        /// Why the token was refused, when it was.
        var tokenError: GraphError?
        var versionPrefix: String
        var isBatchItem: Bool
    }

    /// Who is calling, from the access token.
    struct Caller {
        enum Kind { case user, app, client }
        var kind: Kind
        var appID: String
        var userID: String?
        var token: String
    }

    /// A successful Graph answer.
    struct GraphAnswer {
        var status = 200
        var body: JSONValue
        var headers: HTTPHeaders = [:]
        /// A body that is not JSON (a profile picture); replaces ``body`` when set.
        var rawBody: Data?

        /// The bytes to send.
        var data: Data { rawBody ?? body.jsonData }
    }

    func graph(_ request: EmulatorRequest, segments: [String], versionPrefix: String) -> EmulatorOutcome {
        var context: GraphContext
        do {
            context = try graphContext(request, segments: segments, versionPrefix: versionPrefix, isBatchItem: false)
        } catch {
            return .respond(graphErrorResponse(error as? GraphError ?? .unknown, appID: defaultApp.id))
        }
        let appID = appID(for: context)
        usage.count(appID: appID, at: now)

        let effects = scenarioEffects(for: context)
        if effects.dropConnection { return EmulatorOutcome(response: nil, delay: effects.delay) }
        if let error = effects.error ?? rateLimitError(appID: appID) {
            return EmulatorOutcome(response: graphErrorResponse(error, appID: appID), delay: effects.delay)
        }
        return EmulatorOutcome(response: answer(context, appID: appID), delay: effects.delay)
    }

    /// Runs the handler for `context` and turns its answer or error into a response.
    func answer(_ context: GraphContext, appID: String) -> HTTPResponse {
        do {
            var context = context
            let answer = try route(&context)
            var headers = graphHeaders(appID: appID)
            for field in answer.headers { headers[field.name] = field.value }  // Rare: pictures only.
            return HTTPResponse(status: answer.status, headers: headers, body: answer.data)
        } catch let error as GraphError {
            return graphErrorResponse(error, appID: appID)
        } catch {
            return graphErrorResponse(.unknown, appID: appID)
        }
    }

    func graphContext(
        _ request: EmulatorRequest, segments: [String], versionPrefix: String, isBatchItem: Bool
    )
        throws -> GraphContext
    {
        let parameters = try Parameters.of(request)
        guard parameters.pairs.count <= limits.maxParameters else {
            throw GraphError.invalidParameter("Too many parameters (the emulator accepts \(limits.maxParameters)).")
        }
        var method = request.method == .head ? HTTPMethod.get : request.method
        if let override = parameters["method"], method == .get || method == .post {
            method = HTTPMethod(rawValue: override)
        }
        guard [.get, .post, .delete].contains(method) else { throw GraphError.unsupportedMethod(method) }
        var context = GraphContext(
            request: request, method: method, segments: segments, parameters: parameters, caller: nil,
            tokenError: nil, versionPrefix: versionPrefix, isBatchItem: isBatchItem)
        if let token = Self.accessToken(in: request, parameters: parameters) {
            do { context.caller = try resolve(token: token, consumeScenarios: true) } catch let error as GraphError {
                context.tokenError = error
            }
        }
        return context
    }

    /// The token from `access_token`, or from an `Authorization: Bearer|OAuth` header.
    static func accessToken(in request: EmulatorRequest, parameters: Parameters) -> String? {
        if let token = parameters.nonEmpty("access_token") { return token }
        guard let header = request.headers["Authorization"] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2, ["bearer", "oauth"].contains(parts[0].lowercased()) else { return nil }
        let token = parts[1].trimmedASCII
        return token.isEmpty ? nil : token
    }

    func appID(for context: GraphContext) -> String {
        if let caller = context.caller { return caller.appID }
        if let clientID = context.parameters["client_id"], apps[clientID] != nil { return clientID }
        return defaultApp.id
    }

    /// The headers on every Graph answer.
    func graphHeaders(appID: String, traceID: String? = nil) -> HTTPHeaders {
        [
            "Content-Type": "application/json; charset=UTF-8",
            "facebook-api-version": configuration.graphVersion,
            "x-fb-trace-id": traceID ?? Self.makeTraceID(),
            "X-App-Usage": appUsageHeader(appID: appID),
            "Cache-Control": "private, no-cache, no-store, must-revalidate",
            "Access-Control-Allow-Origin": "*",
        ]
    }

    /// A Graph error as Facebook sends it: the envelope, its status, `WWW-Authenticate` for token
    /// errors, and any headers of the error itself (usage headers for throttling).
    func graphErrorResponse(_ error: GraphError, appID: String) -> HTTPResponse {
        let traceID = Self.makeTraceID()
        var headers = graphHeaders(appID: appID, traceID: traceID)
        if error.challengesToken {
            headers["WWW-Authenticate"] =
                "OAuth \"Facebook Platform\" \"invalid_token\" \"\(error.message.replacingOccurrences(of: "\"", with: "'"))\""
        }
        for field in error.headers { headers[field.name] = field.value }
        return HTTPResponse(
            status: error.status, headers: headers, body: error.envelope(traceID: traceID).jsonData)
    }

    /// An 11-character support id like Facebook's `fbtrace_id`. Not a secret: a SplitMix64
    /// sequence seeded from the system generator is enough, and costs no system call.
    static func makeTraceID() -> String {
        var bits = traceSequence.withLock { state -> UInt64 in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var characters = [UInt8](repeating: 0, count: 11)
        for index in characters.indices {
            characters[index] = traceAlphabet[Int(bits & 63)]
            bits >>= 6
        }
        return String(decoding: characters, as: UTF8.self)
    }

    private static let traceSequence = Mutex(UInt64.random(in: .min ... .max))
    private static let traceAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    // MARK: - Tokens

    /// Who `token` belongs to, or why it is refused.
    ///
    /// `consumeScenarios` counts a token scenario's answer against its `count`; `debug_token`
    /// inspects without consuming.
    func resolve(token: String, consumeScenarios: Bool) throws -> Caller {
        guard token.utf8.count <= 512 else { throw GraphError.invalidToken }
        if let bar = token.utf8.firstIndex(of: UInt8(ascii: "|")) {
            let appID = String(token[..<bar])
            let rest = String(token[token.utf8.index(after: bar)...])
            guard let app = apps[appID] else { throw GraphError.invalidToken }
            if rest == app.secret { return Caller(kind: .app, appID: appID, userID: nil, token: token) }
            if rest == app.clientToken { return Caller(kind: .client, appID: appID, userID: nil, token: token) }
            if let record = tokens[token], record.kind == .app {
                return Caller(kind: .app, appID: appID, userID: nil, token: token)
            }
            throw GraphError.invalidToken
        }
        guard let record = tokens[token], let userID = record.userID else { throw GraphError.invalidToken }
        if let error = tokenProblem(record, consumeScenarios: consumeScenarios) { throw error }
        return Caller(kind: .user, appID: record.appID, userID: userID, token: token)
    }

    /// Why a user token no longer works, or `nil` when it does.
    func tokenProblem(_ record: TokenRecord, consumeScenarios: Bool) -> GraphError? {
        guard let userID = record.userID, users[userID] != nil else { return .userLoggedOut }
        let grant = grants[GrantKey(appID: record.appID, userID: userID)]
        if let grant, record.serial <= grant.revokedThroughSerial || !grant.isInstalled {
            return .appNotAuthorized(appID: record.appID)
        }
        let now = self.now
        if let expiry = record.expiresAt, expiry <= now { return .sessionExpired(at: expiry, now: now) }
        if let grant, grant.dataAccessExpiresAt <= now { return .dataAccessExpired }
        for (index, active) in scenarios.enumerated() where active.setting.scenario.isTokenScenario {
            if let user = active.setting.user, user != userID { continue }
            let scenario = active.setting.scenario
            guard scenario.appliesToLaterTokens || record.serial <= active.tokenSerialAtActivation else { continue }
            if consumeScenarios { consumeScenario(at: index) }
            switch scenario {
            case .appRemoved: return .appNotAuthorized(appID: record.appID)
            case .passwordChanged: return .passwordChanged
            case .checkpointed: return .checkpointed
            case .unconfirmedUser: return .unconfirmedUser
            case .tokenExpired: return .sessionExpired(at: min(record.expiresAt ?? now, now), now: now)
            default: return .invalidSession
            }
        }
        return nil
    }

    /// Issues a user token.
    func issueUserToken(appID: String, userID: String, longLived: Bool) throws -> TokenRecord {
        let lifetime = longLived ? configuration.longLivedTokenLifetime : configuration.shortLivedTokenLifetime
        let record = TokenRecord(
            token: try Self.facebookLikeToken(), kind: .user, appID: appID, userID: userID,
            serial: takeSerial(), issuedAt: now, expiresAt: now.addingTimeInterval(lifetime), isLongLived: longLived)
        store(record)
        return record
    }

    /// A user token shaped like Facebook's: `EAA` and letters and digits only (no `-` or `_`),
    /// about 200 characters, so that what handles and redacts real tokens is exercised as it
    /// will be in production.
    static func facebookLikeToken() throws -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var bytes: [UInt8] = Array("EAA".utf8)
        while bytes.count < 200 {
            // 248 = 4 × 62: bytes at or above it are dropped, so every character is equally likely.
            for byte in try Crypto.randomBytes(count: 240) where byte < 248 && bytes.count < 200 {
                bytes.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func takeSerial() -> Int {
        defer { nextSerial += 1 }
        return nextSerial
    }

    func store(_ record: TokenRecord) {
        tokens[record.token] = record
        markDirty()
        // Expired tokens go first, then the oldest; O(log n) a token (TokenTable).
        tokens.evict(downTo: limits.maxTokens, now: now)
    }

    // MARK: - Grants

    func grant(appID: String, userID: String) -> GrantRecord? { grants[GrantKey(appID: appID, userID: userID)] }

    /// Records a login: grants and declines, installs the app, renews data access.
    func recordLogin(appID: String, userID: String, granted: [String], declined: [String], audience: Audience?) {
        let key = GrantKey(appID: appID, userID: userID)
        var record =
            grants[key]
            ?? GrantRecord(
                appID: appID, userID: userID, granted: [], declined: [], audience: .allFriends,
                dataAccessExpiresAt: now, revokedThroughSerial: 0, isInstalled: false)
        if !record.isInstalled {
            record.isInstalled = true
            installedCount[appID, default: 0] += 1
        }
        record.grant(["public_profile"] + granted.filter { $0 != "public_profile" })
        record.decline(declined.filter { $0 != "public_profile" })
        if let audience { record.audience = audience }
        record.dataAccessExpiresAt = now.addingTimeInterval(configuration.dataAccessLifetime)
        grants[key] = record
        markDirty()
    }

    /// Removes the app for a person: every permission goes and their tokens stop working (190/458).
    func removeApp(appID: String, userID: String) {
        let key = GrantKey(appID: appID, userID: userID)
        guard var record = grants[key] else { return }
        if record.isInstalled { installedCount[appID, default: 1] -= 1 }
        record.isInstalled = false
        record.granted = []
        record.declined = []
        record.revokedThroughSerial = nextSerial - 1
        grants[key] = record
        markDirty()
    }

    /// The permissions a person has granted and declined now, with `permission-revoked` applied.
    func effectivePermissions(appID: String, userID: String) -> (granted: [String], declined: [String]) {
        guard let record = grant(appID: appID, userID: userID), record.isInstalled else { return ([], []) }
        var granted = record.granted
        var declined = record.declined
        for revoked in revokedPermissions(userID: userID) where granted.contains(revoked) {
            granted.removeAll { $0 == revoked }
            declined.append(revoked)
        }
        return (granted, declined)
    }

    /// The permissions `permission-revoked` takes from `userID` now.
    func revokedPermissions(userID: String) -> [String] {
        scenarios.compactMap { active in
            guard active.setting.scenario == .permissionRevoked,
                active.setting.user == nil || active.setting.user == userID
            else { return nil }
            return active.setting.permission ?? "publish_actions"
        }
    }

    /// Counts one answer against the `permission-revoked` scenario that took `permission` from `userID`.
    func consumeRevocation(of permission: String, userID: String) {
        if let index = scenarios.firstIndex(where: {
            $0.setting.scenario == .permissionRevoked && ($0.setting.user == nil || $0.setting.user == userID)
                && ($0.setting.permission ?? "publish_actions") == permission
        }) {
            consumeScenario(at: index)
        }
    }

    // MARK: - Scenarios

    struct ScenarioEffects {
        var error: GraphError?
        var delay: Duration = .zero
        var dropConnection = false
    }

    /// What the active scenarios do to this Graph request (token scenarios act when the token is
    /// resolved instead). A call inside a batch gets only the error scenarios: delays and dropped
    /// connections belong to the batch's own request.
    func scenarioEffects(for context: GraphContext) -> ScenarioEffects {
        var effects = ScenarioEffects()
        var consumed: [Int] = []
        let userID = context.caller?.userID
        let isPublish = context.method == .post && context.segments.last == "feed"
        for (index, active) in scenarios.enumerated() {
            let scenario = active.setting.scenario
            if scenario.isTokenScenario || scenario == .permissionRevoked { continue }
            if let user = active.setting.user, user != userID { continue }
            if let path = active.setting.path, path != context.segments.joined(separator: "/") { continue }
            if context.isBatchItem, scenario == .slow || scenario == .dropConnection { continue }
            switch scenario {
            case .slow:
                effects.delay += .milliseconds(active.setting.delayMs ?? 1000)
                consumed.append(index)
            case .dropConnection:
                effects.dropConnection = true
                consumed.append(index)
            case .duplicatePost:
                guard isPublish, effects.error == nil else { continue }
                effects.error = .duplicatePost
                consumed.append(index)
            default:
                guard effects.error == nil else { continue }
                effects.error = injectedError(active, context: context)
                consumed.append(index)
            }
            if effects.dropConnection { break }
        }
        for index in consumed.reversed() { consumeScenario(at: index) }
        return effects
    }

    /// The error an error-injecting scenario answers with, with its headers.
    func injectedError(_ active: ActiveScenario, context: GraphContext) -> GraphError {
        let appID = appID(for: context)
        let minutes = active.setting.regainAccessMinutes ?? 5
        func businessUsage(id: String, type: String) -> String {
            JSONValue.object([
                id: .array([
                    .object([
                        "type": .string(type), "call_count": .int(100), "total_cputime": .int(91),
                        "total_time": .int(95), "estimated_time_to_regain_access": .int(minutes),
                    ])
                ])
            ]).jsonText
        }
        let full = #"{"call_count":100,"total_cputime":91,"total_time":95}"#
        let objectID = context.caller?.userID ?? appID
        switch active.setting.scenario {
        case .appThrottled:
            return .appThrottled(headers: [
                "X-App-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: appID, type: "app"),
            ])
        case .userThrottled:
            return .userThrottled(headers: ["X-Business-Use-Case-Usage": businessUsage(id: objectID, type: "user")])
        case .pageThrottled:
            return .pageThrottled(headers: [
                "X-Page-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: objectID, type: "pages"),
            ])
        case .rateLimited:
            return .customRateLimited(headers: [
                "X-App-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: appID, type: "custom"),
            ])
        case .transient: return .temporary
        case .unknownError: return .unknown
        case .userMessage: return .blockedWithUserMessage
        default: return .unknown
        }
    }

    /// Activates a scenario; `permission-revoked` and the others stay until cleared or their `count`
    /// runs out.
    @discardableResult
    func activate(_ setting: ScenarioSetting) -> ActiveScenario {
        let active = ActiveScenario(
            id: "s\(nextScenarioNumber)", setting: setting, remaining: setting.count,
            tokenSerialAtActivation: nextSerial - 1)
        nextScenarioNumber += 1
        scenarios.append(active)
        if scenarios.count > limits.maxScenarios { scenarios.removeFirst(scenarios.count - limits.maxScenarios) }
        return active
    }

    func consumeScenario(at index: Int) {
        guard scenarios.indices.contains(index), let remaining = scenarios[index].remaining else { return }
        if remaining <= 1 {
            scenarios.remove(at: index)
        } else {
            scenarios[index].remaining = remaining - 1
        }
    }

    // MARK: - Usage

    func appUsageHeader(appID: String) -> String {
        let (calls, time) = usage.lastHour(appID: appID, at: now)
        let allowance = Double(max(1, configuration.hourlyCallsPerUser * max(1, installedCount[appID] ?? 0)))
        let callShare = Int(Double(calls) * 100 / allowance)
        // Each call is budgeted 50 ms of handler time.
        let timeShare = Int(time * 100 / (allowance * 0.05))
        return #"{"call_count":\#(callShare),"total_cputime":\#(timeShare),"total_time":\#(timeShare)}"#
    }

    /// Error 4 when rate limits are enforced and the app has used its hourly allowance.
    func rateLimitError(appID: String) -> GraphError? {
        guard configuration.enforcesRateLimits else { return nil }
        let (calls, _) = usage.lastHour(appID: appID, at: now)
        let allowance = max(1, configuration.hourlyCallsPerUser * max(1, installedCount[appID] ?? 0))
        guard calls > allowance else { return nil }
        let minutes = usage.minutesUntilBelow(allowance, appID: appID, at: now)
        let usageText = #"{"call_count":\#(calls * 100 / allowance),"total_cputime":0,"total_time":0}"#
        let business = JSONValue.object([
            appID: .array([
                .object([
                    "type": .string("app"), "call_count": .int(calls * 100 / allowance), "total_cputime": .int(0),
                    "total_time": .int(0), "estimated_time_to_regain_access": .int(minutes),
                ])
            ])
        ]).jsonText
        return .appThrottled(headers: ["X-App-Usage": usageText, "X-Business-Use-Case-Usage": business])
    }

    // MARK: - People

    func addUser(_ user: EmulatedUser) {
        if users[user.id] == nil { userOrder.append(user.id) }
        users[user.id] = user
        markDirty()
    }

    func removeUser(_ id: String) {
        users[id] = nil
        userOrder.removeAll { $0 == id }
        for key in grants.keys where key.userID == id {
            if grants[key]?.isInstalled == true { installedCount[key.appID, default: 1] -= 1 }
            grants[key] = nil
        }
        tokens.removeAll { $0.userID == id }
        posts[id] = nil
        markDirty()
    }

    /// A fresh numeric user id.
    func makeUserID() throws -> String {
        for _ in 0..<100 {
            let bytes = try Crypto.randomBytes(count: 8)
            let number = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100_000_000_000
            let id = "1000" + String(number).leftPadded(11)
            if users[id] == nil { return id }
        }
        throw GraphError.unknown
    }

    /// The person the dialog acts for: `requested` if known, else the first person.
    func dialogUser(_ requested: String?, appID: String) -> EmulatedUser? {
        if let requested, let user = users[requested], user.testUserAppID == nil || user.testUserAppID == appID {
            return user
        }
        return userOrder.lazy.compactMap { self.users[$0] }.first { !$0.isTestUser }
            ?? userOrder.lazy.compactMap { self.users[$0] }.first
    }

    // MARK: - Time and persistence

    /// Moves the emulator's clock forward.
    func advanceClock(by seconds: TimeInterval) {
        clockOffset += seconds
        markDirty()
    }

    /// Notes that the state changed; the file is written shortly after, once for a burst of changes.
    func markDirty() {
        guard writer != nil else { return }
        isDirty = true
        scheduleSave()
    }

    private func scheduleSave() {
        guard writer != nil, !saveScheduled else { return }
        saveScheduled = true
        Task {
            try? await Task.sleep(for: .milliseconds(50))
            await self.saveNow()
        }
    }

    /// Writes the state file now (on the writer's own queue) and waits for it, and for any write
    /// queued before it: when this returns, the file holds everything done so far (what
    /// `Emulator.stop()` relies on before a process exits).
    package func saveNow() async {
        guard let writer else { return }
        let failure: (any Error)? = await withCheckedContinuation { continuation in
            lock.withLock { _ in
                saveScheduled = false
                guard isDirty else {
                    // Nothing new, but a scheduled save may still be writing: wait for it.
                    writer.afterQueuedWrites { continuation.resume(returning: nil) }
                    return
                }
                isDirty = false
                // Queued under the lock, so snapshots reach the file in the order they were taken.
                writer.enqueue(
                    PersistedState(
                        users: userOrder.compactMap { users[$0] },
                        tokens: tokens.values.sorted { $0.serial < $1.serial },
                        grants: grants.values.sorted { ($0.appID, $0.userID) < ($1.appID, $1.userID) },
                        posts: posts.values.flatMap { $0 }.sorted { $0.number < $1.number }, nextSerial: nextSerial,
                        nextPostNumber: nextPostNumber, clockOffset: clockOffset)
                ) { error in continuation.resume(returning: error) }
            }
        }
        if let failure {
            lock.withLock { _ in isDirty = true }
            configuration.requestLog?("emulator: could not save its state: \(failure)")
        }
    }

    // MARK: - URLs

    /// The origin to put in absolute URLs: the `Host` the client used when it is a loopback one,
    /// else where the emulator listens.
    func origin(for request: EmulatorRequest) -> String {
        if let host = request.headers["Host"], Self.isLoopbackHost(host) { return "http://" + host }
        if let baseURL { return baseURL.absoluteString.trimmingSuffix("/") }
        return "http://127.0.0.1"
    }

    static func isLoopbackHost(_ host: String) -> Bool {
        let name: Substring
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            name = host[...close]
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isNumber)) else { return false }
            return name == "[::1]"
        }
        let parts = host.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.count == 1 || parts[1].allSatisfy(\.isNumber) else { return false }
        return parts[0] == "127.0.0.1" || parts[0] == "localhost"
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }

    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

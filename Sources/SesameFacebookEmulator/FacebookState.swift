import Foundation
import Sesame
import SesameEmulator

/// The Facebook emulator's state and the handlers that read and change it.
///
/// Not `Sendable`: the one instance lives inside ``EmulatorEngine``'s `Locked` lock, and
/// every handler runs in that lock's closure, start to finish, without suspending: under the
/// write lock, except the reads ``readsOnly(_:)`` picks, which run side by side under the read
/// lock and change nothing but what has a lock of its own (``usage``, ``parsedFieldLists``). The
/// handlers are split by job over the `Engine+*.swift` files.
final class FacebookState {
    struct GrantKey: Hashable, Sendable {
        var appID: String
        var userID: String
    }

    let configuration: EmulatorConfiguration
    var limits: EmulatorLimits { configuration.limits }
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
    /// Behind its own lock: reads answered side by side count their calls here.
    let usage = Locked(UsageMeter())
    var installedCount: [String: Int] = [:]
    /// Where the emulator listens, once started; absolute URLs are built from it.
    var baseURL: URL?
    /// `fields` parameters already parsed, by text: clients send the same few again and again
    /// (`id,name,email` on every `GET /me`). Bounded; emptied when full. Behind its own lock, as
    /// reads answered side by side fill it.
    let parsedFieldLists = Locked([String: FieldList]())

    /// Whether changes are written to a state file.
    let persists: Bool
    /// Changed since the last snapshot was queued for the state file.
    var isDirty = false
    /// A save is scheduled and has not yet taken its snapshot.
    var saveScheduled = false

    /// Creates the state: the saved state when there is a state file, then the configured people
    /// and start-up scenarios.
    ///
    /// - Throws: `EmulatorError` for a bad configuration or a state file that cannot be used.
    init(configuration: EmulatorConfiguration) throws {
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
        persists = configuration.stateFileURL != nil
        if let url = configuration.stateFileURL, let saved = try StateWriter.load(url) { restore(saved) }
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

    // MARK: - Dispatch

    /// Answers one request; its JSON is encoded, and a Graph answer finished, by the caller after
    /// the lock is released.
    func handle(_ request: EmulatorRequest) -> PendingOutcome {
        let started = ContinuousClock.now
        let outcome = dispatch(request)
        if let appID = outcome.usageAppID {
            let time = ContinuousClock.now - started
            let now = self.now
            usage.withLock { $0.addTime(time, appID: appID, at: now) }
        }
        return outcome
    }

    /// Whether `request` only reads, whatever the state, so long as no scenario is active (a
    /// scenario may be used up by the call): a `GET` of `/me` or `/me/permissions`, with no
    /// `method` override. ``EmulatorEngine`` answers these under its read lock, side by side,
    /// when ``scenarios`` is empty. Worked out from the request alone, before any lock.
    static func readsOnly(_ request: EmulatorRequest) -> Bool {
        guard request.method == .get, (try? request.parameters())?["method"] == nil else { return false }
        let segments = request.graphPath().segments
        guard segments.first == "me" else { return false }
        return segments.count == 1 || (segments.count == 2 && segments[1] == "permissions")
    }

    private func dispatch(_ request: EmulatorRequest) -> PendingOutcome {
        guard request.path.utf8.count <= limits.maxPathBytes else {
            return .respond(graphErrorResponse(.invalidParameter("The path is too long."), appID: defaultApp.id))
        }
        guard request.body.count <= limits.maxBodyBytes else {
            return .respond(
                graphErrorResponse(.invalidParameter("The request body is too large."), appID: defaultApp.id))
        }
        let all = request.pathSegments()
        if all.first == "__sesame" {
            return .respond(admin(request, segments: Array(all.dropFirst())))
        }
        let (segments, versionPrefix) = request.graphPath()
        if let page = page(request, segments: segments, versionPrefix: versionPrefix) { return .respond(page) }
        // Finished (``finish(_:_:versionPrefix:graphVersion:)``) once the lock is released.
        var outcome = graph(request, segments: segments, versionPrefix: versionPrefix)
        outcome.graphVersionPrefix = versionPrefix
        outcome.servedGraphVersion = Self.servedVersion(versionPrefix, at: now)
        return outcome
    }

    /// A path's segments without a leading Graph version, and that version as `/vN.N` (or "").
    static func splitVersion(_ segments: [String]) -> (segments: [String], versionPrefix: String) {
        guard let first = segments.first, isVersion(first) else { return (segments, "") }
        return (Array(segments.dropFirst()), "/" + first)
    }

    /// Whether `segment` is a Graph API version such as `v19.0` or `v2`.
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
        guard persists else { return }
        isDirty = true
    }

    /// Whether a save should be scheduled now: there are changes and no save is waiting. The
    /// engine asks after each locked call and schedules the save outside the lock.
    func takeSaveRequest() -> Bool {
        guard isDirty, !saveScheduled else { return false }
        saveScheduled = true
        return true
    }

    /// What the state file holds.
    func snapshot() -> PersistedState {
        PersistedState(
            users: userOrder.compactMap { users[$0] },
            tokens: tokens.values.sorted { $0.serial < $1.serial },
            grants: grants.values.sorted { ($0.appID, $0.userID) < ($1.appID, $1.userID) },
            posts: posts.values.flatMap { $0 }.sorted { $0.number < $1.number }, nextSerial: nextSerial,
            nextPostNumber: nextPostNumber, clockOffset: clockOffset)
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

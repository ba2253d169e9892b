import Foundation
import Sesame
import SesameCurl
import SesameFacebook
import SesameFacebookEmulator
import SesameHTTPServer
import SesameTestSupport
import SesameTesting
import Testing

/// A started emulator, a CurlTransport that counts what it sends, and a provider pointed at it.
struct FacebookHarness: Sendable {
    let emulator: Emulator
    let endpoints: EmulatorEndpoints
    let transport: CountingTransport
    let provider: FacebookProvider
    let lockDirectory: URL
    var userID: String { emulator.configuration.users.first!.id }
    var app: EmulatedApp { emulator.configuration.defaultApp }

    static func start(_ configure: (inout EmulatorConfiguration) -> Void = { _ in }) async throws -> FacebookHarness {
        var configuration = EmulatorConfiguration()
        configure(&configuration)
        let emulator = try Emulator(configuration: configuration)
        let endpoints = try await emulator.start()
        let app = configuration.defaultApp
        let provider = FacebookProvider(
            appID: app.id, graphVersion: configuration.graphVersion, clientToken: app.clientToken,
            dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL)
        let lockDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-fb-locks-\(UUID().uuidString)", isDirectory: true)
        return FacebookHarness(
            emulator: emulator, endpoints: endpoints, transport: CountingTransport(CurlTransport()),
            provider: provider, lockDirectory: lockDirectory)
    }

    func stop() async {
        await emulator.stop()
        try? FileManager.default.removeItem(at: lockDirectory)
    }

    /// Runs `body` with a started harness and awaits its stop afterwards, whether `body` threw or not.
    ///
    /// A body whose only `try`s are in `#expect` or `#require` is written `{ harness throws in`: the
    /// compiler decides whether a closure throws before it expands the macros in it.
    static func with<T: Sendable>(
        _ configure: (inout EmulatorConfiguration) -> Void = { _ in }, _ body: (FacebookHarness) async throws -> T
    ) async throws -> T {
        try await withStarted({ try await start(configure) }, stop: { await $0.stop() }, body)
    }

    /// A session on `store` whose logins go through the emulator's device login, answered by `answer`.
    func session(
        store: any CredentialStore, answer: DeviceAnswer = .approve(), loginUI: (any LoginUI)? = nil,
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil,
        clock: any Clock<Duration> = ManualClock(autoAdvance: true),
        now: @escaping @Sendable () -> Date = { Date() }, refreshLeeway: TimeInterval = 300,
        transport: (any HTTPTransport)? = nil
    ) -> FacebookSession {
        let transport = transport ?? self.transport
        let login =
            loginUI
            ?? FacebookSession.deviceLogin(
                provider: provider, transport: transport, presenter: DeviceApprover(emulator: emulator, answer: answer),
                clock: ManualClock(autoAdvance: true))
        return FacebookSession(
            provider: provider, transport: transport, store: store, loginUI: login,
            configuration: .init(refreshLocking: .file(refreshLock), refreshLeeway: .seconds(refreshLeeway)),
            recoveryDelegate: recoveryDelegate, recoveryPolicy: RecoveryPolicy(jitter: .none), clock: clock, now: now)
    }

    /// A session opened silently from a token the emulator issued and `store` holds: where most
    /// of the Scrumptious sample's situations start.
    func openedSession(
        store: any CredentialStore, answer: DeviceAnswer = .approve(),
        recoveryDelegate: (any FacebookRecoveryDelegate)? = nil,
        clock: any Clock<Duration> = ManualClock(autoAdvance: true)
    ) async throws -> FacebookSession {
        try await storeIssuedToken(in: store)
        let session = session(store: store, answer: answer, recoveryDelegate: recoveryDelegate, clock: clock)
        try await session.openActiveSession(allowLoginUI: false)
        return session
    }

    var key: CredentialKey { CredentialKey(provider: .facebook, appID: provider.appID, account: "default") }

    /// The refresh lock of the default account, in ``lockDirectory``.
    var refreshLock: TokenRefreshLock { TokenRefreshLock(key: key, directory: lockDirectory) }

    /// A token the emulator issued, saved in `store` as a session would have saved it.
    @discardableResult
    func storeIssuedToken(
        in store: any CredentialStore, permissions: [String] = ["email"], expiresAt: Date? = nil,
        refreshDate: Date = Date()
    ) async throws -> AccessToken {
        let string = try await emulator.issueToken(permissions: permissions, longLived: true)
        let token = AccessToken(
            tokenString: string, provider: .facebook, appID: provider.appID, userID: userID,
            permissions: PermissionSet(granted: permissions + ["public_profile"]),
            expirationDate: expiresAt ?? Date().addingTimeInterval(50 * 86_400), refreshDate: refreshDate)
        try await store.save(StoredCredential(key: key, token: token))
        return token
    }

    /// A file store in a fresh temporary directory.
    static func fileStore() -> FileCredentialStore {
        FileCredentialStore(
            url: FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-fb-\(UUID().uuidString)/credentials.json"))
    }
}

/// How the person answers a device login in the emulator.
enum DeviceAnswer: Sendable {
    case approve(grant: [String]? = nil, decline: [String]? = nil)
    case deny
}

/// The person on their phone: answers the device login as soon as the code is shown.
struct DeviceApprover: DeviceCodePresenter {
    let emulator: Emulator
    let answer: DeviceAnswer

    func present(_ authorization: DeviceAuthorization) async {
        switch answer {
        case .approve(let grant, let decline):
            try? await emulator.approveDevice(userCode: authorization.userCode, grant: grant, decline: decline)
        case .deny:
            try? await emulator.denyDevice(userCode: authorization.userCode)
        }
    }
}

/// The person in the browser: approves the emulator's dialog and follows its redirect to the
/// loopback receiver. Records the dialog URLs it was opened with.
final class EmulatorBrowser: BrowserOpener {
    let emulator: Emulator
    let transport: any HTTPTransport
    let decline: [String]
    private let opened = Locked<[URL]>([])

    init(emulator: Emulator, transport: any HTTPTransport, decline: [String] = []) {
        self.emulator = emulator
        self.transport = transport
        self.decline = decline
    }

    var urls: [URL] { opened.withLock { $0 } }

    func open(_ url: URL) async throws {
        opened.withLock { $0.append(url) }
        let redirect = try await emulator.approveDialog(url: url, decline: decline)
        let transport = transport
        Task { _ = try? await transport.send(HTTPRequest(url: redirect)) }
    }
}

/// Counts requests by path, around another transport.
final class CountingTransport: HTTPTransport {
    let base: any HTTPTransport
    private let counts = Locked<[String: Int]>([:])

    init(_ base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let path = request.url.path
        counts.withLock { $0[path, default: 0] += 1 }
        return try await base.send(request)
    }

    /// Requests whose path ends with `suffix`.
    func count(endingWith suffix: String) -> Int {
        counts.withLock { $0.filter { $0.key.hasSuffix(suffix) }.values.reduce(0, +) }
    }
}

/// A recovery delegate that records what it was asked and answers from closures.
final class RecordingRecoveryDelegate: FacebookRecoveryDelegate {
    struct Record: Sendable {
        var permissionRequests: [[Permission]] = []
        var reauthentications: [ReauthenticationReason] = []
        var messages: [(title: String, message: String)] = []
        var retries: [Duration] = []
    }
    private let record = Locked(Record())
    let onPermissions: @Sendable ([Permission]) async throws -> Bool
    let onReauthenticate: @Sendable (ReauthenticationReason) async throws -> Bool

    init(
        onPermissions: @escaping @Sendable ([Permission]) async throws -> Bool = { _ in false },
        onReauthenticate: @escaping @Sendable (ReauthenticationReason) async throws -> Bool = { _ in false }
    ) {
        self.onPermissions = onPermissions
        self.onReauthenticate = onReauthenticate
    }

    var recorded: Record { record.withLock { $0 } }

    func requestPermissions(_ permissions: [Permission]) async throws -> Bool {
        record.withLock { $0.permissionRequests.append(permissions) }
        return try await onPermissions(permissions)
    }

    func reauthenticate(reason: ReauthenticationReason) async throws -> Bool {
        record.withLock { $0.reauthentications.append(reason) }
        return try await onReauthenticate(reason)
    }

    func showMessage(title: String, message: String) async {
        record.withLock { $0.messages.append((title, message)) }
    }

    func willRetry(after delay: Duration, attempt: Int, error: AuthError) async {
        record.withLock { $0.retries.append(delay) }
    }
}

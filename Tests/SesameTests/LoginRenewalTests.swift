import Foundation
import Sesame
import SesameTesting
import Testing

private let provider: ProviderID = "example"
private let key = CredentialKey(provider: provider, appID: "app-1", account: "default")

/// A login whose hour-long token expired ten seconds before `now`, with the refresh token `r1`.
private func expiredLogin(at now: Date) -> AccessToken {
    AccessToken(
        tokenString: "old", provider: provider, appID: "app-1", userID: "user-1",
        expirationDate: now.addingTimeInterval(-10), refreshDate: now.addingTimeInterval(-3610), refreshToken: "r1")
}
private let accessLifetime: TimeInterval = 3600
private let refreshLifetime: TimeInterval = 30 * 86_400

/// The wall clock of a test: moved by hand, never slept on.
private final class TestWallClock: Sendable {
    private let date: Locked<Date>
    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { date = Locked(start) }
    var now: Date { date.withLock { $0 } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

private func invalidGrant(_ detail: String) -> AuthError {
    AuthError(
        category: .authenticationReopenSession, message: "invalid_grant: \(detail)", code: 400, provider: provider)
}

/// An OAuth provider that rotates refresh tokens and revokes the whole family when a refresh
/// token that was already used comes back (as many real providers do), on the test's clock.
private actor RotatingProvider {
    let clock: TestWallClock
    private var current: String?
    private var used: Set<String> = []
    private(set) var refreshes = 0
    private(set) var refused = 0
    private(set) var revokedFamilies = 0
    private var revoked = false
    private var refreshExpiry: Date?
    private var serial = 0

    init(clock: TestWallClock) { self.clock = clock }

    /// A fresh login: a new family.
    func logIn() -> AccessToken {
        revoked = false
        used = []
        return issue(userID: "user-1")
    }

    private func issue(userID: String?) -> AccessToken {
        serial += 1
        let now = clock.now
        let refresh = "refresh-\(serial)"
        current = refresh
        refreshExpiry = now.addingTimeInterval(refreshLifetime)
        return AccessToken(
            tokenString: "access-\(serial)", provider: provider, appID: "app-1", userID: userID,
            expirationDate: now.addingTimeInterval(accessLifetime), refreshDate: now, refreshToken: refresh,
            refreshTokenExpirationDate: refreshExpiry)
    }

    func refresh(_ token: AccessToken) throws -> AccessToken {
        guard let presented = token.refreshToken, !revoked else {
            refused += 1
            throw invalidGrant("revoked")
        }
        if used.contains(presented) {
            revoked = true
            revokedFamilies += 1
            refused += 1
            throw invalidGrant("reused; the family is revoked")
        }
        guard presented == current, let refreshExpiry, refreshExpiry > clock.now else {
            refused += 1
            throw invalidGrant("unknown or expired")
        }
        used.insert(presented)
        refreshes += 1
        return issue(userID: token.userID)
    }

    func revokeAll() { revoked = true }
}

/// A store that fences as a shared database does: every save moves the login's generation, and
/// a renewal's save lands only at the generation its claim read.
private final class FencingStore: CredentialStore {
    private let base = InMemoryCredentialStore()
    private let generation = Locked<Int64>(0)

    func save(_ credential: StoredCredential) async throws {
        generation.withLock { $0 += 1 }
        try await base.save(credential)
    }
    func load(_ key: CredentialKey) async throws -> StoredCredential? { try await base.load(key) }
    func delete(_ key: CredentialKey) async throws -> Bool { try await base.delete(key) }
    func list(provider: ProviderID?) async throws -> [StoredCredential] { try await base.list(provider: provider) }
    var backendDescription: String { "fencing" }

    func withRenewalClaim<T: Sendable>(
        for key: CredentialKey, _ body: @Sendable (RenewalClaim) async throws -> T
    ) async throws -> T {
        try await body(RenewalClaim(stored: try await base.load(key), generation: generation.withLock { $0 }))
    }

    func save(_ credential: StoredCredential, fencedBy claim: RenewalClaim) async throws -> Bool {
        guard generation.withLock({ $0 }) == claim.generation else { return false }
        try await save(credential)
        return true
    }
}

/// A store in a fresh directory, and lock files beside it: what separate processes share.
private struct SharedDisk {
    let directory: URL
    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-renewal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }
    var storeURL: URL { directory.appendingPathComponent("state/credentials.json") }
    /// A store object of its own, as each process has.
    func store() -> FileCredentialStore { FileCredentialStore(url: storeURL) }
    var locking: RefreshLocking { .directory(directory.appendingPathComponent("locks")) }
    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// A shared disk holding a fresh login of a new rotating provider, saved at the test clock's
/// start; the caller removes the disk.
private func diskWithLogin() async throws -> (SharedDisk, TestWallClock, RotatingProvider, AccessToken) {
    let disk = try SharedDisk()
    let clock = TestWallClock()
    let rotating = RotatingProvider(clock: clock)
    let login = await rotating.logIn()
    do {
        try await disk.store().save(StoredCredential(key: key, token: login, savedAt: clock.now))
    } catch {
        disk.remove()
        throw error
    }
    return (disk, clock, rotating, login)
}

/// A session as one process makes it: its own store object, the shared lock directory.
private func processSession(
    _ disk: SharedDisk, _ provider: RotatingProvider, locking: RefreshLocking? = nil
) -> Session {
    let clock = provider.clock
    return Session(
        provider: "example", appID: "app-1", store: disk.store(), refreshLocking: locking ?? disk.locking,
        renewer: .refreshToken(maximumLeeway: 60) { try await provider.refresh($0) }, now: { clock.now })
}

/// What one "process" got: the token, or the error's category.
private enum Outcome: Equatable {
    case token(String)
    case failed(ErrorCategory)
}

/// `count` processes at once, each opening without UI and asking for a valid token.
private func runProcesses(
    _ count: Int, _ disk: SharedDisk, _ provider: RotatingProvider, locking: RefreshLocking? = nil
) async -> [Outcome] {
    await withTaskGroup(of: Outcome.self) { group in
        for _ in 0..<count {
            group.addTask {
                let session = processSession(disk, provider, locking: locking)
                do {
                    guard try await session.open(allowLoginUI: false).isOpen else { return .failed(.invalid) }
                    return .token(try await session.validToken().tokenString)
                } catch let error as AuthError {
                    return .failed(error.category)
                } catch {
                    return .failed(.providerOther)
                }
            }
        }
        return await group.reduce(into: []) { $0.append($1) }
    }
}

/// A lock service of the program's own, as a fleet's database lock would be: one holder per
/// key at a time, the others waiting in turn; it counts what it saw.
private final class InProcessLockService: RefreshLockService {
    private actor Turns {
        var held: Set<CredentialKey> = []
        var waiting: [CredentialKey: [CheckedContinuation<Void, Never>]] = [:]
        var entries = 0
        var mostAtOnce = 0
        var holders = 0

        func acquire(_ key: CredentialKey) async {
            if held.contains(key) {
                await withCheckedContinuation { waiting[key, default: []].append($0) }
            } else {
                held.insert(key)
            }
            entries += 1
            holders += 1
            mostAtOnce = max(mostAtOnce, holders)
        }

        func release(_ key: CredentialKey) {
            holders -= 1
            if var queue = waiting[key], !queue.isEmpty {
                queue.removeFirst().resume()  // the key stays held, by the next in turn
                waiting[key] = queue
            } else {
                held.remove(key)
            }
        }
    }

    private let turns = Turns()
    /// When set, the service cannot be reached: every lock fails with this.
    let failure: CredentialStoreError?

    init(failure: CredentialStoreError? = nil) { self.failure = failure }

    var entries: Int { get async { await turns.entries } }
    var mostAtOnce: Int { get async { await turns.mostAtOnce } }

    func withRefreshLock<T: Sendable>(for key: CredentialKey, _ body: () async throws -> T) async throws -> T {
        if let failure { throw failure }
        await turns.acquire(key)
        do {
            let value = try await body()
            await turns.release(key)
            return value
        } catch {
            await turns.release(key)
            throw error
        }
    }
}

@Suite("A login that keeps working: the core renews from the whole stored login")
struct LoginRenewalTests {
    @Test("a lock service the program supplies keeps twenty sessions with stores of their own to one refresh")
    func lockService() async throws {
        let (disk, clock, rotating, _) = try await diskWithLogin()
        defer { disk.remove() }
        let service = InProcessLockService()
        clock.advance(by: accessLifetime + 1)

        let outcomes = await runProcesses(20, disk, rotating, locking: .service(service))
        let stored = try #require(try await disk.store().load(key))
        #expect(await rotating.refreshes == 1)
        #expect(await rotating.revokedFamilies == 0)
        #expect(outcomes == Array(repeating: .token(stored.token.tokenString), count: 20))
        #expect(await service.entries >= 1, "the renewal did not go through the service")
        #expect(await service.mostAtOnce == 1)
        // No lock file is made when a service keeps the renewals apart.
        #expect(!FileManager.default.fileExists(atPath: disk.directory.appendingPathComponent("locks").path))
        #expect(RefreshLocking.service(service) == .service(service))
        #expect(RefreshLocking.service(service) != .service(InProcessLockService()))
    }

    @Test("a lock service that cannot be reached: nothing is sent, the error says so, and the login is kept as it was")
    func lockServiceUnreachable() async throws {
        let (disk, clock, rotating, login) = try await diskWithLogin()
        defer { disk.remove() }
        let down = CredentialStoreError(kind: .unavailable, message: "The fleet's lock server cannot be reached.")
        clock.advance(by: accessLifetime + 1)

        let session = processSession(disk, rotating, locking: .service(InProcessLockService(failure: down)))
        await #expect(throws: (any Error).self) { try await session.open(allowLoginUI: false) }
        let (refreshes, refused) = (await rotating.refreshes, await rotating.refused)
        #expect(refreshes == 0 && refused == 0, "nothing was sent without the lock")
        let stored = try #require(try await disk.store().load(key))
        #expect(stored.token == login && !stored.needsLogin)
    }

    /// Seconds after the login, and whether the login can still be renewed then.
    static let timePoints: [(after: TimeInterval, renewable: Bool)] = [
        (accessLifetime - 30, true),  // inside the leeway (60 s): due, not yet expired
        (accessLifetime + 1, true),  // just after expiry
        (accessLifetime + 3600, true),  // an hour after
        (refreshLifetime + 1, false),  // after the refresh token's own expiry
    ]

    @Test(
        "twenty processes at each point in time: one refresh and the same token for all, or all told to log in",
        arguments: timePoints)
    func twentyProcesses(after: TimeInterval, renewable: Bool) async throws {
        let (disk, clock, rotating, login) = try await diskWithLogin()
        defer { disk.remove() }

        clock.advance(by: after)
        let outcomes = await runProcesses(20, disk, rotating)
        let stored = try #require(try await disk.store().load(key), "the login is never deleted")
        #expect(await rotating.revokedFamilies == 0)
        if renewable {
            #expect(await rotating.refreshes == 1)
            #expect(stored.token.tokenString != login.tokenString)
            #expect(outcomes == Array(repeating: .token(stored.token.tokenString), count: 20))
        } else {
            #expect(await rotating.refreshes == 0)
            #expect(await rotating.refused == 0, "a refresh token known to be expired is not sent")
            #expect(outcomes == Array(repeating: .failed(.authenticationReopenSession), count: 20))
            #expect(stored.token == login, "kept as it was")
        }
    }

    @Test("fifty processes after each expiry, five expiries in a row: one refresh each, no family revoked")
    func roundsOfFifty() async throws {
        let (disk, clock, rotating, _) = try await diskWithLogin()
        defer { disk.remove() }
        for round in 1...5 {
            clock.advance(by: accessLifetime + 5)
            let outcomes = await runProcesses(50, disk, rotating)
            let stored = try #require(try await disk.store().load(key))
            #expect(await rotating.refreshes == round, "round \(round)")
            #expect(outcomes.allSatisfy { $0 == .token(stored.token.tokenString) }, "round \(round)")
        }
        #expect(await rotating.revokedFamilies == 0)
    }

    @Test("a refused refresh marks the stored login as needing a login, keeps it, and is not sent again")
    func refusedIsMarkedAndKept() async throws {
        let disk = try SharedDisk()
        defer { disk.remove() }
        let clock = TestWallClock()
        let rotating = RotatingProvider(clock: clock)
        let login = await rotating.logIn()
        try await disk.store().save(StoredCredential(key: key, token: login))
        await rotating.revokeAll()
        clock.advance(by: accessLifetime + 1)

        let session = processSession(disk, rotating)
        let error = await #expect(throws: AuthError.self) { try await session.open(allowLoginUI: false) }
        #expect(error?.category == .authenticationReopenSession)
        #expect(error?.message.contains("invalid_grant") == true, "the provider's own error")
        #expect(await session.state.isOpen == false)
        let stored = try #require(try await disk.store().load(key))
        #expect(stored.needsLogin && stored.token == login)
        #expect(session.condition(of: stored) == .needsLogin(.refused))

        // Every later process reads the mark and sends nothing.
        let outcomes = await runProcesses(5, disk, rotating)
        #expect(outcomes == Array(repeating: .failed(.authenticationReopenSession), count: 5))
        #expect(await rotating.refused == 1)
    }

    @Test("invalid_grant after a sibling rotated the refresh token: the sibling's newer login is adopted")
    func siblingRotationIsAdopted() async throws {
        let store = InMemoryCredentialStore()
        let clock = TestWallClock()
        let expired = expiredLogin(at: clock.now)
        try await store.save(StoredCredential(key: key, token: expired))
        var sibling = expired
        sibling.tokenString = "from-sibling"
        sibling.refreshToken = "r2"
        sibling.expirationDate = clock.now.addingTimeInterval(3600)
        let rotated = sibling
        // A process with no lock of ours (another machine) rotates the token while this one's request
        // is on its way, so the provider refuses the used refresh token.
        let session = Session(
            provider: provider, appID: "app-1", store: store,
            renewer: .refreshToken { _ in
                try await store.save(StoredCredential(key: key, token: rotated))
                throw invalidGrant("already used")
            }, now: { clock.now })
        try await session.open(allowLoginUI: false)
        #expect(await session.state == .openTokenExtended)
        #expect(try await session.validToken().tokenString == "from-sibling")
        let stored = try #require(try await store.load(key))
        #expect(!stored.needsLogin, "not marked: the newer login was there")
    }

    @Test("a renewal whose fenced save finds a newer login saved meanwhile saves nothing and uses that login")
    func fencedOutRenewalAdoptsNewerLogin() async throws {
        let store = FencingStore()
        let clock = TestWallClock()
        let expired = expiredLogin(at: clock.now)
        try await store.save(StoredCredential(key: key, token: expired))
        var newer = expired
        newer.tokenString = "newer-login"
        newer.refreshToken = "r-login"
        newer.expirationDate = clock.now.addingTimeInterval(3600)
        let newerLogin = newer
        // The renewal's lock is lost while it waits on the provider, and a new login is saved then.
        let session = Session(
            provider: provider, appID: "app-1", store: store,
            renewer: .refreshToken { old in
                try await store.save(StoredCredential(key: key, token: newerLogin))
                var renewed = old
                renewed.tokenString = "renewed"
                renewed.refreshToken = "r2"
                renewed.expirationDate = clock.now.addingTimeInterval(3600)
                return renewed
            }, now: { clock.now })
        try await session.open(allowLoginUI: false)
        #expect(try await session.validToken().tokenString == "newer-login")
        let stored = try #require(try await store.load(key))
        #expect(stored.token.tokenString == "newer-login" && !stored.needsLogin)
    }

    @Test("an answer refused after the provider rotated the refresh token keeps the new refresh token only")
    func refusedAnswerKeepsRotation() async throws {
        let clock = TestWallClock()
        let expired = AccessToken(
            tokenString: "old-access", provider: provider, appID: "app-1", userID: "user-1",
            expirationDate: clock.now.addingTimeInterval(-10), refreshDate: clock.now.addingTimeInterval(-3610),
            refreshToken: "r1")
        let store = InMemoryCredentialStore([StoredCredential(key: key, token: expired)])
        let refusal = AuthError(category: .invalid, message: "the ID token's signature does not verify")
        let session = Session(
            provider: provider, appID: "app-1", store: store,
            renewer: .refreshToken { current in
                var kept = current
                kept.refreshToken = "r2"
                throw RenewalKeepingRotation(kept: kept, error: refusal)
            }, now: { clock.now })
        let error = await #expect(throws: AuthError.self) { try await session.open(allowLoginUI: false) }
        #expect(error?.message == refusal.message)
        let stored = try #require(try await store.load(key))
        #expect(stored.token.refreshToken == "r2", "the rotated refresh token is kept")
        #expect(stored.token.tokenString == "old-access", "nothing else of the refused answer")
        #expect(!stored.needsLogin)
    }

    @Test("a transient failure to renew a token that still works keeps it in use; an expired one is an error")
    func transientFailure() async throws {
        let clock = TestWallClock()
        let token = AccessToken(
            tokenString: "still-good", provider: provider, appID: "app-1", userID: "user-1",
            expirationDate: clock.now.addingTimeInterval(20), refreshDate: clock.now.addingTimeInterval(-3580),
            refreshToken: "r1")
        let store = InMemoryCredentialStore([StoredCredential(key: key, token: token)])
        let offline = TokenRenewer.refreshToken { _ in
            throw AuthError(category: .retry, message: "no network", provider: provider)
        }
        let session = Session(provider: provider, appID: "app-1", store: store, renewer: offline, now: { clock.now })
        #expect(try await session.open(allowLoginUI: false) == .open)
        #expect(try await session.validToken().tokenString == "still-good")
        clock.advance(by: 60)
        await #expect(throws: AuthError.self) { _ = try await session.validToken() }
        #expect(try await store.load(key)?.needsLogin == false, "a network failure marks nothing")
    }

    @Test(
        "the one decision, from the whole stored login",
        arguments: [
            // (expires in, refresh token, refresh expires in, marked) → condition
            (3600.0, false, nil, false, LoginCondition.valid),
            (30.0, true, nil, false, .renewable(expired: false)),
            (-10.0, true, nil, false, .renewable(expired: true)),
            (-10.0, true, 100.0, false, .renewable(expired: true)),
            (-10.0, true, -5.0, false, .needsLogin(.refreshTokenExpired)),
            (-10.0, false, nil, false, .needsLogin(.expired)),
            (30.0, false, nil, false, .valid),
            (3600.0, true, nil, true, .needsLogin(.refused)),
        ] as [(TimeInterval, Bool, TimeInterval?, Bool, LoginCondition)])
    func condition(
        expiresIn: TimeInterval, hasRefresh: Bool, refreshExpiresIn: TimeInterval?, marked: Bool,
        expected: LoginCondition
    ) {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = AccessToken(
            tokenString: "t", provider: provider, appID: "app-1", expirationDate: now.addingTimeInterval(expiresIn),
            refreshDate: now.addingTimeInterval(expiresIn - 3600), refreshToken: hasRefresh ? "r" : nil,
            refreshTokenExpirationDate: refreshExpiresIn.map { now.addingTimeInterval($0) })
        let renewer = TokenRenewer.refreshToken(maximumLeeway: 60) { $0 }
        let credential = StoredCredential(key: key, token: token, needsLogin: marked)
        #expect(renewer.condition(of: credential, at: now) == expected)
    }

    @Test("logins of two issuers with the same client id and account are kept apart")
    func issuersKeptApart() async throws {
        let disk = try SharedDisk()
        defer { disk.remove() }
        let a = CredentialKey(provider: "oidc", issuer: "https://a.example", appID: "desktop", account: "default")
        let b = CredentialKey(provider: "oidc", issuer: "https://b.example", appID: "desktop", account: "default")
        let store = disk.store()
        try await store.save(
            StoredCredential(key: a, token: AccessToken(tokenString: "token-of-a", provider: "oidc", appID: "desktop")))
        let atB = Session(provider: "oidc", issuer: "https://b.example", appID: "desktop", store: disk.store())
        #expect(try await atB.open(allowLoginUI: false) == .created, "A's login is not B's")
        #expect(try await store.load(b) == nil)
        #expect(try await store.load(a)?.token.tokenString == "token-of-a")
        #expect(
            RefreshLock(key: a, directory: disk.directory).url != RefreshLock(key: b, directory: disk.directory).url)
    }
}

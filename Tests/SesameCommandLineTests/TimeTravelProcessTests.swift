import Foundation
import Sesame
import SesameCurl
import SesameGitHubEmulator
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// Issue 38: many `sesame token` processes at once, at points in time around a login's expiry,
/// against emulators that rotate refresh tokens and revoke a family when a used one comes back.
///
/// The processes' clock cannot be moved, so "the clock moves forward by S" is `cli.age(by: S)`
/// (every stored login S seconds older) and `POST /__sesame/clock {"advance": S}` on the
/// emulator. What the provider saw is read from `GET /__sesame/stats`, as a test driving an
/// emulator in another process would.
@Suite("time travel: sesame token processes at once around a rotating login's expiry", .serialized)
struct TimeTravelProcessTests {
    // MARK: The providers

    /// An emulator that rotates refresh tokens, running in this process, reached over HTTP.
    struct RotatingProvider: Sendable {
        enum Kind: String, Sendable, CaseIterable, CustomTestStringConvertible {
            case oidc
            case github

            var testDescription: String { self == .oidc ? "OpenID emulator" : "GitHub emulator, expiring tokens" }
        }

        var kind: Kind
        /// The OpenID issuer, or the GitHub server's address: where `/__sesame` answers.
        var base: String
        var accessTokenLifetime: TimeInterval
        var refreshTokenLifetime: TimeInterval
        /// What `sesame` needs in its environment to reach the emulator.
        var environment: [String: String]
        /// What `sesame login NAME` needs after the name.
        var loginArguments: [String]

        /// The token endpoint's path, where refresh grants go.
        var tokenPath: String { kind == .oidc ? "/token" : "/login/oauth/access_token" }
        /// The provider's name on the command line.
        var name: String { kind.rawValue }
        /// How long before expiry a token is renewed: a quarter of its lifetime, at most a minute
        /// (OpenID) or five minutes (GitHub).
        var leeway: TimeInterval { min(kind == .oidc ? 60 : 300, accessTokenLifetime / 4) }
    }

    /// Runs `body` with a running emulator of `kind`, and stops it (awaited) however `body` ends.
    static func withProvider<T>(
        _ kind: RotatingProvider.Kind, _ body: (RotatingProvider) async throws -> T
    ) async throws -> T {
        switch kind {
        case .oidc:
            let emulator = try OIDCEmulator(devicePollInterval: 1)
            let issuer = try await emulator.start().issuer
            let provider = RotatingProvider(
                kind: kind, base: issuer, accessTokenLifetime: 3600,
                refreshTokenLifetime: OIDCEmulator.defaultRefreshTokenLifetime, environment: [:],
                loginArguments: ["--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID])
            return try await stopping({ await emulator.stop() }) { try await body(provider) }
        case .github:
            let emulator = GitHubEmulator(expiringTokens: true, devicePollInterval: 1)
            let endpoints = try await emulator.start()
            let provider = RotatingProvider(
                kind: kind, base: endpoints.baseURL.absoluteString, accessTokenLifetime: 28_800,
                refreshTokenLifetime: GitHubEmulator.defaultRefreshTokenLifetime,
                environment: [
                    "SESAME_GITHUB_URL": endpoints.baseURL.absoluteString,
                    "SESAME_GITHUB_CLIENT_ID": GitHubEmulator.defaultClientID,
                ], loginArguments: [])
            return try await stopping({ await emulator.stop() }) { try await body(provider) }
        }
    }

    /// Runs `body`, then `stop`, also when `body` throws.
    static func stopping<T>(_ stop: () async -> Void, _ body: () async throws -> T) async throws -> T {
        let value: T
        do {
            value = try await body()
        } catch {
            await stop()
            throw error
        }
        await stop()
        return value
    }

    // MARK: The admin API

    /// A request to the emulator's admin API; its JSON answer.
    static func admin(
        _ provider: RotatingProvider, _ method: HTTPMethod, _ path: String, _ body: [String: JSONValue]? = nil
    ) async throws -> JSONValue {
        let response = try await CurlTransport().send(
            HTTPRequest(
                method: method, url: try #require(URL(string: "\(provider.base)/__sesame/\(path)")),
                headers: body == nil ? [:] : ["Content-Type": "application/json"],
                body: body.map { Data(JSONValue.object($0).jsonText.utf8) }))
        let answer = String(decoding: response.body, as: UTF8.self)
        #expect(response.isSuccess, "\(method) /__sesame/\(path): \(response.status) \(answer)")
        return try #require(response.json, "\(method) /__sesame/\(path) answered no JSON: \(answer)")
    }

    /// What the emulator's token endpoint did with refresh tokens so far.
    struct RefreshStats: Equatable, CustomStringConvertible {
        var grants: Int
        var refused: Int
        var revokedFamilies: Int
        /// Requests per path.
        var requests: [String: Int]

        var description: String { "grants \(grants), refused \(refused), revoked families \(revokedFamilies)" }
    }

    static func stats(_ provider: RotatingProvider) async throws -> RefreshStats {
        let json = try await admin(provider, .get, "stats")
        func count(_ name: String) throws -> Int {
            try #require(json[name]?.doubleValue.map { Int($0) }, "no \(name) in the stats: \(json)")
        }
        return RefreshStats(
            grants: try count("refresh_grants"), refused: try count("refused_refresh_grants"),
            revokedFamilies: try count("revoked_families"),
            requests: (json["requests"]?.objectValue ?? [:]).compactMapValues { $0.doubleValue.map { Int($0) } })
    }

    /// Moves the clock forward by `seconds` (rounded up to a whole second) for both sides: the
    /// stored logins age, and the emulator's clock advances.
    ///
    /// An OpenID issuer also writes its clock into each ID token it issues (`iat`, `exp`), and
    /// Sesame checks those against its own clock, within a minute; the processes' clock is not
    /// moved, so a refreshed ID token would be "issued in the future" and refused, which is right
    /// for a real clock that far apart and not what these tests are about. The emulator's
    /// `clock-skew` scenario (its ID-token clock behind by the offset) puts its ID tokens back on
    /// the processes' clock; every other date (expiry of access and refresh tokens, reuse
    /// detection) stays on the moved clock.
    static func advance(_ cli: CLIHarness, _ provider: RotatingProvider, by seconds: TimeInterval) async throws {
        let step = seconds.rounded(.up)
        let before = try await admin(provider, .get, "stats")["clock_offset"]?.doubleValue ?? 0
        try await cli.age(by: step)
        let answer = try await admin(provider, .post, "clock", ["advance": .number(step)])
        let offset = before + step
        #expect(answer["offset"]?.doubleValue == offset)
        if provider.kind == .oidc {
            _ = try await admin(provider, .delete, "scenarios")
            _ = try await admin(
                provider, .post, "scenarios", ["scenario": .string("clock-skew"), "seconds": .number(-offset)])
        }
    }

    // MARK: The processes

    /// Logs in with `sesame login NAME`, approving its device code through the admin API.
    static func logIn(_ cli: CLIHarness, to provider: RotatingProvider) async throws {
        let command = ["login", provider.name] + provider.loginArguments
        let process = try await cli.start("sesame", command, environment: provider.environment)
        var approval: (any Error)?
        do {
            let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z0-9]{4}-[A-Z0-9]{4}\n"#)
            let code = try #require(
                printed.firstMatch(of: #/\n\s+([A-Z0-9]{4}-[A-Z0-9]{4})\s*\n/#).map { String($0.1) })
            _ = try await admin(provider, .post, "device", ["user_code": .string(code)])
        } catch {
            approval = error
            process.terminate()
        }
        let result = await process.finish()
        cli.record("sesame \(command.joined(separator: " "))", result)
        if let approval { throw approval }
        try #require(result.status == 0, "sesame login: \(result.standardError)")
    }

    /// Starts `count` `sesame ARGUMENTS` processes at once and waits for every one of them.
    static func runAtOnce(
        _ count: Int, _ cli: CLIHarness, _ arguments: [String], environment: [String: String]
    ) async throws -> (results: [ProcessResult], wallTime: Duration) {
        let clock = ContinuousClock()
        let started = clock.now
        let results = try await withThrowingTaskGroup(of: ProcessResult.self) { group in
            for _ in 0..<count {
                group.addTask { try await cli.run("sesame", arguments, environment: environment) }
            }
            return try await group.reduce(into: [ProcessResult]()) { $0.append($1) }
        }
        return (results, started.duration(to: clock.now))
    }

    /// The one login in the programs' store.
    static func storedLogin(_ cli: CLIHarness) async throws -> StoredCredential {
        let all = try await cli.store.list(provider: nil)
        try #require(all.count == 1, "expected one stored login, found \(all.count)")
        return all[0]
    }

    /// Every secret of `credential`, for the check that none is printed where it should not be.
    static func secrets(of credential: StoredCredential) -> [String] {
        [credential.token.tokenString, credential.token.refreshToken, credential.token.idToken].compactMap { $0 }
    }

    /// Checks that no process printed any of `secrets` on standard error (the expectation names
    /// no secret when it fails).
    static func expectQuietErrors(_ results: [ProcessResult], _ secrets: [String]) {
        let leaks = results.filter { result in
            secrets.contains { $0.count >= 8 && result.standardError.contains($0) }
        }
        #expect(leaks.isEmpty, "\(leaks.count) processes printed a secret on standard error")
    }

    /// Whether every process printed exactly `token` and a newline (compared here, so that a
    /// failed expectation does not print the tokens).
    static func allPrinted(_ token: String, _ results: [ProcessResult]) -> Bool {
        results.allSatisfy { $0.standardOutput == token + "\n" }
    }

    /// What the processes that failed said, without their standard output (a token).
    static func failures(_ results: [ProcessResult]) -> String {
        let failed = results.filter { $0.status != 0 }
        let statuses = Dictionary(grouping: failed, by: \.status).mapValues(\.count)
        return "\(failed.count) of \(results.count) failed (exit statuses: \(statuses)); first: "
            + (failed.first?.standardError ?? "")
    }

    // MARK: Time points around expiry

    /// Where the clock is moved to, relative to the stored access token's expiry.
    enum TimePoint: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case beforeLeeway = "before the leeway"
        case insideLeeway = "just before expiry, inside the leeway"
        case justAfterExpiry = "just after expiry"
        case anHourAfterExpiry = "an hour after expiry"

        var testDescription: String { rawValue }

        /// Seconds from the access token's expiry.
        func offset(leeway: TimeInterval) -> TimeInterval {
            switch self {
            case .beforeLeeway: -(leeway + 60)
            case .insideLeeway: -leeway / 2
            case .justAfterExpiry: 2
            case .anHourAfterExpiry: 3600
            }
        }

        /// Refresh grants the processes should make together: none while the token is not due,
        /// else exactly one.
        var refreshes: Int { self == .beforeLeeway ? 0 : 1 }
    }

    @Test(
        "20 sesame token processes at each point around expiry make exactly one refresh when due, all print the stored token",
        arguments: RotatingProvider.Kind.allCases, TimePoint.allCases)
    func twentyAtOnce(_ kind: RotatingProvider.Kind, _ point: TimePoint) async throws {
        try await Self.withProvider(kind) { provider in
            let cli = try CLIHarness()
            try await Self.logIn(cli, to: provider)
            let login = try await Self.storedLogin(cli)
            let expiry = try #require(login.token.expirationDate, "the login has no expiry: not a rotating login")
            #expect(login.token.refreshToken != nil)
            let before = try await Self.stats(provider)
            #expect(before.grants == 0 && before.refused == 0 && before.revokedFamilies == 0, "\(before)")

            try await Self.advance(
                cli, provider, by: expiry.timeIntervalSinceNow + point.offset(leeway: provider.leeway))
            let (results, wallTime) = try await Self.runAtOnce(
                20, cli, ["token", provider.name], environment: provider.environment)
            print("time travel: \(kind.testDescription), \(point.rawValue): 20 processes in \(wallTime)")

            let after = try await Self.stats(provider)
            #expect(after.grants - before.grants == point.refreshes, "\(after)")
            #expect(after.refused == 0, "\(after)")
            #expect(after.revokedFamilies == 0, "\(after)")
            #expect(results.allSatisfy { $0.status == 0 }, "\(Self.failures(results))")
            let stored = try await Self.storedLogin(cli)
            #expect(!stored.needsLogin)
            let printedStored = Self.allPrinted(stored.token.tokenString, results)
            #expect(printedStored, "\(Set(results.map(\.standardOutput)).count) different outputs")
            let renewed = stored.token.tokenString != login.token.tokenString
            let rotated = stored.token.refreshToken != login.token.refreshToken
            #expect(renewed == (point.refreshes == 1), "renewed: \(renewed)")
            #expect(rotated == (point.refreshes == 1), "refresh token rotated: \(rotated)")
            #expect(stored.token.expirationDate.map { $0 > Date() } == true)
            Self.expectQuietErrors(results, Self.secrets(of: login) + Self.secrets(of: stored))
            cli.expectNoTokenLeaks(Self.secrets(of: login) + Self.secrets(of: stored))
        }
    }

    @Test(
        "after the refresh token's own expiry, 20 sesame token processes exit 77 saying to log in again; nothing is sent and the login stays stored",
        arguments: RotatingProvider.Kind.allCases)
    func refreshTokenExpired(_ kind: RotatingProvider.Kind) async throws {
        try await Self.withProvider(kind) { provider in
            let cli = try CLIHarness()
            try await Self.logIn(cli, to: provider)
            let before = try await Self.stats(provider)

            // The refresh token was issued at the login, a moment ago: a minute past its lifetime
            // it has expired, for Sesame and for the provider alike.
            try await Self.advance(cli, provider, by: provider.refreshTokenLifetime + 60)
            let aged = try await Self.storedLogin(cli)
            let (results, wallTime) = try await Self.runAtOnce(
                20, cli, ["token", provider.name], environment: provider.environment)
            print("time travel: \(kind.testDescription), refresh token expired: 20 processes in \(wallTime)")

            #expect(results.allSatisfy { $0.status == 77 }, "exit statuses: \(results.map(\.status))")
            let printedNothing = results.allSatisfy { $0.standardOutput.isEmpty }
            #expect(printedNothing)
            let messages = Set(results.map(\.standardError))
            #expect(messages.count == 1, "\(messages)")
            for message in messages {
                #expect(message.contains("needs renewing"), "\(message)")
                #expect(message.contains("refresh token"), "\(message)")
                #expect(message.contains("Log in again with 'sesame login \(provider.name)'"), "\(message)")
            }
            // Sesame knows when the refresh token expires: it sends nothing to the provider.
            let after = try await Self.stats(provider)
            #expect(after.grants == before.grants, "\(after)")
            #expect(after.refused == before.refused, "\(after)")
            #expect(after.revokedFamilies == 0, "\(after)")
            #expect(after.requests[provider.tokenPath] == before.requests[provider.tokenPath], "\(after.requests)")

            // Kept as it was: not deleted, not changed, not marked.
            let stored = try await Self.storedLogin(cli)
            let unchanged = stored.token == aged.token
            #expect(unchanged)
            #expect(!stored.needsLogin)
            let status = try await cli.run("sesame", ["status", "--json"], environment: provider.environment)
            #expect(status.status == 77, "\(status.standardError)")
            let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)), "\(status.standardError)")
            let entry = document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == provider.name }
            let account = try #require(entry?["accounts"]?[0], "status shows no login: \(status.standardOutput)")
            #expect(account["needs_login"]?.boolValue == true)
            #expect(account["validity"]?.stringValue == "invalid")
            Self.expectQuietErrors(results, Self.secrets(of: stored))
            cli.expectNoTokenLeaks(Self.secrets(of: stored))
        }
    }

    @Test(
        "50 processes started after expiry against a rotating provider make exactly one refresh, all exit 0, in every round"
    )
    func fiftyAtOnceInRounds() async throws {
        try await Self.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Self.logIn(cli, to: provider)
            var secrets: [String] = []
            for round in 1...3 {
                let login = try await Self.storedLogin(cli)
                secrets += Self.secrets(of: login)
                let expiry = try #require(login.token.expirationDate)
                let before = try await Self.stats(provider)
                try await Self.advance(cli, provider, by: expiry.timeIntervalSinceNow + 5)

                let (results, wallTime) = try await Self.runAtOnce(
                    50, cli, ["token", provider.name], environment: provider.environment)
                let after = try await Self.stats(provider)
                print(
                    "time travel: round \(round): 50 processes in \(wallTime), "
                        + "\(after.grants - before.grants) refresh grant(s)")

                #expect(after.grants - before.grants == 1, "round \(round): \(after)")
                #expect(after.refused == 0, "round \(round): \(after)")
                #expect(after.revokedFamilies == 0, "round \(round): \(after)")
                #expect(results.allSatisfy { $0.status == 0 }, "round \(round): \(Self.failures(results))")
                let stored = try await Self.storedLogin(cli)
                secrets += Self.secrets(of: stored)
                let renewed = stored.token.tokenString != login.token.tokenString
                #expect(renewed, "round \(round)")
                let printedStored = Self.allPrinted(stored.token.tokenString, results)
                #expect(printedStored, "round \(round): \(Set(results.map(\.standardOutput)).count) different outputs")
                Self.expectQuietErrors(results, secrets)
            }
            cli.expectNoTokenLeaks(secrets)
        }
    }

    @Test(
        "a login stored for issuer A is not printed, refreshed at or shown for issuer B with the same client id"
    )
    func issuerIsolation() async throws {
        try await Self.withProvider(.oidc) { issuerA in
            try await Self.withProvider(.oidc) { issuerB in
                let cli = try CLIHarness()
                try await Self.logIn(cli, to: issuerA)
                let login = try await Self.storedLogin(cli)
                let underB = [
                    "SESAME_OIDC_ISSUER": issuerB.base, "SESAME_OIDC_CLIENT_ID": OIDCEmulator.defaultClientID,
                ]

                // A's token is valid: B's command does not print it.
                let valid = try await cli.run("sesame", ["token", "oidc"], environment: underB)
                #expect(valid.status == 77, "exit \(valid.status): \(valid.standardError)")
                let printedA = valid.standardOutput.contains(login.token.tokenString)
                #expect(!printedA, "issuer B's command printed issuer A's token")
                let printedNothing = valid.standardOutput.isEmpty
                #expect(printedNothing)

                // A's token has expired: B's command does not send A's refresh token to B.
                try await Self.advance(cli, issuerA, by: issuerA.accessTokenLifetime + 60)
                let aged = try await Self.storedLogin(cli)
                let expired = try await cli.run("sesame", ["token", "oidc"], environment: underB)
                #expect(expired.status == 77, "exit \(expired.status): \(expired.standardError)")
                let printedAnything = !expired.standardOutput.isEmpty
                #expect(!printedAnything)
                let atB = try await Self.stats(issuerB)
                #expect(atB.grants == 0 && atB.refused == 0, "\(atB)")
                #expect(atB.requests[issuerB.tokenPath] == nil && atB.requests["/userinfo"] == nil, "\(atB.requests)")
                let atA = try await Self.stats(issuerA)
                #expect(atA.grants == 0 && atA.refused == 0, "\(atA)")

                // B's status does not present A's login as B's, nor check it at B.
                let status = try await cli.run("sesame", ["status", "--json"], environment: underB)
                let document = try #require(
                    JSONValue(parsing: Data(status.standardOutput.utf8)), "\(status.standardError)")
                let oidc = document["providers"]?.arrayValue?.first { $0["provider"]?.stringValue == "oidc" }
                #expect(oidc?["details"]?["issuer"]?.stringValue == issuerB.base, "\(status.standardOutput)")
                #expect(oidc?["accounts"]?.arrayValue?.isEmpty ?? true, "\(status.standardOutput)")
                #expect(!status.standardOutput.contains(login.token.userID ?? "-"), "\(status.standardOutput)")
                #expect((try await Self.stats(issuerB)).requests["/userinfo"] == nil)

                // A's login is untouched, and still A's to renew.
                let kept = try await Self.storedLogin(cli)
                let untouched = kept.token == aged.token
                #expect(untouched)
                #expect(!kept.needsLogin)
                let own = try await cli.run("sesame", ["token", "oidc"])
                #expect(own.status == 0, "exit \(own.status): \(own.standardError)")
                let renewed = try await Self.storedLogin(cli)
                let printedRenewed = Self.allPrinted(renewed.token.tokenString, [own])
                #expect(printedRenewed)
                #expect((try await Self.stats(issuerA)).grants == 1)
                cli.expectNoTokenLeaks(Self.secrets(of: login) + Self.secrets(of: renewed))
            }
        }
    }

    // MARK: Found while writing these

    /// Fails on main as of this test: the issuer answers the refresh grant and rotates the refresh
    /// token, Sesame refuses the answer for its ID token and keeps none of it, so the next run
    /// sends the used refresh token; the issuer revokes the whole family and the login needs a
    /// new login. One bad answer (a key rotation, a clock off by more than a minute) ends the
    /// login, and with processes at once, all but the first exit 77.
    @Test(
        "a refresh answer refused for its ID token keeps the rotated refresh token: the next run renews, no family is revoked"
    )
    func refusedAnswerKeepsRotation() async throws {
        try await Self.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Self.logIn(cli, to: provider)
            let login = try await Self.storedLogin(cli)
            let expiry = try #require(login.token.expirationDate)
            try await Self.advance(cli, provider, by: expiry.timeIntervalSinceNow + 5)

            // The issuer rotates the refresh token, and the answer's ID token has a bad signature.
            _ = try await Self.admin(provider, .post, "scenarios", ["scenario": .string("id-token-bad-signature")])
            let refused = try await cli.run("sesame", ["token", "oidc"])
            #expect(refused.status != 0, "the bad ID token was accepted")
            let first = try await Self.stats(provider)
            #expect(first.grants == 1, "\(first)")

            // The next run has a refresh token the issuer still takes.
            let again = try await cli.run("sesame", ["token", "oidc"])
            let second = try await Self.stats(provider)
            #expect(again.status == 0, "exit \(again.status): \(again.standardError)")
            #expect(second.revokedFamilies == 0, "\(second)")
            #expect(second.refused == 0, "\(second)")
            let stored = try await Self.storedLogin(cli)
            #expect(!stored.needsLogin)
            let printedStored = Self.allPrinted(stored.token.tokenString, [again])
            #expect(printedStored)
            Self.expectQuietErrors([refused, again], Self.secrets(of: login) + Self.secrets(of: stored))
        }
    }
}

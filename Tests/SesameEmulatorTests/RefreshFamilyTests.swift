import Foundation
import Sesame
import SesameCurl
import Testing

@testable import SesameEmulator
@testable import SesameGitHubEmulator
@testable import SesameOIDCEmulator

/// The OpenID and GitHub emulators' refresh tokens as a test driving clients in other processes
/// sees them: over HTTP only, the clock moved and the counters read through the admin API.
struct RefreshDriver: Sendable {
    enum Kind: String, CaseIterable, Sendable {
        case oidc, github
    }

    struct Tokens: Sendable {
        var access: String
        var refresh: String
        var refreshExpiresIn: Double?
    }

    enum Outcome: Sendable {
        case tokens(Tokens)
        /// The OAuth `error` and `error_description`.
        case refused(String, String)

        var tokens: Tokens? {
            if case .tokens(let tokens) = self { return tokens }
            return nil
        }
        var error: String? {
            if case .refused(let error, _) = self { return error }
            return nil
        }
    }

    let kind: Kind
    let base: URL
    let transport: CurlTransport
    /// The counters as the emulator object in this process has them.
    let counters: @Sendable () -> RefreshTokenCounters

    /// Runs `body` with an emulator of `kind`, and stops it afterwards, whatever happens.
    static func with(
        _ kind: Kind, accessTokenLifetime: TimeInterval = 600, refreshTokenLifetime: TimeInterval = 3600,
        _ body: (RefreshDriver) async throws -> Void
    ) async throws {
        switch kind {
        case .oidc:
            let emulator = try OIDCEmulator(
                algorithm: "ES256", accessTokenLifetime: accessTokenLifetime,
                refreshTokenLifetime: refreshTokenLifetime)
            let endpoints = try await emulator.start()
            let driver = RefreshDriver(
                kind: kind, base: URL(string: endpoints.issuer)!, transport: loopbackTransport(),
                counters: { emulator.refreshCounters })
            try await running(driver, stop: { await emulator.stop() }, body)
        case .github:
            try await with(
                GitHubEmulator(
                    expiringTokens: true, accessTokenLifetime: accessTokenLifetime,
                    refreshTokenLifetime: refreshTokenLifetime), body)
        }
    }

    /// Runs `body` with `emulator` started, and stops it afterwards, whatever happens.
    static func with(_ emulator: GitHubEmulator, _ body: (RefreshDriver) async throws -> Void) async throws {
        let endpoints = try await emulator.start()
        let driver = RefreshDriver(
            kind: .github, base: endpoints.baseURL, transport: loopbackTransport(),
            counters: { emulator.refreshCounters })
        try await running(driver, stop: { await emulator.stop() }, body)
    }

    private static func running(
        _ driver: RefreshDriver, stop: () async -> Void, _ body: (RefreshDriver) async throws -> Void
    ) async throws {
        do {
            try await body(driver)
        } catch {
            await stop()
            throw error
        }
        await stop()
    }

    var clientID: String { kind == .oidc ? OIDCEmulator.defaultClientID : GitHubEmulator.defaultClientID }

    func post(_ path: String, form: [(String, String)]) async throws -> HTTPResponse {
        try await transport.send(
            HTTPRequest(
                method: .post, url: base.appendingPathComponent(path),
                headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                body: Data(FormEncoding.encode(form).utf8)))
    }

    func admin(_ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        let response = try await transport.send(
            HTTPRequest(
                method: method, url: base.appendingPathComponent("__sesame/" + path),
                headers: body == nil ? [:] : ["Content-Type": "application/json"],
                body: body.map { Data($0.jsonText.utf8) }))
        #expect(response.status == 200, "\(method.rawValue) /__sesame/\(path): HTTP \(response.status)")
        return try #require(response.json, "\(method.rawValue) /__sesame/\(path) answered no JSON")
    }

    /// A device login approved through the admin API: the first tokens of a new family.
    func login() async throws -> Tokens {
        let start =
            kind == .oidc
            ? try await post("device_authorization", form: [("client_id", clientID), ("scope", "openid profile")])
            : try await post("login/device/code", form: [("client_id", clientID), ("scope", "repo")])
        let started = try #require(start.json)
        let userCode = try #require(started["user_code"]?.stringValue)
        let deviceCode = try #require(started["device_code"]?.stringValue)
        _ = try await admin(.post, "device", .object(["user_code": .string(userCode)]))
        let grant = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode),
            ("client_id", clientID),
        ]
        let answer = try await post(kind == .oidc ? "token" : "login/oauth/access_token", form: grant)
        return try #require(try Self.outcome(answer).tokens, "the device login was refused")
    }

    /// A refresh-token grant, as a client sends it.
    func refresh(_ token: String) async throws -> Outcome {
        let form = [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", clientID)]
        return try Self.outcome(try await post(kind == .oidc ? "token" : "login/oauth/access_token", form: form))
    }

    static func outcome(_ response: HTTPResponse) throws -> Outcome {
        let json = try #require(response.json, "HTTP \(response.status) without JSON")
        if let error = json["error"]?.stringValue {
            return .refused(error, json["error_description"]?.stringValue ?? "")
        }
        #expect(response.status == 200)
        return .tokens(
            Tokens(
                access: try #require(json["access_token"]?.stringValue),
                refresh: try #require(json["refresh_token"]?.stringValue),
                refreshExpiresIn: json["refresh_token_expires_in"]?.doubleValue))
    }

    /// Whether the emulator takes `access` (userinfo, or GitHub's `GET /user`): true on 200,
    /// false on 401.
    func accepts(_ access: String) async throws -> Bool {
        let path = kind == .oidc ? "userinfo" : "api/v3/user"
        let response = try await transport.send(
            HTTPRequest(url: base.appendingPathComponent(path), headers: ["Authorization": "Bearer \(access)"]))
        #expect(response.status == 200 || response.status == 401, "\(path): HTTP \(response.status)")
        return response.status == 200
    }

    /// Moves the emulator's clock through the admin API.
    func advanceClock(by seconds: TimeInterval) async throws {
        _ = try await admin(.post, "clock", .object(["advance": .number(seconds)]))
    }

    /// Expects `GET /__sesame/stats` and the emulator object to count `expected`.
    func expectCounters(
        _ expected: RefreshTokenCounters, sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws
    {
        let stats = try await admin(.get, "stats")
        let overHTTP = RefreshTokenCounters(
            refreshGrants: try #require(stats["refresh_grants"]?.lenientInt, sourceLocation: sourceLocation),
            refusedRefreshGrants: try #require(
                stats["refused_refresh_grants"]?.lenientInt, sourceLocation: sourceLocation),
            revokedFamilies: try #require(stats["revoked_families"]?.lenientInt, sourceLocation: sourceLocation))
        #expect(overHTTP == expected, "GET /__sesame/stats", sourceLocation: sourceLocation)
        #expect(counters() == expected, "refreshCounters", sourceLocation: sourceLocation)
    }

    /// The refusal an unknown, used or expired refresh token gets.
    var refusal: String { kind == .oidc ? "invalid_grant" : "bad_refresh_token" }
}

@Suite("Refresh-token rotation, reuse detection and lifetime, in the OpenID and GitHub emulators")
struct RefreshFamilyTests {
    @Test(
        "each refresh rotates the refresh token, the new tokens work, and the grants are counted",
        arguments: RefreshDriver.Kind.allCases)
    func rotation(kind: RefreshDriver.Kind) async throws {
        try await RefreshDriver.with(kind, refreshTokenLifetime: 7200) { driver in
            let first = try await driver.login()
            #expect(first.refreshExpiresIn == 7200)
            let second = try #require(try await driver.refresh(first.refresh).tokens)
            #expect(second.refresh != first.refresh && second.access != first.access)
            #expect(second.refreshExpiresIn == 7200)
            #expect(try await driver.accepts(second.access))
            let third = try #require(try await driver.refresh(second.refresh).tokens)
            #expect(try await driver.accepts(third.access))
            try await driver.expectCounters(RefreshTokenCounters(refreshGrants: 2))
        }
    }

    @Test(
        "a used refresh token that comes back revokes its whole family, once, and no other family",
        arguments: RefreshDriver.Kind.allCases)
    func reuseRevokesFamily(kind: RefreshDriver.Kind) async throws {
        try await RefreshDriver.with(kind) { driver in
            let first = try await driver.login()
            let other = try await driver.login()
            let newest = try #require(try await driver.refresh(first.refresh).tokens)
            #expect(try await driver.accepts(newest.access))

            // The rotated-away token comes back, as from a process that did not see the rotation.
            #expect(try await driver.refresh(first.refresh).error == driver.refusal)
            #expect(try await !driver.accepts(newest.access), "the family's newest access token still works")
            #expect(try await !driver.accepts(first.access))
            #expect(try await driver.refresh(newest.refresh).error == driver.refusal)
            // The family is gone: its used token revokes nothing more.
            #expect(try await driver.refresh(first.refresh).error == driver.refusal)

            #expect(try await driver.accepts(other.access), "another login's token was revoked too")
            #expect(try await driver.refresh(other.refresh).tokens != nil)
            try await driver.expectCounters(
                RefreshTokenCounters(refreshGrants: 2, refusedRefreshGrants: 3, revokedFamilies: 1))
        }
    }

    @Test(
        "a refresh token past its lifetime on the moved clock is refused, counted as refused, not as a revoked family",
        arguments: RefreshDriver.Kind.allCases)
    func expiredRefreshToken(kind: RefreshDriver.Kind) async throws {
        try await RefreshDriver.with(kind, accessTokenLifetime: 600, refreshTokenLifetime: 3600) { driver in
            let first = try await driver.login()
            try await driver.advanceClock(by: 601)
            #expect(try await !driver.accepts(first.access), "the access token outlived its 600 s")
            let second = try #require(try await driver.refresh(first.refresh).tokens)
            #expect(try await driver.accepts(second.access))

            try await driver.advanceClock(by: 3601)
            let expired = try await driver.refresh(second.refresh)
            #expect(expired.error == driver.refusal)
            if kind == .oidc, case .refused(_, let description) = expired {
                #expect(description == "The refresh token expired.")
            }
            // Neither the expired token nor the one rotated before it revokes anything now.
            #expect(try await driver.refresh(second.refresh).error == driver.refusal)
            #expect(try await driver.refresh(first.refresh).error == driver.refusal)
            try await driver.expectCounters(RefreshTokenCounters(refreshGrants: 1, refusedRefreshGrants: 3))
        }
    }

    @Test("GET /__sesame/stats also answers the clock's offset and the requests per path")
    func statsDocument() async throws {
        try await RefreshDriver.with(.oidc) { driver in
            try await driver.advanceClock(by: 90)
            let stats = try await driver.admin(.get, "stats")
            #expect(stats["clock_offset"]?.doubleValue == 90)
            #expect(stats["requests"]?["/__sesame/clock"]?.lenientInt == 1)
            #expect(stats["revoked_tokens"]?.lenientInt == 0)
        }
        try await RefreshDriver.with(.github) { driver in
            _ = try await driver.login()
            let stats = try await driver.admin(.get, "stats")
            #expect(stats["requests"]?["/login/oauth/access_token"]?.lenientInt == 1)
            #expect(stats["clock_offset"]?.doubleValue == 0)
        }
    }
}

@Suite("The GitHub emulator's saved state and token families")
struct GitHubFamilyStateTests {
    @Test("started again from saved state, a reused refresh token revokes the restored user token of its family")
    func familiesSurviveRestart() async throws {
        let first = GitHubEmulator(expiringTokens: true)
        var rotated: RefreshDriver.Tokens?
        try await RefreshDriver.with(first) { driver in
            rotated = try await driver.refresh(try await driver.login().refresh).tokens
        }
        let again = GitHubEmulator(expiringTokens: true)
        try again.restoreState(from: first.stateData())
        let tokens = try #require(rotated)
        try await RefreshDriver.with(again) { driver in
            #expect(try await driver.accepts(tokens.access))
            #expect(try await driver.refresh(tokens.refresh).tokens != nil)
            #expect(try await driver.refresh(tokens.refresh).error == "bad_refresh_token")
            #expect(try await !driver.accepts(tokens.access), "the restored token was not revoked with its family")
            try await driver.expectCounters(
                RefreshTokenCounters(refreshGrants: 1, refusedRefreshGrants: 1, revokedFamilies: 1))
        }
    }

    @Test("taking saved state back does not bring back a refresh token rotated away since it was saved")
    func rotatedTokenNotRestored() async throws {
        let emulator = GitHubEmulator(expiringTokens: true)
        try await RefreshDriver.with(emulator) { driver in
            let login = try await driver.login()
            let saved = emulator.stateData()
            let newest = try #require(try await driver.refresh(login.refresh).tokens)
            try emulator.restoreState(from: saved)  // as `sesame` does when it stops
            #expect(emulator.engine.locked { $0.refreshTokens[login.refresh] == nil })
            #expect(try await driver.refresh(newest.refresh).tokens != nil)
        }
    }
}

@Suite("Refresh families stay bounded")
struct RefreshFamiliesBoundTests {
    @Test("a family remembers its last used tokens; the oldest are forgotten")
    func usedTokensBounded() {
        var families = RefreshFamilies()
        let limit = RefreshFamilies.usedLimit
        for index in 0..<(limit + 10) { families.retire("t\(index)", family: "f") }
        #expect(families.family(ofUsed: "t0") == nil)
        #expect(families.family(ofUsed: "t9") == nil)
        #expect(families.family(ofUsed: "t10") == "f")
        #expect(families.family(ofUsed: "t\(limit + 9)") == "f")
    }

    @Test("the family that retired a token longest ago is forgotten first")
    func familiesBounded() {
        var families = RefreshFamilies()
        let limit = RefreshFamilies.familyLimit
        for index in 0..<limit { families.retire("t\(index)", family: "f\(index)") }
        families.retire("again", family: "f0")  // f0 is now the most recent
        families.retire("new", family: "f-new")
        #expect(families.family(ofUsed: "t0") == "f0")
        #expect(families.family(ofUsed: "t1") == nil)
        #expect(families.family(ofUsed: "new") == "f-new")
    }
}

import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

extension FacebookState {
    // MARK: - Tokens

    /// Who `token` belongs to, or why it is refused.
    ///
    /// `consumeScenarios` counts a token scenario's answer against its `count`; `debug_token`
    /// inspects without consuming.
    func resolve(token: String, consumeScenarios: Bool) throws -> Caller {
        guard token.utf8.count <= 512 else { throw GraphError.invalidToken }
        // A user token has no `|`: looked for in the string's contiguous bytes first, the fast way.
        let bar = UInt8(ascii: "|")
        let hasBar =
            token.utf8.withContiguousStorageIfAvailable { $0.contains(bar) } ?? token.utf8.contains(bar)
        if hasBar, let bar = token.utf8.firstIndex(of: bar) {
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

    /// The Login for Business configuration named `id`; `nil` for no id.
    ///
    /// - Throws: `GraphError` (100) when no configuration has that id.
    func loginConfiguration(_ id: String?) throws -> EmulatedLoginConfiguration? {
        guard let id else { return nil }
        guard let found = configuration.loginConfigurations.first(where: { $0.id == id }) else {
            throw GraphError.invalidParameter("The Facebook Login for Business configuration '\(id)' does not exist")
        }
        return found
    }

    /// Records the objects a login with `configurationID` granted its permissions for.
    func recordTargets(appID: String, userID: String, configurationID: String?) {
        let key = GrantKey(appID: appID, userID: userID)
        guard let configuration = try? loginConfiguration(configurationID), var record = grants[key] else { return }
        for scope in configuration.scopes where record.granted.contains(scope.scope) && !scope.targetIDs.isEmpty {
            record.targets = record.targets ?? [:]
            record.targets?[scope.scope] = scope.targetIDs
        }
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
        record.targets = nil
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

}

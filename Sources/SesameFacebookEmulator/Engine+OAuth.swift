import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

extension FacebookState {
    // MARK: - oauth/access_token

    /// `GET|POST /oauth/access_token`: code exchange (with PKCE), `fb_exchange_token`,
    /// `client_credentials` and `fb_extend_sso_token`.
    func tokenEndpoint(_ context: GraphContext) throws -> GraphAnswer {
        let parameters = context.parameters
        let grantType = parameters.nonEmpty("grant_type") ?? "authorization_code"
        if grantType == "fb_extend_sso_token" { return try extendToken(context) }
        guard let clientID = parameters.nonEmpty("client_id") else { throw GraphError.missingClientID }
        guard let app = apps[clientID] else { throw GraphError.invalidClientID }
        let secret = parameters.nonEmpty("client_secret")
        if let secret, !OAuth.constantTimeEquals(secret, app.secret) { throw GraphError.invalidClientSecret }
        switch grantType {
        case "authorization_code":
            return try exchangeCode(context, app: app, secretChecked: secret != nil)
        case "fb_exchange_token":
            guard secret != nil else { throw GraphError.invalidClientSecret }
            guard let shortLived = parameters.nonEmpty("fb_exchange_token") else {
                throw GraphError.invalidParameter("The parameter fb_exchange_token is required")
            }
            let caller = try resolve(token: shortLived, consumeScenarios: true)
            guard caller.kind == .user, caller.appID == app.id, let userID = caller.userID else {
                throw GraphError.invalidToken
            }
            let record = try issueUserToken(appID: app.id, userID: userID, longLived: true)
            return tokenAnswer(record)
        case "client_credentials":
            guard secret != nil else { throw GraphError.invalidClientSecret }
            let record = TokenRecord(
                token: "\(app.id)|" + (try Crypto.randomURLSafeString(byteCount: 20)), kind: .app, appID: app.id,
                userID: nil, serial: takeSerial(), issuedAt: now, expiresAt: nil, isLongLived: true)
            store(record)
            return GraphAnswer(body: .object(["access_token": .string(record.token), "token_type": .string("bearer")]))
        default:
            throw GraphError.invalidParameter("Unsupported grant_type: \(grantType)")
        }
    }

    /// `{"access_token", "token_type": "bearer", "expires_in"}`.
    func tokenAnswer(_ record: TokenRecord) -> GraphAnswer {
        var body: [String: JSONValue] = ["access_token": .string(record.token), "token_type": .string("bearer")]
        if let expiry = record.expiresAt { body["expires_in"] = .int(max(0, Int(expiry.timeIntervalSince(now)))) }
        return GraphAnswer(body: .object(body))
    }

    func exchangeCode(_ context: GraphContext, app: EmulatedApp, secretChecked: Bool) throws -> GraphAnswer {
        let parameters = context.parameters
        guard let redirectURI = parameters.nonEmpty("redirect_uri") else { throw GraphError.missingRedirectURI }
        guard let code = parameters.nonEmpty("code") else {
            throw GraphError.invalidParameter("The parameter code is required")
        }
        guard var record = codes[code], record.appID == app.id else { throw GraphError.invalidCode }
        guard !record.isUsed else { throw GraphError.codeUsed }
        guard now.timeIntervalSince(record.createdAt) < configuration.codeLifetime else { throw GraphError.codeExpired }
        guard redirectURI == record.redirectURI else { throw GraphError.redirectMismatch }
        if let challenge = record.challenge {
            if let verifier = parameters.nonEmpty("code_verifier") {
                let computed = record.challengeMethod == "plain" ? verifier : PKCE.challenge(for: verifier)
                guard (43...128).contains(verifier.count), OAuth.constantTimeEquals(computed, challenge) else {
                    throw GraphError.verifierMismatch
                }
            } else if !secretChecked {
                throw GraphError.verifierRequired
            }
        } else if !secretChecked {
            throw GraphError.invalidClientSecret
        }
        record.isUsed = true
        codes[code] = record
        let token = try issueUserToken(appID: app.id, userID: record.userID, longLived: false)
        return tokenAnswer(token)
    }

    /// `grant_type=fb_extend_sso_token`: extends a user token to a long-lived one, as the SDKs'
    /// daily refresh does. Answers `access_token`, `expires_at` and `data_access_expiration_time`.
    func extendToken(_ context: GraphContext) throws -> GraphAnswer {
        let caller = try requireCaller(context, forMe: false)
        guard caller.kind == .user, var record = tokens[caller.token] else { throw GraphError.activeTokenRequired }
        record.expiresAt = now.addingTimeInterval(configuration.longLivedTokenLifetime)
        record.isLongLived = true
        tokens[record.token] = record
        markDirty()
        let dataAccess = grant(appID: record.appID, userID: record.userID ?? "")?.dataAccessExpiresAt
        return GraphAnswer(
            body: .object([
                "access_token": .string(record.token),
                "expires_at": .int(Int(record.expiresAt!.timeIntervalSince1970)),
                "data_access_expiration_time": .int(Int(dataAccess?.timeIntervalSince1970 ?? 0)),
            ]))
    }

    // MARK: - debug_token

    /// `GET /debug_token?input_token=…&access_token=…`.
    func debugToken(_ context: GraphContext) throws -> GraphAnswer {
        let caller = try requireCaller(context, forMe: false)
        guard let input = context.parameters.nonEmpty("input_token") else {
            throw GraphError.invalidParameter("The parameter input_token is required")
        }
        var data: [String: JSONValue] = ["is_valid": .bool(false), "scopes": .array([])]
        func invalid(_ error: GraphError) -> GraphAnswer {
            var described: [String: JSONValue] = ["code": .int(error.code), "message": .string(error.message)]
            if let subcode = error.subcode { described["subcode"] = .int(subcode) }
            data["error"] = .object(described)
            return GraphAnswer(body: .object(["data": .object(data)]))
        }
        if let bar = input.firstIndex(of: "|") {
            let appID = String(input[..<bar])
            guard let app = apps[appID], (try? resolve(token: input, consumeScenarios: false))?.kind == .app else {
                return invalid(GraphError(message: "Invalid OAuth access token.", code: 190))
            }
            guard caller.appID == appID else { throw Self.otherApp }
            data["app_id"] = .string(app.id)
            data["application"] = .string(app.name)
            data["type"] = .string("APP")
            data["is_valid"] = .bool(true)
            return GraphAnswer(body: .object(["data": .object(data)]))
        }
        guard let record = tokens[input], let userID = record.userID, let app = apps[record.appID] else {
            return invalid(GraphError(message: "Invalid OAuth access token.", code: 190))
        }
        guard caller.appID == record.appID else { throw Self.otherApp }
        data["app_id"] = .string(app.id)
        data["application"] = .string(app.name)
        data["type"] = .string("USER")
        data["user_id"] = .string(userID)
        data["expires_at"] = .int(Int(record.expiresAt?.timeIntervalSince1970 ?? 0))
        if record.isLongLived { data["issued_at"] = .int(Int(record.issuedAt.timeIntervalSince1970)) }
        if let grant = grant(appID: record.appID, userID: userID) {
            data["data_access_expires_at"] = .int(Int(grant.dataAccessExpiresAt.timeIntervalSince1970))
        }
        if let problem = tokenProblem(record, consumeScenarios: false) { return invalid(problem) }
        data["is_valid"] = .bool(true)
        let granted = effectivePermissions(appID: record.appID, userID: userID).granted
        data["scopes"] = .array(granted.map { .string($0) })
        // The objects a business login granted permissions for.
        let targets = grant(appID: record.appID, userID: userID)?.targets ?? [:]
        let granular = granted.compactMap { scope in
            targets[scope].map { FacebookGranularScope(scope: scope, targetIDs: $0).json }
        }
        if !granular.isEmpty { data["granular_scopes"] = .array(granular) }
        return GraphAnswer(body: .object(["data": .object(data)]))
    }

    static let otherApp = GraphError.invalidParameter(
        "You must provide an app access token, or a user access token that is an owner or developer of the app")
}

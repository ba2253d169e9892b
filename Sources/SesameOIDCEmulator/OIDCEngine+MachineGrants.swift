import Foundation
import Sesame
import SesameEmulator

extension OIDCEngine {
    /// Where ``OIDCEmulator/grantCount(_:)`` counts the grants of each type made.
    static func grantCountKey(_ grantType: String) -> String { "grant_type=\(grantType)" }

    /// The client credentials grant (RFC 6749 §4.4): for a confidential client only, an access
    /// token with no refresh token and no ID token, for the scopes asked (none: `api`).
    func clientCredentialsGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        guard case .some(.some) = state.clients[clientID] else {
            return Reply.oauthError(
                "unauthorized_client", "The client credentials grant is for confidential clients only.")
        }
        return issueMachineToken("client_credentials", request, clientID: clientID, sub: clientID, &state)
    }

    /// An access token with no refresh token and no ID token for a grant of `grantType` to
    /// `sub`, for the scopes asked (none: `api`), counted.
    func issueMachineToken(
        _ grantType: String, _ request: LoopbackRequest, clientID: String, sub: String, _ state: inout State,
        extra: [String: JSONValue] = [:]
    ) -> Reply {
        state.requestCounts[Self.grantCountKey(grantType), default: 0] += 1
        let scope = request["scope"].flatMap { $0.isEmpty ? nil : $0 } ?? "api"
        let grant = newGrant(clientID: clientID, sub: sub, scope: scope, authTime: now(state))
        let access = "at-" + ((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        state.accessTokens[access] = (grant, now(state).addingTimeInterval(accessTokenLifetime))
        let answer: [String: JSONValue] = [
            "access_token": .string(access), "token_type": .string("Bearer"),
            "expires_in": .number(accessTokenLifetime), "scope": .string(scope),
        ]
        return Reply.json(.object(answer.merging(extra) { $1 }))
    }
}

extension OIDCEmulator {
    /// How many grants of `grantType` (`client_credentials`, the token exchange's URN) the
    /// emulator has made.
    public func grantCount(_ grantType: String) -> Int { requestCount(path: OIDCEngine.grantCountKey(grantType)) }
}

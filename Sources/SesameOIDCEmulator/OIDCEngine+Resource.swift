import Foundation
import Sesame
import SesameEmulator

extension OIDCEngine {
    // MARK: A protected resource that asks for more

    /// A resource server beside the issuer, whose needs are in its path, for step-up tests:
    ///
    /// - `GET /resource/scope/NAME` needs the scope `NAME`; a token without it gets 403 with
    ///   `WWW-Authenticate: Bearer error="insufficient_scope", scope="NAME"` (RFC 6750 §3.1).
    /// - `GET /resource/recent-login/SECONDS` needs a login (the grant's `auth_time`) at most
    ///   `SECONDS` old by the emulator's clock; an older one gets 401 with
    ///   `error="insufficient_user_authentication"` and `max_age` (RFC 9470 §3).
    ///
    /// A missing, unknown or expired token gets 401 `invalid_token`, as userinfo. A token that is
    /// enough gets 200 with the path and the person's `sub`.
    func protectedResource(_ request: LoopbackRequest, _ state: State) -> Reply {
        let header = request.headers["Authorization"] ?? ""
        guard header.lowercased().hasPrefix("bearer "),
            let record = state.accessTokens[String(header.dropFirst(7)).trimmedASCII],
            record.expiresAt > now(state)
        else { return Self.bearerError("invalid_token", "The access token is invalid or expired", status: 401) }
        let parts = request.path.split(separator: "/").map(String.init)
        guard parts.count == 3 else {
            return Reply.oauthError(
                "invalid_request", "Ask for /resource/scope/NAME or /resource/recent-login/SECONDS.", status: 404)
        }
        switch parts[1] {
        case "scope":
            guard record.grant.scope.split(separator: " ").contains(Substring(parts[2])) else {
                return Reply.empty(
                    status: 403,
                    headers: [
                        "WWW-Authenticate":
                            "Bearer realm=\"sesame\", error=\"insufficient_scope\", scope=\"\(parts[2])\", "
                            + "error_description=\"This resource needs the scope \\\"\(parts[2])\\\".\""
                    ])
            }
        case "recent-login":
            guard let seconds = Int(parts[2]) else {
                return Reply.oauthError("invalid_request", "recent-login takes whole seconds.", status: 404)
            }
            guard now(state).timeIntervalSince(record.grant.authTime) <= TimeInterval(seconds) else {
                return Reply.empty(
                    status: 401,
                    headers: [
                        "WWW-Authenticate":
                            "Bearer realm=\"sesame\", error=\"insufficient_user_authentication\", "
                            + "error_description=\"A more recent login is needed\", max_age=\"\(seconds)\""
                    ])
            }
        default:
            return Reply.oauthError("invalid_request", "No such resource: \(request.path)", status: 404)
        }
        return Reply.json(.object(["resource": .string(request.path), "sub": .string(record.grant.sub)]))
    }
}

import Foundation
import Sesame
import SesameEmulator

/// An issuer of workload identity tokens the emulator trusts for the token exchange: a local
/// stand-in for GitHub Actions' or a cluster's issuer.
struct TrustedSubjectIssuer: Sendable {
    /// Its signing keys, by `kid`.
    var keys: [String: SignatureVerificationKey]
    /// The audience its tokens must name to be exchanged here.
    var audience: String
}

extension OIDCEngine {
    /// The token exchange (RFC 8693 §2): the subject token must be a JWT signed by a key of a
    /// trusted issuer (``OIDCEmulator/trustSubjectTokens(issuer:jwks:audience:)``), name that
    /// issuer as `iss` and the configured audience in `aud`, and be unexpired. The answer is an
    /// access token for the token's `sub`, with no refresh token.
    func tokenExchangeGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        let nowSeconds = now(state).timeIntervalSince1970
        guard
            [MachineGrant.jwtTokenType, MachineGrant.idTokenType].contains(request["subject_token_type"] ?? "")
        else {
            return Reply.oauthError("invalid_request", "subject_token_type must be the jwt or id_token type.")
        }
        guard let jwt = request["subject_token"].flatMap(EmulatorJWT.init) else {
            return Reply.oauthError("invalid_request", "subject_token is missing or not a JWT.")
        }
        guard let issuer = jwt.claims["iss"]?.stringValue, let trusted = state.machineClients.trustedIssuers[issuer]
        else { return Reply.oauthError("invalid_grant", "The subject token's issuer is not trusted.") }
        let key = jwt.header["kid"]?.stringValue.flatMap { trusted.keys[$0] }
        guard let key, jwt.isSigned(by: key) else {
            return Reply.oauthError("invalid_grant", "The subject token's signature does not verify.")
        }
        let audiences =
            jwt.claims["aud"]?.arrayValue?.compactMap(\.stringValue)
            ?? [jwt.claims["aud"]?.stringValue].compactMap {
                $0
            }
        guard audiences.contains(trusted.audience) else {
            return Reply.oauthError("invalid_grant", "The subject token is not for this audience.")
        }
        guard let expiry = jwt.claims["exp"]?.doubleValue, expiry > nowSeconds else {
            return Reply.oauthError("invalid_grant", "The subject token has expired.")
        }
        guard let subject = jwt.claims["sub"]?.stringValue, !subject.isEmpty else {
            return Reply.oauthError("invalid_grant", "The subject token has no sub.")
        }
        return issueMachineToken(
            MachineGrant.tokenExchangeGrantType, request, clientID: clientID, sub: subject, &state,
            extra: ["issued_token_type": .string("urn:ietf:params:oauth:token-type:access_token")])
    }
}

extension OIDCEmulator {
    /// Trusts the workload identity tokens of `issuer` for the token exchange: signed by a key of
    /// `jwks` (a JWK Set, each key with its `kid`), naming `audience`.
    ///
    /// - Throws: `EmulatorError` for a key that is not a usable RSA or P-256 public key.
    public func trustSubjectTokens(issuer: String, jwks: JSONValue, audience: String) async throws {
        var keys: [String: SignatureVerificationKey] = [:]
        for jwk in jwks["keys"]?.arrayValue ?? [] {
            guard let kid = jwk["kid"]?.stringValue else { throw EmulatorError(message: "A JWK has no kid.") }
            keys[kid] = try EmulatorJWT.key(fromJWK: jwk)
        }
        engine.locked {
            $0.machineClients.trustedIssuers[issuer] = TrustedSubjectIssuer(keys: keys, audience: audience)
        }
    }
}

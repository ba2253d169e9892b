import Foundation
import Sesame
import SesameEmulator

/// What the emulator knows for logins with no person: the public keys clients sign their
/// `private_key_jwt` assertions with, and the assertions' ids already used.
struct OIDCMachineClients: Sendable {
    /// Each client's public key, by client id.
    var keys: [String: SignatureVerificationKey] = [:]
    /// The `jti` of every assertion accepted, so that none is accepted twice (RFC 7523 §3).
    var usedAssertionIDs: Set<String> = []
    /// The issuers whose workload tokens the token exchange takes, by issuer.
    var trustedIssuers: [String: TrustedSubjectIssuer] = [:]
}

/// A compact JWS split and decoded, its signature not yet checked: what the emulator reads of a
/// client assertion or a subject token.
struct EmulatorJWT {
    var header: JSONValue
    var claims: JSONValue
    var signingInput: Data
    var signature: Data

    init?(_ compact: String) {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
            let header = JSONValue(parsing: headerBytes), let claimBytes = Base64URL.decode(parts[1]),
            let claims = JSONValue(parsing: claimBytes), claims.objectValue != nil,
            let signature = Base64URL.decode(parts[2])
        else { return nil }
        self.header = header
        self.claims = claims
        self.signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        self.signature = signature
    }

    /// Whether `key` signed it with the algorithm its header names.
    func isSigned(by key: SignatureVerificationKey) -> Bool {
        guard let algorithm = header["alg"]?.stringValue.flatMap(SignatureAlgorithm.init(rawValue:)) else {
            return false
        }
        return key.verify(signature, of: signingInput, algorithm: algorithm)
    }

    /// The verification key of a public JWK (`kty` RSA with `n`/`e`, or EC P-256 with `x`/`y`).
    static func key(fromJWK jwk: JSONValue) throws -> SignatureVerificationKey {
        func member(_ name: String) throws -> Data {
            guard let value = jwk[name]?.stringValue.flatMap(Base64URL.decode) else {
                throw EmulatorError(message: "The JWK has no usable '\(name)'.")
            }
            return value
        }
        switch jwk["kty"]?.stringValue {
        case "RSA": return try .rsa(modulus: try member("n"), exponent: try member("e"))
        case "EC": return try .p256(x: try member("x"), y: try member("y"))
        default: throw EmulatorError(message: "The JWK is neither RSA nor EC.")
        }
    }
}

extension OIDCEngine {
    /// `private_key_jwt` (RFC 7523 §2.2, OpenID Connect Core §9): the assertion must be signed by
    /// the client's registered key, name the client as `iss` and `sub` and this token endpoint as
    /// `aud`, be unexpired and live at most five minutes, and carry a `jti` not seen before.
    func authenticateClientAssertion(_ request: LoopbackRequest, _ state: inout State) -> ClientCheck {
        func refuse(_ description: String) -> ClientCheck {
            .refused(Reply.oauthError("invalid_client", description, status: 401))
        }
        guard request["client_assertion_type"] == ClientAssertionSigner.assertionType else {
            return refuse("client_assertion_type must be \(ClientAssertionSigner.assertionType).")
        }
        guard let jwt = request["client_assertion"].flatMap(EmulatorJWT.init) else {
            return refuse("The client assertion is not a JWT.")
        }
        guard let clientID = jwt.claims["iss"]?.stringValue, jwt.claims["sub"]?.stringValue == clientID,
            request["client_id"].map({ $0 == clientID }) ?? true
        else { return refuse("The assertion's iss and sub must both be the client id.") }
        guard let key = state.machineClients.keys[clientID] else {
            return refuse("No key is registered for the client.")
        }
        guard jwt.isSigned(by: key) else { return refuse("The client assertion's signature does not verify.") }
        let audiences =
            jwt.claims["aud"]?.arrayValue?.compactMap(\.stringValue)
            ?? [jwt.claims["aud"]?.stringValue]
            .compactMap { $0 }
        guard audiences.contains(state.issuer + "/token") || audiences.contains(state.issuer) else {
            return refuse("The client assertion's aud is not this token endpoint.")
        }
        let now = now(state).timeIntervalSince1970
        guard let expiry = jwt.claims["exp"]?.doubleValue, expiry > now, expiry <= now + 310 else {
            return refuse("The client assertion has expired or lives longer than five minutes.")
        }
        guard let jti = jwt.claims["jti"]?.stringValue, state.machineClients.usedAssertionIDs.insert(jti).inserted
        else { return refuse("The client assertion has no jti, or one already used.") }
        return .client(clientID)
    }
}

extension OIDCEmulator {
    /// Registers `clientID` as a confidential client that authenticates with `private_key_jwt`,
    /// with the public key `jwk` (`kty`, and `n`/`e` or `crv`/`x`/`y`); discovery then lists
    /// `private_key_jwt` among `token_endpoint_auth_methods_supported`.
    ///
    /// - Throws: `EmulatorError` for a JWK that is not a usable RSA or P-256 public key.
    public func registerClient(_ clientID: String, publicKey jwk: JSONValue) async throws {
        let key = try EmulatorJWT.key(fromJWK: jwk)
        engine.locked { state in
            state.machineClients.keys[clientID] = key
            // Confidential, with no secret that works: only an assertion authenticates it.
            state.clients[clientID] = .some((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        }
    }
}

import Foundation
import Sesame

/// A compact-serialized JWS (RFC 7515) carrying JWT claims (RFC 7519), split but not yet trusted.
///
/// ``description`` shows the header and the claim names, never the token.
public struct JSONWebToken: Sendable, Hashable, CustomStringConvertible {
    /// The protected header (`alg`, `kid`, `typ`).
    public var header: JSONValue
    /// The claims.
    public var claims: JSONValue
    /// `base64url(header) "." base64url(payload)`: the bytes that were signed.
    public var signingInput: Data
    /// The signature bytes.
    public var signature: Data

    /// Splits and decodes `compact`.
    ///
    /// - Throws: ``IDTokenError/malformed(_:)`` naming what is wrong.
    public init(compact: String) throws {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw IDTokenError.malformed("it has \(parts.count) dot-separated parts, not 3 (a JWE or not a JWT)")
        }
        guard let headerBytes = Base64URL.decode(parts[0]), let header = JSONValue(parsing: headerBytes),
            header.objectValue != nil
        else { throw IDTokenError.malformed("its header is not base64url JSON") }
        guard let payloadBytes = Base64URL.decode(parts[1]), let claims = JSONValue(parsing: payloadBytes),
            claims.objectValue != nil
        else { throw IDTokenError.malformed("its payload is not base64url JSON") }
        guard let signature = Base64URL.decode(parts[2]) else {
            throw IDTokenError.malformed("its signature is not base64url")
        }
        self.header = header
        self.claims = claims
        self.signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        self.signature = signature
    }

    /// The `alg` header.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// The `kid` header.
    public var keyID: String? { header["kid"]?.stringValue }

    public var description: String {
        "JSONWebToken(alg: \(algorithm ?? "none"), kid: \(keyID ?? "none"), "
            + "claims: \((claims.objectValue?.keys.sorted() ?? []).joined(separator: ",")), token: \(Redaction.placeholder))"
    }
}

/// The claims of an ID token that passed every check (OpenID Connect Core §2).
public struct IDTokenClaims: Sendable, Hashable {
    /// `iss`: the issuer.
    public var issuer: String
    /// `sub`: the person, stable for this issuer.
    public var subject: String
    /// `aud`: the clients it was issued to.
    public var audiences: [String]
    /// `exp`.
    public var expiresAt: Date
    /// `iat`.
    public var issuedAt: Date
    /// `nonce`, when present.
    public var nonce: String?
    /// `azp`, when present.
    public var authorizedParty: String?
    /// `email`, when present.
    public var email: String?
    /// `name`, when present.
    public var name: String?
    /// Every claim.
    public var raw: JSONValue
}

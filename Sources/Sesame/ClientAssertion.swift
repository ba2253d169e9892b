import Foundation

/// Signs the client assertions of `private_key_jwt` client authentication (RFC 7523 §2.2,
/// OpenID Connect Core §9): a JWT whose `iss` and `sub` are the client id, `aud` the token
/// endpoint, with a random `jti`, `iat` and an `exp` a minute later, signed RS256 (an RSA key of
/// 2048 bits or more) or ES256 (an EC key on P-256, the signature raw `r || s`).
///
/// ```swift
/// let signer = try ClientAssertionSigner(keyFile: "/etc/ci/client.pem", keyID: "ci-2026")
/// let assertion = try signer.assertion(clientID: "ci-runner", audience: tokenEndpoint.absoluteString)
/// // client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer&client_assertion=...
/// ```
///
/// The key stays in memory, freed with the signer; ``description`` names the algorithm and the
/// key id, never the key or an assertion.
public struct ClientAssertionSigner: Sendable, CustomStringConvertible {
    /// The `client_assertion_type` that goes with every assertion (RFC 7523 §2.2).
    public static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// The longest lifetime an assertion may be given: five minutes.
    public static let maximumLifetime: TimeInterval = 300

    private let key: SignatureSigningKey
    /// The `kid` header, naming the key among those registered for the client; `nil` sends none.
    public let keyID: String?
    /// How long each assertion is valid, in seconds: one minute by default, at most
    /// ``maximumLifetime``.
    public let lifetime: TimeInterval

    /// The JWS algorithm the key signs with: `RS256` or `ES256`.
    public var algorithm: String { key.algorithm.rawValue }

    /// A signer with the key in `pem` (unencrypted PEM: PKCS#8, or the traditional RSA and EC
    /// forms).
    ///
    /// - Parameters:
    ///   - pem: the private key's text.
    ///   - keyID: the `kid` to send, when the client has several keys registered.
    ///   - lifetime: how long an assertion is valid, at most ``maximumLifetime``.
    ///   - source: what the key is called in errors ("the key file /etc/ci/client.pem").
    /// - Throws: ``AuthError`` (`invalid`) saying what the key is not: not PEM, encrypted, an RSA
    ///   key shorter than 2048 bits, another kind of key. Never a byte of it.
    public init(
        pem: Data, keyID: String? = nil, lifetime: TimeInterval = 60, source: String = "the client's private key"
    ) throws {
        do {
            key = try SignatureSigningKey(pem: pem)
        } catch let error as CryptoError {
            throw AuthError(
                category: .invalid,
                message: "\(source.prefix(1).uppercased() + source.dropFirst()) cannot sign client assertions: "
                    + "\(error.message). Give an unencrypted RSA (2048 bits or more) or P-256 EC private key in PEM.",
                recoveryTactic: .showMessage)
        }
        self.keyID = keyID.flatMap { $0.isEmpty ? nil : $0 }
        self.lifetime = min(max(lifetime, 1), Self.maximumLifetime)
    }

    /// A signer with the key in the file at `path`, which must be trusted by libpq's rule for a
    /// private key: yours and no access for others (0600), or root's and readable by its group at
    /// most (0640).
    ///
    /// - Parameters:
    ///   - path: the PEM file.
    ///   - keyID: the `kid` to send.
    ///   - lifetime: how long an assertion is valid, at most ``maximumLifetime``.
    ///   - setting: where the path was set, for "check ..." in errors.
    /// - Throws: ``AuthError`` (`invalid`) for a file that cannot be read or trusted (saying the
    ///   `chmod` or `chown` that fixes it), or a key that cannot sign.
    public init(
        keyFile path: String, keyID: String? = nil, lifetime: TimeInterval = 60,
        setting: String = "the client key file setting"
    ) throws {
        let contents: Data
        do {
            contents = try PrivateFiles.privateKeyFileContents(atPath: path, setting: setting)
        } catch let error as CredentialStoreError {
            throw AuthError(category: .invalid, message: error.message, recoveryTactic: .showMessage)
        }
        try self.init(pem: contents, keyID: keyID, lifetime: lifetime, source: "the key file \(path)")
    }

    /// A fresh assertion for `clientID` at the token endpoint `audience`.
    ///
    /// - Parameters:
    ///   - clientID: the client id: the assertion's `iss` and `sub`.
    ///   - audience: the token endpoint's URL (OpenID Connect Core §9 names it as the audience).
    ///   - now: the time it is made: `iat`, and `exp` ``lifetime`` later.
    /// - Throws: ``AuthError`` when libcrypto cannot sign or draw a random `jti`.
    public func assertion(clientID: String, audience: String, now: Date = Date()) throws -> String {
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        let header = JSONValue.object(
            ["alg": .string(algorithm), "typ": .string("JWT")].merging(keyID.map { ["kid": .string($0)] } ?? [:]) {
                $1
            })
        let claims = JSONValue.object([
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience),
            "jti": .string(try Crypto.randomURLSafeString(byteCount: 24)), "iat": .number(issuedAt),
            "exp": .number(issuedAt + lifetime.rounded(.down)),
        ])
        let input = Base64URL.encode(header.jsonData) + "." + Base64URL.encode(claims.jsonData)
        do {
            return input + "." + Base64URL.encode(try key.sign(Data(input.utf8)))
        } catch let error as CryptoError {
            throw AuthError(
                category: .invalid, message: "A client assertion could not be signed: \(error.message).",
                recoveryTactic: .showMessage)
        }
    }

    /// The form fields of `private_key_jwt` for one request to `audience`: `client_id`,
    /// `client_assertion_type` and a fresh `client_assertion`.
    ///
    /// - Throws: what ``assertion(clientID:audience:now:)`` throws.
    public func formFields(clientID: String, audience: String, now: Date = Date()) throws -> [(String, String)] {
        [
            ("client_id", clientID), ("client_assertion_type", Self.assertionType),
            ("client_assertion", try assertion(clientID: clientID, audience: audience, now: now)),
        ]
    }

    public var description: String {
        "ClientAssertionSigner(\(algorithm), kid: \(keyID ?? "none"), key: \(Redaction.placeholder))"
    }
}

extension ClientAuthenticationMethod {
    /// A client assertion signed with the client's private key (RFC 7523 §2.2, OpenID Connect
    /// Core §9): no secret is sent.
    public static let privateKeyJWT = ClientAuthenticationMethod(rawValue: "private_key_jwt")
}

extension ClientAuthentication {
    /// `private_key_jwt`: `client_id`, `client_assertion_type` and a fresh assertion signed by
    /// `signer` for the token endpoint, on every request (a new `jti` each time).
    public static func privateKeyJWT(_ signer: ClientAssertionSigner) -> ClientAuthentication {
        ClientAuthentication(method: .privateKeyJWT) { request in
            request.form += try signer.formFields(
                clientID: request.clientID, audience: request.tokenEndpoint.absoluteString)
        }
    }
}

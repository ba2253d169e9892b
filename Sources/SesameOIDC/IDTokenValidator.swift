import Foundation
import Sesame

/// An ID token that failed a check; ``check`` names which one.
///
/// It is also the `ProviderErrorDetails` of the `AuthError` it becomes: read it with
/// `error.details(as: IDTokenError.self)`.
public struct IDTokenError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError, ProviderErrorDetails {
    /// The check that failed.
    public struct Check: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The token could not be split or decoded.
        public static let malformed = Check(rawValue: "malformed")
        /// The `alg` is not RS256 or ES256 (or is `none`).
        public static let algorithm = Check(rawValue: "algorithm")
        /// No key in the JWKS has the token's `kid`, even after fetching it again.
        public static let unknownKey = Check(rawValue: "unknownKey")
        /// The signature does not verify.
        public static let signature = Check(rawValue: "signature")
        /// `iss` is not the configured issuer.
        public static let issuer = Check(rawValue: "issuer")
        /// `aud` does not contain the client id.
        public static let audience = Check(rawValue: "audience")
        /// Several audiences and `azp` is not the client id.
        public static let authorizedParty = Check(rawValue: "authorizedParty")
        /// `exp` has passed.
        public static let expired = Check(rawValue: "expired")
        /// `iat` is in the future.
        public static let issuedAt = Check(rawValue: "issuedAt")
        /// `nonce` is not the one the login sent.
        public static let nonce = Check(rawValue: "nonce")
        public var description: String { rawValue }
    }

    /// The check that failed.
    public var check: Check
    /// What was wrong, without the token.
    public var detail: String
    /// For an `iat` in the future: how many seconds it is ahead of this machine's clock. The
    /// clocks disagree (this machine's or the issuer's is wrong); nothing is wrong with the login.
    public var clockAhead: TimeInterval?

    /// Creates the error.
    public init(check: Check, detail: String, clockAhead: TimeInterval? = nil) {
        self.check = check
        self.detail = detail
        self.clockAhead = clockAhead
    }

    /// A token that could not be read.
    public static func malformed(_ detail: String) -> IDTokenError { IDTokenError(check: .malformed, detail: detail) }

    public var description: String { "The ID token failed the \(check) check: \(detail)." }

    /// The same sentence as ``description``: what `localizedDescription` returns.
    public var errorDescription: String? { description }

    /// The error as an `AuthError`: `ErrorCategory.invalid`, a failed login. An `iat` in the
    /// future says that the clocks disagree, with `LoginFailedReason.clockSkew`.
    public func authError(provider: ProviderID) -> AuthError {
        if let clockAhead {
            return AuthError(
                category: .invalid,
                message: "The ID token failed the \(check) check: it was issued \(Int(clockAhead.rounded())) s ahead "
                    + "of this machine's clock, beyond the leeway, so this machine's clock or the issuer's is wrong. "
                    + "Set the clock right (timedatectl set-ntp true) and try again.",
                loginFailedReason: .clockSkew, recoveryTactic: .showMessage, provider: provider, details: [self],
                underlyingError: self)
        }
        return AuthError(
            category: .invalid,
            message: "\(description) The login was refused; if it keeps happening, check the issuer and client id "
                + "configuration and the machine's clock.",
            loginFailedReason: .providerError, recoveryTactic: .showMessage, provider: provider,
            details: [self], underlyingError: self)
    }

    public var json: JSONValue { .object(["idTokenCheck": .string(check.rawValue), "detail": .string(detail)]) }

    public func redacting(_ secrets: [String]) -> IDTokenError {
        IDTokenError(check: check, detail: Redaction.redacting(secrets, in: detail), clockAhead: clockAhead)
    }
}

/// Checks ID tokens (OpenID Connect Core §3.1.3.7): the signature with a key from the issuer's
/// JWKS, then `iss`, `aud` (and `azp` when there are several audiences), `exp` and `iat` with
/// a small leeway, and `nonce` when the login sent one.
public struct IDTokenValidator: Sendable {
    /// The issuer `iss` must equal.
    public var issuer: String
    /// The client id `aud` must contain.
    public var clientID: String
    /// The issuer's keys.
    public var keys: JWKSCache
    /// How far clocks may disagree, in seconds.
    public var leeway: TimeInterval
    /// The wall clock.
    public var now: @Sendable () -> Date

    /// Creates a validator.
    public init(
        issuer: String, clientID: String, keys: JWKSCache, leeway: TimeInterval = 60,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.keys = keys
        self.leeway = leeway
        self.now = now
    }

    /// The claims of `token` once every check passed.
    ///
    /// - Parameters:
    ///   - token: the compact ID token.
    ///   - nonce: the nonce the login sent, or `nil` when it sent none.
    /// - Throws: ``IDTokenError`` naming the first check that failed, or the `AuthError`
    ///   of fetching the JWKS.
    public func validate(_ token: String, nonce: String?) async throws -> IDTokenClaims {
        let jwt = try JSONWebToken(compact: token)
        guard let name = jwt.algorithm, let algorithm = SignatureAlgorithm(rawValue: name) else {
            throw IDTokenError(
                check: .algorithm,
                detail: "its alg is '\(jwt.algorithm ?? "missing")'; only RS256 and ES256 are accepted")
        }
        let key = try await keys.key(id: jwt.keyID, algorithm: algorithm)
        guard key.verify(jwt.signature, of: jwt.signingInput, algorithm: algorithm) else {
            throw IDTokenError(
                check: .signature,
                detail: "the \(algorithm.rawValue) signature does not verify with key '\(jwt.keyID ?? "-")'")
        }
        let claims = jwt.claims
        let iss = claims["iss"]?.stringValue
        let expected = try Self.expectedIssuer(issuer, tenant: claims["tid"])
        guard iss == expected else {
            throw IDTokenError(check: .issuer, detail: "iss is '\(iss ?? "missing")', expected '\(expected)'")
        }
        let audiences: [String] =
            claims["aud"]?.stringValue.map { [$0] } ?? claims["aud"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard audiences.contains(clientID) else {
            throw IDTokenError(
                check: .audience,
                detail: "aud is [\(audiences.joined(separator: ", "))], which lacks client '\(clientID)'")
        }
        let azp = claims["azp"]?.stringValue
        if audiences.count > 1 || azp != nil, azp != clientID {
            throw IDTokenError(
                check: .authorizedParty,
                detail: "azp is '\(azp ?? "missing")' with \(audiences.count) audiences; expected '\(clientID)'")
        }
        let now = self.now()
        guard let exp = claims["exp"]?.doubleValue else {
            throw IDTokenError(check: .expired, detail: "it has no exp claim")
        }
        let expiresAt = Date(timeIntervalSince1970: exp)
        guard expiresAt.timeIntervalSince(now) > -leeway else {
            throw IDTokenError(
                check: .expired,
                detail: "it expired at \(expiresAt.ISO8601Format()), and it is now \(now.ISO8601Format())")
        }
        guard let iat = claims["iat"]?.doubleValue else {
            throw IDTokenError(check: .issuedAt, detail: "it has no iat claim")
        }
        let issuedAt = Date(timeIntervalSince1970: iat)
        guard issuedAt.timeIntervalSince(now) <= leeway else {
            throw IDTokenError(
                check: .issuedAt,
                detail:
                    "it was issued at \(issuedAt.ISO8601Format()), in the future (it is now \(now.ISO8601Format()))",
                clockAhead: issuedAt.timeIntervalSince(now))
        }
        let tokenNonce = claims["nonce"]?.stringValue
        if let nonce {
            guard let tokenNonce, OAuth.constantTimeEquals(tokenNonce, nonce) else {
                throw IDTokenError(
                    check: .nonce,
                    detail: tokenNonce == nil ? "it has no nonce" : "its nonce is not the one this login sent")
            }
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else {
            throw IDTokenError.malformed("it has no sub claim")
        }
        return IDTokenClaims(
            issuer: expected, subject: subject, audiences: audiences, expiresAt: expiresAt, issuedAt: issuedAt,
            nonce: tokenNonce, authorizedParty: azp, email: claims["email"]?.stringValue,
            name: claims["name"]?.stringValue, raw: claims)
    }
}

extension IDTokenValidator {
    /// What Microsoft Entra ID's multi-tenant discovery documents (`common`, `organizations`)
    /// put in their issuer where the tenant goes: `https://login.microsoftonline.com/{tenantid}/v2.0`
    /// (https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration). Each ID
    /// token names its own tenant in `iss` and in `tid`.
    public static let tenantPlaceholder = "{tenantid}"

    /// The issuer a token must name exactly: `issuer`, or, when `issuer` is a template with
    /// ``tenantPlaceholder``, the template with the token's `tid` in its place. The template is
    /// never a pattern: a token with no `tid`, or one that is not a tenant id (a GUID or a domain
    /// name), is refused, and `iss` is then compared exactly.
    ///
    /// - Throws: ``IDTokenError`` with the `issuer` check when the issuer is a template and `tid`
    ///   is missing or not a tenant id.
    public static func expectedIssuer(_ issuer: String, tenant: JSONValue?) throws -> String {
        guard issuer.contains(tenantPlaceholder) else { return issuer }
        guard let tid = tenant?.stringValue, isTenantID(tid) else {
            throw IDTokenError(
                check: .issuer,
                detail:
                    "the issuer is the template '\(issuer)' and the token's tid is \(tenant?.stringValue.map { "'\($0)'" } ?? "missing"), "
                    + "not a tenant id to put in it")
        }
        return issuer.replacingOccurrences(of: tenantPlaceholder, with: tid)
    }

    /// Whether a discovered `template` issuer (with ``tenantPlaceholder``) is the issuer of the
    /// configured `issuer`: the same text with the placeholder standing for one path segment (the
    /// `common` of `https://login.microsoftonline.com/common/v2.0`). Discovery §4.3 wants the
    /// discovered issuer to be the configured one; a multi-tenant Microsoft authority answers
    /// this template instead, and ID tokens are then checked against their own tenant.
    public static func issuerTemplate(_ template: String, matches issuer: String) -> Bool {
        let parts = template.components(separatedBy: tenantPlaceholder)
        guard parts.count == 2, issuer.hasPrefix(parts[0]), issuer.hasSuffix(parts[1]),
            issuer.count > parts[0].count + parts[1].count
        else { return false }
        let segment = issuer.dropFirst(parts[0].count).dropLast(parts[1].count)
        return isTenantID(String(segment)) || ["common", "organizations", "consumers"].contains(segment)
    }

    /// A tenant id as Microsoft writes one: a GUID, or a domain name such as
    /// `contoso.onmicrosoft.com`; nothing that could change the rest of a URL.
    static func isTenantID(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 253 && !text.hasPrefix(".")
            && text.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-"
                    || $0 == "."
            } && !text.contains("..")
    }
}

/// An issuer's JSON Web Key Set, fetched once and kept; fetched again when a token names a key
/// it does not have (the provider rotated its keys), but not on every such token.
///
/// A stream of forged tokens with made-up `kid`s must not make the client hammer the issuer's
/// JWKS endpoint, so an unknown key id sends the set to be fetched again at most once per
/// ``refetchInterval`` for that key id, and at most once per ``minimumRefetchSpacing`` whatever
/// the key id. Both are measured on the injected wall clock (``now``). A token whose key is
/// still unknown inside those windows is refused with the `unknownKey` check at once.
public actor JWKSCache {
    /// Where the keys are.
    public nonisolated let url: URL
    /// How long an unknown key id waits before it can make the set be fetched again (60 s).
    public nonisolated let refetchInterval: TimeInterval
    /// How long any unknown key id waits after the last such fetch (10 s), so made-up key ids
    /// cannot fetch the set more than a few times a minute.
    public nonisolated let minimumRefetchSpacing: TimeInterval
    /// The wall clock the windows are measured on.
    public nonisolated let now: @Sendable () -> Date
    private let transport: any HTTPTransport
    private let taxonomy: any ErrorTaxonomy
    private var keys: [String: SignatureVerificationKey]?
    private var anonymous: [SignatureVerificationKey] = []
    private var inFlight: Task<Void, any Error>?
    /// When an unknown key id last made the set be fetched again, by key id ("" for none).
    private var refetchedFor: [String: Date] = [:]
    private var lastUnknownKeyRefetch: Date?
    /// How many times the set was fetched, for tests and diagnostics.
    public private(set) var fetchCount = 0

    /// Creates a cache for the set at `url`.
    ///
    /// - Parameters:
    ///   - url: the issuer's JWKS endpoint (its discovery document's `jwks_uri`).
    ///   - transport: what fetches the set.
    ///   - taxonomy: what a failed fetch is classified by (the issuer's error taxonomy).
    ///   - refetchInterval: an unknown key id fetches the set again at most once in this many seconds.
    ///   - minimumRefetchSpacing: unknown key ids together fetch it at most once in this many seconds.
    ///   - now: the wall clock.
    public init(
        url: URL, transport: any HTTPTransport, taxonomy: any ErrorTaxonomy, refetchInterval: TimeInterval = 60,
        minimumRefetchSpacing: TimeInterval = 10, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.url = url
        self.transport = transport
        self.taxonomy = taxonomy
        self.refetchInterval = refetchInterval
        self.minimumRefetchSpacing = minimumRefetchSpacing
        self.now = now
    }

    /// The key with `id` for `algorithm`, fetching the set when it is not cached, or when it
    /// does not hold the key and the refetch windows allow it.
    func key(id: String?, algorithm: SignatureAlgorithm) async throws -> SignatureVerificationKey {
        if keys == nil { try await refresh() }
        if let found = lookup(id: id, algorithm: algorithm) { return found }
        // A fetch already on its way (another token's) may bring the key.
        if let inFlight {
            try await inFlight.value
            if let found = lookup(id: id, algorithm: algorithm) { return found }
        }
        let name = id ?? ""
        let now = now()
        if let waitingFor = refetchWait(for: name, at: now) {
            throw IDTokenError(
                check: .unknownKey,
                detail:
                    "no \(algorithm.rawValue) key '\(id ?? "(no kid)")' is in the issuer's key set at "
                    + "\(url.absoluteString); it was not fetched again because it was fetched for an unknown key "
                    + "\(Int(waitingFor.rounded(.up))) s too recently")
        }
        refetchedFor = refetchedFor.filter { now.timeIntervalSince($0.value) < refetchInterval }
        refetchedFor[name] = now
        lastUnknownKeyRefetch = now
        try await refresh()
        if let found = lookup(id: id, algorithm: algorithm) { return found }
        throw IDTokenError(
            check: .unknownKey,
            detail:
                "no \(algorithm.rawValue) key '\(id ?? "(no kid)")' is in the issuer's key set at \(url.absoluteString), "
                + "even after fetching it again")
    }

    /// How much longer an unknown `keyID` must wait before it may fetch the set again; `nil`
    /// when it may now.
    private func refetchWait(for keyID: String, at now: Date) -> TimeInterval? {
        var wait: TimeInterval = 0
        if let last = refetchedFor[keyID] { wait = max(wait, refetchInterval - now.timeIntervalSince(last)) }
        if let last = lastUnknownKeyRefetch { wait = max(wait, minimumRefetchSpacing - now.timeIntervalSince(last)) }
        return wait > 0 ? wait : nil
    }

    private func lookup(id: String?, algorithm: SignatureAlgorithm) -> SignatureVerificationKey? {
        if let id { return keys?[id].flatMap { $0.algorithm == algorithm ? $0 : nil } }
        let candidates = (Array(keys?.values ?? [:].values) + anonymous).filter { $0.algorithm == algorithm }
        return candidates.count == 1 ? candidates[0] : nil
    }

    /// Fetches the set now; concurrent callers share one fetch.
    ///
    /// - Throws: `AuthError` when the key set cannot be fetched or read.
    public func refresh() async throws {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.fetch() }
        inFlight = task
        defer { inFlight = nil }
        try await task.value
    }

    private func fetch() async throws {
        fetchCount += 1
        let response = try await LoginHTTP.send(
            HTTPRequest(method: .get, url: url, headers: ["Accept": "application/json"]), through: transport,
            taxonomy: taxonomy)
        guard response.isSuccess else { throw taxonomy.classify(response) }
        guard let set = response.json?["keys"]?.arrayValue else {
            throw AuthError(
                category: .server, message: "The key set at \(url.absoluteString) is not a JWKS (no \"keys\" array).",
                httpStatus: response.status, provider: taxonomy.provider)
        }
        var byID: [String: SignatureVerificationKey] = [:]
        var unnamed: [SignatureVerificationKey] = []
        for entry in set {
            guard let key = Self.key(from: entry) else { continue }
            if let kid = entry["kid"]?.stringValue { byID[kid] = key } else { unnamed.append(key) }
        }
        keys = byID
        anonymous = unnamed
    }

    /// A verification key from one JWK; `nil` for keys Sesame does not use (encryption keys,
    /// other curves, private parts are ignored).
    package static func key(from jwk: JSONValue) -> SignatureVerificationKey? {
        if let use = jwk["use"]?.stringValue, use != "sig" { return nil }
        switch jwk["kty"]?.stringValue {
        case "RSA":
            guard let n = jwk["n"]?.stringValue.flatMap(Base64URL.decode),
                let e = jwk["e"]?.stringValue.flatMap(Base64URL.decode)
            else { return nil }
            return try? .rsa(modulus: n, exponent: e)
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256", let x = jwk["x"]?.stringValue.flatMap(Base64URL.decode),
                let y = jwk["y"]?.stringValue.flatMap(Base64URL.decode)
            else { return nil }
            return try? .p256(x: x, y: y)
        default:
            return nil
        }
    }
}

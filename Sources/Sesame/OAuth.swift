import Foundation

/// A PKCE code verifier and its S256 challenge (RFC 7636).
///
/// The verifier is a secret until the code exchange: ``description`` does not show it.
public struct PKCE: Sendable, Hashable, CustomStringConvertible {
    /// The code verifier, sent with the code exchange. Secret.
    public let verifier: String
    /// `BASE64URL(SHA256(ASCII(verifier)))`, sent with the authorization request.
    public let challenge: String
    /// Always `S256`; Sesame never sends the `plain` method.
    public var method: String { "S256" }

    /// A fresh verifier of 32 random bytes (43 characters), as RFC 7636 §4.1 recommends.
    public static func generate() throws -> PKCE {
        try PKCE(verifier: Crypto.randomURLSafeString(byteCount: 32))
    }

    /// The pair for a given verifier.
    ///
    /// - Throws: ``AuthError`` when the verifier is not 43–128 unreserved characters.
    public init(verifier: String) throws {
        guard (43...128).contains(verifier.count),
            verifier.unicodeScalars.allSatisfy(Self.verifierCharacters.contains)
        else {
            throw AuthError(
                category: .invalid,
                message: "A PKCE code verifier must be 43 to 128 characters from A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1).")
        }
        self.verifier = verifier
        self.challenge = PKCE.challenge(for: verifier)
    }

    private static let verifierCharacters = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// The S256 challenge of `verifier`.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Crypto.sha256(Data(verifier.utf8)))
    }

    public var description: String { "PKCE(method: S256, challenge: \(challenge), verifier: \(Redaction.placeholder))" }
}

/// OAuth 2.0 helpers shared by every provider.
public enum OAuth {
    /// A fresh random `state` (32 bytes of entropy, URL-safe).
    public static func makeState() throws -> String { try Crypto.randomURLSafeString(byteCount: 32) }

    /// Builds an authorization request URL (RFC 6749 §4.1.1 with RFC 7636's PKCE parameters).
    ///
    /// `extraParameters` come last, in order (for example Facebook's `auth_type=rerequest`); a
    /// parameter already present on `endpoint` is kept.
    public static func authorizationURL(
        endpoint: URL,
        clientID: String,
        redirectURI: URL,
        scopes: [String],
        state: String,
        pkce: PKCE?,
        scopeSeparator: String = " ",
        responseType: String = "code",
        extraParameters: [(String, String)] = []
    ) -> URL {
        var items: [(String, String)] = [
            ("client_id", clientID),
            ("redirect_uri", redirectURI.absoluteString),
            ("response_type", responseType),
            ("state", state),
        ]
        if !scopes.isEmpty { items.append(("scope", scopes.joined(separator: scopeSeparator))) }
        if let pkce {
            items.append(("code_challenge", pkce.challenge))
            items.append(("code_challenge_method", pkce.method))
        }
        items.append(contentsOf: extraParameters)
        return appendingQuery(items, to: endpoint)
    }

    /// `url` with `items` appended to its query, form-encoded.
    public static func appendingQuery(_ items: [(String, String)], to url: URL) -> URL {
        guard !items.isEmpty else { return url }
        return URL(string: appendingQuery(items, toText: url.absoluteString)) ?? url
    }

    /// The URL written as `text` with `items` appended to its query, form-encoded, as text: for a
    /// caller that parses the result once rather than a URL before and one after.
    package static func appendingQuery(_ items: [(String, String)], toText text: String) -> String {
        guard !items.isEmpty else { return text }
        // On UTF-8 bytes, into one buffer: String's `contains(_: String)` goes through
        // Foundation's locale-aware search, which cost more than the rest of a Graph call, and
        // joining slices as strings cost a third of what is left.
        var text = text
        return text.withUTF8 { bytes in
            let hash = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
            var joined: [UInt8] = []
            joined.reserveCapacity(bytes.count + 1 + FormEncoding.estimatedCount(of: items))
            joined.append(contentsOf: bytes[..<hash])
            if let question = bytes[..<hash].firstIndex(of: UInt8(ascii: "?")) {
                if question + 1 != hash && bytes[hash - 1] != UInt8(ascii: "&") { joined.append(UInt8(ascii: "&")) }
            } else {
                joined.append(UInt8(ascii: "?"))
            }
            FormEncoding.append(items, to: &joined)
            joined.append(contentsOf: bytes[hash...])
            return String(decoding: joined, as: UTF8.self)
        }
    }

    /// Reads a redirect that came back to the app: either an authorization code, or an OAuth
    /// error such as the person declining.
    ///
    /// The redirect's `state` must equal `expectedState`; a missing or different `state` is
    /// refused with ``AuthError/stateMismatch(provider:missing:)`` whatever else it carries,
    /// because it cannot be tied to this login. A redirect that carries one of its parameters
    /// (`code`, `state`, `error`, `iss`, …) twice is refused as malformed (RFC 6749 §3.1): which
    /// one the provider sent would be a guess.
    ///
    /// - Throws: ``AuthError`` for a missing or mismatched state, a parameter given twice, or a
    ///   redirect with neither a code nor an error.
    public static func parseRedirect(
        _ url: URL, expectedState: String, expectedIssuer: AuthorizationResponseIssuer? = nil,
        provider: ProviderID? = nil
    ) throws
        -> RedirectOutcome
    {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw AuthError.malformedRedirect("the URL could not be parsed", provider: provider)
        }
        // Parameters may come in the query or, for implicit-style providers, the fragment.
        var parameters = FormEncoding.decode(components.percentEncodedQuery ?? "")
        if let fragment = components.percentEncodedFragment, parameters.isEmpty {
            parameters = FormEncoding.decode(fragment)
        }
        return try parseRedirectParameters(
            parameters, expectedState: expectedState, expectedIssuer: expectedIssuer, provider: provider)
    }

    /// Like ``parseRedirect(_:expectedState:expectedIssuer:provider:)``, from already decoded
    /// parameters.
    public static func parseRedirectParameters(
        _ parameters: [(String, String)], expectedState: String, expectedIssuer: AuthorizationResponseIssuer? = nil,
        provider: ProviderID? = nil
    ) throws -> RedirectOutcome {
        func value(_ name: String) -> String? { parameters.first { $0.0 == name }?.1 }
        // RFC 6749 §3.1: a parameter is never sent twice. Two codes (or states, or errors) leave
        // which one the provider sent to a guess, so the answer is refused, not half-used.
        var seen: Set<String> = []
        for (name, _) in parameters where OAuthErrorResponse.redirectParameterNames.contains(name) {
            guard seen.insert(name).inserted else {
                throw AuthError.malformedRedirect(
                    "it carries '\(name)' more than once, and a provider sends each only once", provider: provider)
            }
        }
        guard let state = value("state"), !state.isEmpty else {
            throw AuthError.stateMismatch(provider: provider, missing: true)
        }
        guard constantTimeEquals(state, expectedState) else {
            throw AuthError.stateMismatch(provider: provider, missing: false)
        }
        // RFC 9207 §2.4: checked on error answers too, before anything else is used.
        if let expectedIssuer {
            let iss = value("iss")
            if let iss, iss != expectedIssuer.issuer {
                throw AuthError.issuerMismatch(expected: expectedIssuer.issuer, received: iss, provider: provider)
            }
            if iss == nil, expectedIssuer.required {
                throw AuthError.issuerMismatch(expected: expectedIssuer.issuer, received: nil, provider: provider)
            }
        }
        if let error = value("error"), !error.isEmpty {
            var additional: [String: String] = [:]
            for (name, text) in parameters where !OAuthErrorResponse.redirectParameterNames.contains(name) {
                additional[name] = additional[name] ?? text
            }
            return .error(
                OAuthErrorResponse(
                    error: error,
                    errorDescription: value("error_description"),
                    errorURI: value("error_uri"),
                    additionalParameters: additional
                ))
        }
        if let code = value("code"), !code.isEmpty { return .code(code) }
        throw AuthError.malformedRedirect("it has neither a 'code' nor an 'error' parameter", provider: provider)
    }

    /// Compares two strings in time that depends only on their lengths (for secrets: codes,
    /// states, nonces, client secrets, PKCE challenges). Shared with the providers and the emulator.
    package static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in x.indices { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}

/// What RFC 9207 (OAuth 2.0 Authorization Server Issuer Identification) asks of a login
/// redirect's `iss` parameter: when present it must be the configured issuer; when the provider
/// advertises `authorization_response_iss_parameter_supported`, it must be present.
public struct AuthorizationResponseIssuer: Sendable, Hashable {
    /// The issuer `iss` must equal, compared as a string without normalisation (RFC 9207 §2.4).
    public var issuer: String
    /// Whether a redirect without `iss` is refused.
    public var required: Bool

    /// Creates the expectation.
    public init(issuer: String, required: Bool) {
        self.issuer = issuer
        self.required = required
    }
}

/// What a login redirect carried.
public enum RedirectOutcome: Sendable, Hashable, CustomStringConvertible {
    /// An authorization code to exchange. Secret.
    case code(String)
    /// An OAuth error, such as `access_denied`.
    case error(OAuthErrorResponse)

    public var description: String {
        switch self {
        case .code: "code(\(Redaction.placeholder))"
        case .error(let error): "error(\(error.summary))"
        }
    }
}

/// An OAuth 2.0 error answer (RFC 6749 §4.1.2.1 and §5.2).
///
/// A provider's own fields (Facebook's `error_reason` and `error_code`, say) are kept in
/// ``additionalParameters``, which the provider's module reads through typed accessors.
public struct OAuthErrorResponse: Sendable, Hashable, Codable {
    /// The error code, such as `access_denied` or `invalid_grant`.
    public var error: String
    /// The human-readable description, when given.
    public var errorDescription: String?
    /// A page about the error, when given.
    public var errorURI: String?
    /// The answer's other parameters (redirect query parameters, or a JSON body's string and
    /// number members), by name; the first of a repeated name. The redirect's `state`, `iss` and
    /// `code` are not kept.
    public var additionalParameters: [String: String]

    /// The redirect parameters that are not provider extras.
    static let redirectParameterNames: Set<String> = [
        "error", "error_description", "error_uri", "state", "iss", "code",
    ]

    /// Creates an error answer.
    public init(
        error: String, errorDescription: String? = nil, errorURI: String? = nil,
        additionalParameters: [String: String] = [:]
    ) {
        self.error = error
        self.errorDescription = errorDescription
        self.errorURI = errorURI
        self.additionalParameters = additionalParameters
    }

    /// Reads an RFC 6749 §5.2 JSON error body; `nil` when the body is not one.
    ///
    /// Top-level string members and whole numbers other than the standard three become
    /// ``additionalParameters`` (a number as its decimal text).
    public init?(json: JSONValue?) {
        guard let json, let error = json["error"]?.stringValue, case .object(let members) = json else { return nil }
        var additional: [String: String] = [:]
        for (name, value) in members where !Self.redirectParameterNames.contains(name) {
            if let text = value.stringValue {
                additional[name] = text
            } else if let number = value.lenientInt {
                additional[name] = String(number)
            }
        }
        self.init(
            error: error,
            errorDescription: json["error_description"]?.stringValue,
            errorURI: json["error_uri"]?.stringValue,
            additionalParameters: additional
        )
    }

    /// `error`, with the provider's reason (an `error_reason` parameter) and the description
    /// when present.
    public var summary: String {
        var text = error
        if let reason = additionalParameters["error_reason"] { text += ", reason \(reason)" }
        if let errorDescription { text += ": \(errorDescription)" }
        return text
    }
}

/// A successful token endpoint answer (RFC 6749 §5.1), which Facebook's `oauth/access_token`
/// also follows.
public struct OAuthTokenResponse: Sendable, Hashable {
    /// The access token. Secret.
    public var accessToken: String
    /// The token type, usually `bearer`.
    public var tokenType: String?
    /// Seconds until the token expires, when given.
    public var expiresIn: Int?
    /// A refresh token, when given. Secret.
    public var refreshToken: String?
    /// Seconds until the refresh token itself expires, when given (`refresh_token_expires_in`,
    /// as GitHub and others send it; Keycloak's `refresh_expires_in`).
    public var refreshTokenExpiresIn: Int?
    /// The granted scopes, when the provider lists them.
    public var scope: [String]?
    /// An OpenID Connect ID token, when given. Secret.
    public var idToken: String?
    /// The whole parsed body, for provider-specific fields.
    public var raw: JSONValue

    /// Reads a token answer; `nil` when the body has no `access_token`.
    public init?(json: JSONValue?) {
        guard let json, let token = json["access_token"]?.stringValue, !token.isEmpty else { return nil }
        self.accessToken = token
        self.tokenType = json["token_type"]?.stringValue
        self.expiresIn = json["expires_in"]?.lenientInt
        self.refreshToken = json["refresh_token"]?.stringValue
        self.refreshTokenExpiresIn = (json["refresh_token_expires_in"] ?? json["refresh_expires_in"])?.lenientInt
        self.scope = json["scope"]?.stringValue.map {
            $0.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        }
        self.idToken = json["id_token"]?.stringValue
        self.raw = json
    }
}

extension PKCE: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: ["challenge": challenge, "method": method, "verifier": Redaction.placeholder])
    }
}

extension RedirectOutcome: CustomReflectable {
    public var customMirror: Mirror {
        switch self {
        case .code: Mirror(self, children: ["code": Redaction.placeholder], displayStyle: .enum)
        case .error(let error): Mirror(self, children: ["error": error], displayStyle: .enum)
        }
    }
}

extension OAuthTokenResponse: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "OAuthTokenResponse(accessToken: \(Redaction.placeholder), tokenType: \(tokenType ?? "nil"), "
            + "expiresIn: \(expiresIn.map(String.init) ?? "nil"), refreshToken: "
            + "\(refreshToken == nil ? "nil" : Redaction.placeholder), scope: \(scope?.joined(separator: " ") ?? "nil"), "
            + "idToken: \(idToken == nil ? "nil" : Redaction.placeholder))"
    }

    public var debugDescription: String { description }

    /// The same fields as ``description``; `raw`, which repeats the tokens, is left out.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessToken": Redaction.placeholder, "tokenType": tokenType as Any, "expiresIn": expiresIn as Any,
                "refreshToken": (refreshToken == nil ? nil : Redaction.placeholder) as Any, "scope": scope as Any,
                "idToken": (idToken == nil ? nil : Redaction.placeholder) as Any,
            ])
    }
}

import Foundation

/// How a described provider's errors are classified: the code read where
/// ``OAuth2Description/errors`` says (on a 401 without one, the RFC 6750
/// `WWW-Authenticate: Bearer error="…"` challenge), matched against the provider's own rows and
/// then the base rows every table extends (``ErrorRuleTable/base``); a `Retry-After` header
/// (seconds or an HTTP date) becomes the error's `retryAfter` on errors that ask to wait. It is
/// total: an HTML page, an empty body or broken JSON is classified by its status.
public struct OAuth2ErrorTaxonomy: ErrorTaxonomy {
    /// The provider the errors are reported for.
    public var provider: ProviderID
    /// The provider's name in messages ("Dropbox", "the OpenID provider 'work'").
    public var displayName: String
    /// Where the error code sits.
    public var format: OAuth2ErrorFormat
    /// The rows tried: the provider's own (which extend the base), or the base alone.
    public var table: ErrorRuleTable
    /// How the client authenticates, when known: a refused client's message then says what to
    /// configure (the secret, or the client id).
    public var clientAuthenticationMethod: ClientAuthenticationMethod?
    /// The wall clock, for `Retry-After` dates.
    public var now: @Sendable () -> Date

    /// Creates a taxonomy.
    public init(
        provider: ProviderID, displayName: String, format: OAuth2ErrorFormat = .rfc6749, table: ErrorRuleTable = .base,
        clientAuthenticationMethod: ClientAuthenticationMethod? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.displayName = displayName
        self.format = format
        self.table = table
        self.clientAuthenticationMethod = clientAuthenticationMethod
        self.now = now
    }

    /// The taxonomy of `described`.
    public init(_ described: OAuth2Description, now: @escaping @Sendable () -> Date = { Date() }) {
        self.init(
            provider: described.id, displayName: described.displayName, format: described.errors,
            table: described.errorRows ?? .base, now: now)
    }

    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let json = body.count <= 1 << 20 ? JSONValue(parsing: body) : nil
        var oauth = format.code(in: json).map {
            OAuthErrorResponse(error: $0, errorDescription: format.errorDescription(in: json))
        }
        var source = oauth == nil ? "none" : "body"
        if oauth == nil,
            let challenge = headers.values(for: "WWW-Authenticate").lazy.compactMap(BearerChallenge.init(header:))
                .first, let error = challenge.error
        {
            oauth = OAuthErrorResponse(error: error, errorDescription: challenge.errorDescription)
            source = "www-authenticate"
        }
        return self.error(oauth, status: status, headers: headers, body: json, source: source)
    }

    public func classifyLoginError(_ response: OAuthErrorResponse) -> AuthError {
        var error = self.error(response, status: nil, headers: [:], body: nil, source: "redirect")
        error.loginFailedReason = error.category == .userCancelled ? .userCancelled : .providerError
        return error
    }

    private func error(
        _ oauth: OAuthErrorResponse?, status: Int?, headers: HTTPHeaders, body: JSONValue?, source: String
    ) -> AuthError {
        let rule = table.classifying(ErrorFacts(error: oauth?.error, status: status))
        var message = "\(displayName.prefix(1).uppercased() + displayName.dropFirst()) answered"
        if let status { message += " HTTP \(status)" }
        if let oauth {
            message += " with error '\(Self.printable(oauth.error))'"
            if let description = oauth.errorDescription { message += ": \(Self.printable(description))" }
        } else if let status, status >= 500 {
            message += " with no OAuth error in the body"
        }
        if !message.hasSuffix(".") { message += "." }
        message += " " + rule.meaning
        if rule.id == "client-refused", let method = clientAuthenticationMethod {
            message +=
                method == .none
                ? " No client secret is configured, so none was sent: if the provider gave this client a secret,"
                    + " configure it; otherwise check the client id."
                : " The configured client secret was sent (\(method)): check that it and the client id are the"
                    + " ones the provider issued."
        }
        var error = AuthError(rule: rule, message: message, provider: provider)
        error.httpStatus = status
        error.body = body
        if rule.recoveryTactic == .retry || rule.recoveryTactic == .retryAfterBackoff {
            error.retryAfter = headers.retryAfter(now: now())
        }
        error.attach(OAuthErrorDetails(oauthError: oauth?.error, errorSource: source))
        return error
    }

    /// At most 200 printable characters of text from the provider, for messages.
    package static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200).map(Character.init))
    }
}

/// Where ``OAuth2ErrorTaxonomy`` found the OAuth error it classified: attached to its errors,
/// read with `error.details(as: OAuthErrorDetails.self)`.
public struct OAuthErrorDetails: ProviderErrorDetails, Hashable {
    /// The OAuth `error` code, from the body or the `WWW-Authenticate` header.
    public var oauthError: String?
    /// Where the code was read: `body`, `www-authenticate`, `redirect` or `none`.
    public var errorSource: String

    /// Creates the details.
    public init(oauthError: String?, errorSource: String) {
        self.oauthError = oauthError
        self.errorSource = errorSource
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = ["errorSource": .string(errorSource)]
        if let oauthError { object["oauthError"] = .string(oauthError) }
        return .object(object)
    }

    public func redacting(_ secrets: [String]) -> OAuthErrorDetails {
        OAuthErrorDetails(
            oauthError: oauthError.map { Redaction.redacting(secrets, in: $0) }, errorSource: errorSource)
    }
}

/// An RFC 6750 §3 `Bearer` challenge from a `WWW-Authenticate` header.
public struct BearerChallenge: Sendable, Hashable {
    /// The `error` parameter (`invalid_token`, `insufficient_scope`, ...).
    public var error: String?
    /// The `error_description` parameter.
    public var errorDescription: String?
    /// The `scope` parameter: what the resource needs.
    public var scope: String?
    /// The `realm` parameter.
    public var realm: String?

    /// Reads a header value; `nil` unless it is a `Bearer` challenge.
    public init?(header: String) {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bearer") else { return nil }
        var rest = Substring(trimmed.dropFirst(6))
        guard rest.isEmpty || rest.first == " " else { return nil }
        var parameters: [String: String] = [:]
        while true {
            rest = rest.drop { $0 == " " || $0 == "," }
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            rest = rest[rest.index(after: equals)...]
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end].trimmingCharacters(in: .whitespaces)
                rest = rest[end...]
            }
            if parameters[name] == nil { parameters[name] = value }
        }
        error = parameters["error"]
        errorDescription = parameters["error_description"]
        scope = parameters["scope"]
        realm = parameters["realm"]
    }
}

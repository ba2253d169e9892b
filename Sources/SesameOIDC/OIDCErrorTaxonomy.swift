import Foundation
import Sesame

/// Where ``OIDCErrorTaxonomy`` found the OAuth error it classified: attached to its errors,
/// read with `error.details(as: OIDCErrorDetails.self)`.
public struct OIDCErrorDetails: ProviderErrorDetails, Hashable {
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

    public func redacting(_ secrets: [String]) -> OIDCErrorDetails {
        OIDCErrorDetails(
            oauthError: oauthError.map { Redaction.redacting(secrets, in: $0) }, errorSource: errorSource)
    }
}

/// Classifies the errors of any OAuth 2.0 / OpenID Connect provider through the table in
/// `OAuthErrors.json` (``table``), generated into Swift at build time.
///
/// It reads the RFC 6749 §5.2 JSON error body; on a 401 without one, the RFC 6750
/// `WWW-Authenticate: Bearer error="…"` challenge; a `Retry-After` header (seconds or an
/// HTTP date) becomes the error's `retryAfter` on throttling and retry errors. It is total:
/// HTML pages, empty bodies and broken JSON are classified by their status.
public struct OIDCErrorTaxonomy: ErrorTaxonomy {
    /// The provider the errors are reported for.
    public var provider: ProviderID
    /// The provider's name in messages ("the OpenID provider 'work'").
    public var displayName: String
    /// The wall clock, for `Retry-After` dates.
    public var now: @Sendable () -> Date
    /// How the client authenticates, when known: a refused client's message then says what
    /// to configure (the secret, or the client id).
    public var clientAuthMethod: OIDCClientAuthMethod?

    /// The rows of `OAuthErrors.json`, in the order they are tried.
    public static var table: ErrorRuleTable { OAuthErrors.table }

    /// Creates the taxonomy.
    public init(
        provider: ProviderID = .oidc, displayName: String? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.displayName = displayName ?? "the OpenID provider '\(provider)'"
        self.now = now
    }

    /// Classifies a failed HTTP response.
    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let json = body.count <= 1 << 20 ? JSONValue(parsing: body) : nil
        var oauth = OAuthErrorResponse(json: json)
        var source = oauth == nil ? "none" : "body"
        if oauth == nil,
            let challenge = headers.values(for: "WWW-Authenticate").lazy.compactMap(
                BearerChallenge.init(header:)
            ).first, let error = challenge.error
        {
            oauth = OAuthErrorResponse(error: error, errorDescription: challenge.errorDescription)
            source = "www-authenticate"
        }
        let facts = ErrorFacts(error: oauth?.error, status: status)
        return error(for: facts, oauth: oauth, status: status, headers: headers, body: json, source: source)
    }

    /// Classifies an error a login redirect or device poll returned in OAuth form.
    public func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError {
        var classified = self.error(
            for: ErrorFacts(error: error.error), oauth: error, status: nil, headers: [:], body: nil, source: "redirect")
        classified.loginFailedReason =
            switch classified.category {
            case .userCancelled: .userCancelled
            default: .providerError
            }
        return classified
    }

    private func error(
        for facts: ErrorFacts, oauth: OAuthErrorResponse?, status: Int?, headers: HTTPHeaders, body: JSONValue?,
        source: String
    ) -> AuthError {
        let rule = Self.table.classifying(facts)
        var retryAfter: Duration?
        if rule.recoveryTactic == .retry || rule.recoveryTactic == .retryAfterBackoff {
            retryAfter = headers.retryAfter(now: now())
        }
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
        if rule.id == "client-refused", let method = clientAuthMethod {
            switch method {
            case .none:
                message +=
                    " No client secret is configured, so none was sent: if the provider gave this client a secret,"
                    + " configure it; otherwise check the client id."
            case .privateKeyJWT:
                message +=
                    " A client assertion signed with the configured key was sent (private_key_jwt): check that the"
                    + " provider has this key's public half (and key id) registered for the client id."
            default:
                message +=
                    " The configured client secret was sent (\(method)): check that it and the client id are the"
                    + " ones the provider issued."
            }
        }
        var error = AuthError(rule: rule, message: message, provider: provider)
        error.httpStatus = status
        error.retryAfter = retryAfter
        error.body = body
        error.attach(OIDCErrorDetails(oauthError: oauth?.error, errorSource: source))
        return error
    }

    /// At most 200 printable characters of text from the provider, for messages.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200).map(Character.init))
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

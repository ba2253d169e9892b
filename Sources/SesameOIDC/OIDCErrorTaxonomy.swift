import Foundation
import Sesame

/// Classifies the errors of any OAuth 2.0 / OpenID Connect provider: the core's
/// `OAuth2ErrorTaxonomy` with the base rows (`BaseErrors.json` in the core) as ``table`` says.
///
/// It reads the RFC 6749 §5.2 JSON error body; on a 401 without one, the RFC 6750
/// `WWW-Authenticate: Bearer error="…"` challenge; a `Retry-After` header (seconds or an
/// HTTP date) becomes the error's `retryAfter` on throttling and retry errors. It is total:
/// HTML pages, empty bodies and broken JSON are classified by their status.
public struct OIDCErrorTaxonomy: ErrorTaxonomy {
    /// The generic taxonomy that does the work, with the provider, its name in messages ("the
    /// OpenID provider 'work'") and the clock for `Retry-After` dates.
    public var generic: OAuth2ErrorTaxonomy

    /// The provider the errors are reported for.
    public var provider: ProviderID { generic.provider }
    /// How the client authenticates, when known: a refused client's message then says what
    /// to configure (the secret, or the client id).
    public var clientAuthMethod: OIDCClientAuthMethod? {
        get { generic.clientAuthenticationMethod }
        set { generic.clientAuthenticationMethod = newValue }
    }

    /// The rows tried: the core's base rows (RFC 6749/6750/8628 codes, HTTP statuses, anything)
    /// without `not-found` and `conflict`. This taxonomy also classifies a resource server's
    /// answers to authorized requests, where a 404 or 409 is that API's answer to the request (a
    /// `bad-request`), not a wrong endpoint setting of the provider.
    public static let table = ErrorRuleTable(
        name: "OIDCErrors", rules: [], extending: .base, leavingOut: ["not-found", "conflict"])

    /// Creates the taxonomy.
    public init(
        provider: ProviderID = .oidc, displayName: String? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        generic = OAuth2ErrorTaxonomy(
            provider: provider, displayName: displayName ?? "the OpenID provider '\(provider)'", table: Self.table,
            now: now)
    }

    /// Classifies a failed HTTP response.
    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        generic.classify(status: status, headers: headers, body: body)
    }

    /// Classifies an error a login redirect or device poll returned in OAuth form.
    public func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError { generic.classifyLoginError(error) }
}

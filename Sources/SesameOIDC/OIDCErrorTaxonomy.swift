import Foundation
import Sesame

/// How the errors of an OpenID provider are classified: the core's `OAuth2ErrorTaxonomy` (the
/// RFC 6749 §5.2 body, on a 401 the RFC 6750 `WWW-Authenticate` challenge, `Retry-After`; total on
/// any input) with `openIDTable`, made by `OIDCErrorTaxonomy.openID()`.
public typealias OIDCErrorTaxonomy = OAuth2ErrorTaxonomy

extension OAuth2ErrorTaxonomy {
    /// The rows tried: the core's base rows (RFC 6749/6750/8628 codes, HTTP statuses, anything)
    /// without `not-found` and `conflict`. This taxonomy also classifies a resource server's
    /// answers to authorized requests, where a 404 or 409 is that API's answer to the request (a
    /// `bad-request`), not a wrong endpoint setting of the provider.
    public static let openIDTable = ErrorRuleTable(
        name: "OIDCErrors", rules: [], extending: .base, leavingOut: ["not-found", "conflict"])

    /// The taxonomy of an OpenID provider, named in messages as `displayName` ("the OpenID provider
    /// 'work'" when `nil`).
    public static func openID(
        provider: ProviderID = .oidc, displayName: String? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) -> OAuth2ErrorTaxonomy {
        OAuth2ErrorTaxonomy(
            provider: provider, displayName: displayName ?? "the OpenID provider '\(provider)'", table: openIDTable,
            now: now)
    }
}

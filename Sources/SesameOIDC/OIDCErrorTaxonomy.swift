import Foundation
import Sesame

/// Where an OpenID provider's taxonomy found the OAuth error it classified: the core's
/// `OAuthErrorDetails`, under the name OpenID code has used.
public typealias OIDCErrorDetails = OAuthErrorDetails

/// How the errors of an OpenID provider are classified: the core's `OAuth2ErrorTaxonomy` (the
/// RFC 6749 §5.2 body, on a 401 the RFC 6750 `WWW-Authenticate` challenge, `Retry-After`; total on
/// any input) with the rows of `OAuthErrors.json`, made by `OIDCErrorTaxonomy.openID()`.
public typealias OIDCErrorTaxonomy = OAuth2ErrorTaxonomy

extension OAuth2ErrorTaxonomy {
    /// The rows of `OAuthErrors.json`, generated into Swift at build time, in the order they are tried.
    public static var openIDTable: ErrorRuleTable { OAuthErrors.table }

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

import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameHTTPServer
import SesameOIDC

/// An OpenID session as the generic commands use it.
struct OIDCAccountSession: ProviderAccountSession {
    var session: OIDCSession
    var canRevoke: Bool

    var providerSession: OIDCSession { session }

    func logOut(revoke: Bool) async throws -> String? {
        try await RevocationFailed.loggingOut(
            revoke: revoke, advice: "end the session in the provider's account settings"
        ) {
            try await session.logout(revoke: revoke)
        }
        guard revoke else { return nil }
        // Removed here, not revoked there: as a failed revocation, so that --revoke does not pass.
        guard canRevoke else {
            throw RevocationFailed(
                underlying: OIDCNoRevocationEndpoint(), advice: "end the session in the provider's account settings")
        }
        return "its tokens were revoked"
    }
}

/// An issuer that lists no revocation endpoint (RFC 7009) where Sesame looks for one.
struct OIDCNoRevocationEndpoint: Error, CustomStringConvertible {
    var description: String {
        "the issuer lists no revocation_endpoint, neither in its OpenID discovery nor in its RFC 8414 metadata"
    }
}

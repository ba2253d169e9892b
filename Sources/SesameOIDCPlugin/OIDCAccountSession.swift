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
        return canRevoke
            ? "its tokens were revoked" : "the issuer has no revocation endpoint, so nothing was revoked there"
    }
}

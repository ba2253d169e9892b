import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameHTTPServer
import SesameOIDC

/// An OpenID session as the generic commands use it.
struct OIDCAccountSession: AccountSession {
    var session: OIDCSession
    var canRevoke: Bool

    var key: CredentialKey { session.key }
    var userID: String? { get async { await session.token?.userID } }

    func open() async throws -> Bool { try await session.open(allowLoginUI: false).isOpen }

    func condition(of credential: StoredCredential) -> LoginCondition { session.session.condition(of: credential) }

    func warning(for token: AccessToken) -> String? { session.session.renewer.expiryWarning(for: token, at: Date()) }

    func validToken() async throws -> AccessToken { try await session.validToken() }

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

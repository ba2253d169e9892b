import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameGitHub

/// A GitHub session as the generic commands use it.
struct GitHubAccountSession: ProviderAccountSession {
    var session: GitHubSession
    var host: GitHubHost

    var providerSession: GitHubSession { session }

    /// Where the person can take back what the login was granted.
    var revocationAdvice: String {
        let base = host.isGitHubDotCom ? "https://github.com" : host.oauthBaseURL.absoluteString.trimmingSuffix("/")
        return "GitHub keeps the app's grant: revoke it at \(base)/settings/applications (or delete a personal token "
            + "at \(base)/settings/tokens)"
    }

    func logOut(revoke: Bool) async throws -> String? {
        let advice = revocationAdvice.replacingOccurrences(of: "GitHub keeps the app's grant: r", with: "R")
        try await RevocationFailed.loggingOut(revoke: revoke, advice: advice) {
            try await session.oauth2.logOut(revoke: false)
            // Revoking a grant needs the app's client secret (DELETE /applications/{client_id}/grant),
            // which a desktop app does not have.
            if revoke { throw GitHubCannotRevoke() }
        }
        return revocationAdvice
    }
}

/// GitHub lets only the app's server (with the client secret) revoke a grant.
struct GitHubCannotRevoke: Error, CustomStringConvertible {
    var description: String { "GitHub lets only an app's server, with its client secret, revoke a grant" }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

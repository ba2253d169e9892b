import Foundation
import Sesame

/// Facebook's renewal: the token extension call (`fb_exchange_token` with an app secret,
/// `fb_extend_sso_token` on the desktop), as the core's `TokenRenewer` and
/// `FacebookSession.extendTokenIfNeeded(force:)` call it. Nothing is saved here: the core's
/// renewal saves the result.
final class FacebookTokenExtender: Sendable {
    /// What the last attempts were, for the retry interval and `lastTokenExtension`.
    struct Lifecycle {
        var lastExtensionAttempt: Date?
        var lastExtension: TokenExtensionOutcome?
    }

    let provider: FacebookProvider
    let transport: any HTTPTransport
    /// Extension is tried at most once in this many seconds while the token still works.
    let retryInterval: TimeInterval
    let now: @Sendable () -> Date
    let lifecycle = Locked(Lifecycle())

    init(
        provider: FacebookProvider, transport: any HTTPTransport, retryInterval: TimeInterval,
        now: @escaping @Sendable () -> Date
    ) {
        self.provider = provider
        self.transport = transport
        self.retryInterval = retryInterval
        self.now = now
    }

    /// Asks Facebook for a longer-lived copy of `token`.
    func extend(_ token: AccessToken) async throws -> AccessToken {
        let answer: JSONValue
        if let secret = provider.appSecret {
            // A POST form, not a query: the app secret and the token never travel in a URL.
            answer = try await FacebookHTTP.send(
                .post, "oauth/access_token",
                parameters: [
                    ("grant_type", "fb_exchange_token"), ("client_id", provider.appID), ("client_secret", secret.value),
                    ("fb_exchange_token", token.tokenString),
                ], token: nil, provider: provider, transport: transport)
        } else {
            answer = try await FacebookHTTP.send(
                .get, "oauth/access_token",
                parameters: [("grant_type", "fb_extend_sso_token"), ("client_id", provider.appID)],
                token: token.tokenString, provider: provider, transport: transport)
        }
        guard let string = answer["access_token"]?.stringValue, !string.isEmpty else {
            throw AuthError.unreadableGraphAnswer("token extension answer (it has no access_token)")
        }
        var extended = token
        extended.tokenString = string
        extended.refreshDate = now()
        FacebookTokenReader.applyingDates(of: answer, to: &extended, issued: extended.refreshDate)
        return extended
    }

    /// The renewal of a token about to expire: the extension call, at most once per retry
    /// interval while the token still works; `nil` (carry on with it) when Facebook declines to
    /// extend a token that has not expired.
    func refreshExpiring(_ current: AccessToken) async throws -> AccessToken? {
        let attempt = now()
        let recent: Bool = lifecycle.withLock { state in
            if let last = state.lastExtensionAttempt, attempt.timeIntervalSince(last) < retryInterval { return true }
            state.lastExtensionAttempt = attempt
            return false
        }
        if recent, !current.isExpired(at: attempt) { return nil }
        do {
            let extended = try await extend(current)
            lifecycle.withLock { $0.lastExtension = .extended(extended) }
            return extended
        } catch let error as AuthError where !error.closesSession && !current.isExpired(at: attempt) {
            lifecycle.withLock {
                $0.lastExtension = .notAvailable("Facebook did not refresh the expiring token: \(error.message)")
            }
            return nil
        }
    }
}

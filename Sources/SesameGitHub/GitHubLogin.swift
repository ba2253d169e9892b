import Foundation
import Sesame

/// The person a token acts for, from `GET /user`, with what the answer's headers said.
public struct GitHubUser: Sendable, Hashable {
    /// The login (`octocat`): what `git` and `gh` show, and what Sesame stores as the token's
    /// `userID`.
    public var login: String
    /// The numeric account id, which survives a rename.
    public var id: Int
    /// The display name, when the person set one.
    public var name: String?
    /// The scopes the token has (`X-OAuth-Scopes`); `nil` when GitHub sent no such header, as
    /// for fine-grained tokens and GitHub App user tokens, whose permissions are not scopes.
    public var scopes: [String]?
    /// When the token expires, from `github-authentication-token-expiration` (personal access
    /// tokens with an expiry date).
    public var tokenExpiration: Date?

    /// Creates a value.
    public init(login: String, id: Int, name: String? = nil, scopes: [String]? = nil, tokenExpiration: Date? = nil) {
        self.login = login
        self.id = id
        self.name = name
        self.scopes = scopes
        self.tokenExpiration = tokenExpiration
    }

    /// Reads `GET /user`'s answer.
    ///
    /// - Throws: `AuthError` when it has no login or id.
    public init(response: HTTPResponse) throws {
        let json = response.json
        guard let login = json?["login"]?.stringValue, !login.isEmpty, let id = json?["id"]?.lenientInt else {
            throw AuthError(
                category: .providerOther,
                message: "GitHub's answer to GET /user has no login and id, so the token cannot be tied to a person. "
                    + "Check that the host it was sent to is a GitHub server (github.com or GitHub Enterprise).",
                provider: .github)
        }
        self.init(
            login: login, id: id, name: json?["name"]?.stringValue,
            scopes: response.headers["X-OAuth-Scopes"].map(GitHubText.scopes),
            tokenExpiration: response.headers["github-authentication-token-expiration"].flatMap(Self.expirationDate))
    }

    /// Reads `2026-03-01 12:00:00 UTC` (or `+0000`), as GitHub writes token expiry dates.
    static func expirationDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd HH:mm:ss zzz", "yyyy-MM-dd HH:mm:ss Z"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text.trimmingCharacters(in: .whitespaces)) { return date }
        }
        return nil
    }
}

extension GitHubProvider {
    /// `GET /user` with `token`, classified: who the token is for, and its scopes.
    ///
    /// - Throws: the classified `AuthError` (401 "Bad credentials" for a refused token).
    public func user(token: String, transport: any HTTPTransport) async throws -> GitHubUser {
        var request = HTTPRequest(url: host.apiURL("user"), headers: GitHubClient.standardHeaders)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await LoginHTTP.send(request, through: transport, taxonomy: taxonomy)
        guard response.isSuccess else { throw taxonomy.classify(response) }
        return try GitHubUser(response: response)
    }

    /// **GitHub's hook on the engine** (``OAuth2Provider/checkToken``), after a device login,
    /// a refresh or a supplied token made `token`: `GET /user` says whose it is (the login becomes
    /// the user id), its scopes (`X-OAuth-Scopes` when GitHub sends it, else the answer's `scope`)
    /// and a personal token's expiry; a refreshed token must still be `previous`'s person's.
    ///
    /// - Throws: the classified `AuthError` of `GET /user`; `AuthError` (`authenticationReopenSession`)
    ///   when GitHub answers for another person.
    func identified(
        _ token: AccessToken, for request: LoginRequest, previous: AccessToken?, transport: any HTTPTransport
    ) async throws -> AccessToken {
        let user = try await user(token: token.tokenString, transport: transport)
        if let expected = previous?.userID, expected.lowercased() != user.login.lowercased() {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "GitHub answered for '\(user.login)', not '\(expected)' whose login this is; the token was "
                    + "not used. Log in again as '\(expected)'.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: .github)
        }
        let granted = user.scopes ?? token.permissions.granted.sorted()
        let implied = GitHubScopes.implied(by: Set(granted))
        var token = token
        token.userID = user.login
        token.expirationDate = token.expirationDate ?? user.tokenExpiration
        // Neither GitHub nor the answer naming a scope (a fine-grained token, a GitHub App's) declines none.
        let asked = granted.isEmpty && user.scopes == nil ? [] : request.permissions.map(\.name)
        token.permissions = PermissionSet(
            granted: granted, declined: asked.filter { !granted.contains($0) && !implied.contains($0) }.sorted())
        return token
    }
}

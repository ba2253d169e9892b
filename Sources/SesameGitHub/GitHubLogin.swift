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

    /// A token from a token answer (device flow or refresh), completed with `GET /user`.
    ///
    /// The granted scopes are `X-OAuth-Scopes` when GitHub sends it, else the answer's `scope`;
    /// `expires_in` and `refresh_token` are kept for expiring user tokens.
    func token(
        fromAnswer response: HTTPResponse, for request: LoginRequest, previous: AccessToken?,
        transport: any HTTPTransport
    ) async throws -> AccessToken {
        guard let answer = OAuthTokenResponse(json: response.json) else {
            throw AuthError.unreadableLoginAnswer("token answer (it has no access_token)", provider: .github)
        }
        let issued = now()
        let user = try await user(token: answer.accessToken, transport: transport)
        if let expected = previous?.userID, expected.lowercased() != user.login.lowercased() {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "GitHub answered for '\(user.login)', not '\(expected)' whose login this is; the token was "
                    + "not used. Log in again as '\(expected)'.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: .github)
        }
        let granted = user.scopes ?? answer.scope ?? previous?.permissions.granted.sorted() ?? []
        let asked = Set(request.permissions.map(\.name))
        let implied = GitHubScopes.implied(by: Set(granted))
        return AccessToken(
            tokenString: answer.accessToken, provider: .github, appID: credentialAppID, userID: user.login,
            permissions: PermissionSet(
                granted: granted, declined: asked.filter { !granted.contains($0) && !implied.contains($0) }.sorted()),
            expirationDate: answer.expiresIn.flatMap { $0 > 0 ? issued.addingTimeInterval(TimeInterval($0)) : nil },
            refreshDate: issued,
            refreshToken: answer.refreshToken ?? (answer.expiresIn == nil ? nil : previous?.refreshToken),
            refreshTokenExpirationDate: answer.refreshToken != nil
                ? answer.refreshTokenExpiresIn.flatMap { $0 > 0 ? issued.addingTimeInterval(TimeInterval($0)) : nil }
                : (answer.expiresIn == nil ? nil : previous?.refreshTokenExpirationDate))
    }

    // MARK: Refresh

    /// **The refresh hook**: trades `current`'s refresh token for a new token (expiring user
    /// tokens of GitHub Apps: `expires_in`, `refresh_token`, `refresh_token_expires_in`).
    ///
    /// `POST /login/oauth/access_token` with `grant_type=refresh_token`; GitHub answers HTTP
    /// 200 even for errors (`bad_refresh_token`), which are classified. Nothing is saved here:
    /// the core's refresh path saves the result.
    ///
    /// - Throws: `AuthError` (`authenticationReopenSession`) when there is no refresh token or
    ///   GitHub refuses it; the classified error otherwise.
    public func refresh(_ current: AccessToken, transport: any HTTPTransport) async throws -> AccessToken {
        guard let refreshToken = current.refreshToken else {
            throw AuthError(
                category: .authenticationReopenSession,
                message: "The GitHub token of '\(current.userID ?? "this login")' on \(host.hostname) expired and "
                    + "has no refresh token to renew it. Log in again.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: .github)
        }
        let response = try await LoginHTTP.send(
            formRequest(
                host.accessTokenURL, [("grant_type", "refresh_token"), ("refresh_token", refreshToken)],
                authentication: clientAuthentication), through: transport, taxonomy: taxonomy)
        if let error = OAuthErrorResponse(json: response.json) { throw taxonomy.classifyLoginError(error) }
        guard response.isSuccess else { throw taxonomy.classify(response) }
        let request = LoginRequest(
            provider: .github, appID: credentialAppID,
            permissions: current.permissions.granted.sorted().map { Permission.read($0) })
        return try await token(fromAnswer: response, for: request, previous: current, transport: transport)
    }
}

/// GitHub's device flow for `DeviceLoginFlow`, as GitHub documents it.
///
/// `POST /login/device/code` (client id, space-separated scopes), then `POST
/// /login/oauth/access_token` with the device-code grant, both with `Accept:
/// application/json`. GitHub answers the poll's errors **with HTTP 200**, and this dialect
/// reads `error` whatever the status: `authorization_pending` (poll again),
/// `slow_down` (poll at the answer's new `interval`, else five seconds slower),
/// `expired_token` (the code expired), `access_denied` (the person cancelled:
/// `userCancelled`), and `incorrect_device_code`, `incorrect_client_credentials`,
/// `device_flow_disabled`, `unsupported_grant_type` (classified from `GitHubErrors.json`,
/// with what to fix). The start request's own 200-with-`error` answers
/// (`device_flow_disabled`, `incorrect_client_credentials`) are classified the same way.
/// Once approved, `GET /user` gives the login and the scopes.
public struct GitHubDeviceDialect: DeviceLoginDialect {
    /// The host and app.
    public var github: GitHubProvider
    /// Used after approval for `GET /user`.
    public var transport: any HTTPTransport

    /// Creates a dialect.
    public init(github: GitHubProvider, transport: any HTTPTransport) {
        self.github = github
        self.transport = transport
    }

    public var provider: ProviderID { .github }
    public var errorTaxonomy: any ErrorTaxonomy { github.taxonomy }

    /// The grant type of a device-code poll.
    public static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    private func scopes(for request: LoginRequest) -> [String] {
        request.permissions.isEmpty ? github.defaultScopes : request.permissions.map(\.name)
    }

    public func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        let scopes = scopes(for: request)
        return try github.formRequest(
            github.host.deviceCodeURL, scopes.isEmpty ? [] : [("scope", scopes.joined(separator: " "))])
    }

    public func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        if let error = OAuthErrorResponse(json: response.json) { throw github.taxonomy.classifyLoginError(error) }
        return try RFC8628DeviceDialect.readAuthorization(
            response.json, deviceCodeField: "device_code", provider: .github)
    }

    public func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest {
        try github.formRequest(
            github.host.accessTokenURL,
            [("device_code", context.authorization.deviceCode), ("grant_type", Self.grantType)])
    }

    public func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer {
        let json = response.json
        if let error = OAuthErrorResponse(json: json) {
            switch error.error {
            case "authorization_pending": return .pending
            case "slow_down":
                let interval = json?["interval"]?.lenientInt.flatMap { $0 > 0 && $0 < 3600 ? $0 : nil }
                return .slowDown(interval: interval.map { .seconds($0) })
            case "expired_token": return .expired
            case "access_denied": return .denied(error)
            default: return .error(error)
            }
        }
        guard response.isSuccess, OAuthTokenResponse(json: json) != nil else { return .unrecognized }
        var request = context.request
        if request.permissions.isEmpty { request.permissions = scopes(for: request).map { Permission.read($0) } }
        return .authorized(
            try await github.token(fromAnswer: response, for: request, previous: nil, transport: transport))
    }
}

/// A login with a token the person already has (a personal access token, classic or
/// fine-grained, or a token from `gh auth token`), checked with `GET /user` before it is
/// stored: GitHub must accept it, and the answer gives the login and the scopes.
///
/// `readToken` should take the token from standard input or the environment, never from the
/// command line (argv is visible to every user in `ps`).
public struct GitHubTokenLogin: LoginUI {
    /// The host.
    public var github: GitHubProvider
    /// What sends the check.
    public var transport: any HTTPTransport
    /// Supplies the token.
    public var readToken: @Sendable () async throws -> String

    /// Creates a login.
    public init(
        github: GitHubProvider, transport: any HTTPTransport, readToken: @escaping @Sendable () async throws -> String
    ) {
        self.github = github
        self.transport = transport
        self.readToken = readToken
    }

    private func rejected(_ why: String, underlying: AuthError? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "The GitHub token you supplied was not accepted: \(why). Create a new token (GitHub → Settings → "
                + "Developer settings → Personal access tokens) and try again.",
            shouldNotifyUser: true, userMessage: "The GitHub token you supplied was not accepted: \(why).",
            httpStatus: underlying?.httpStatus, loginFailedReason: .invalidSuppliedToken,
            recoveryTactic: .showMessage, provider: .github, underlyingError: underlying)
    }

    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        let text = try await readToken().trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, !text.contains(where: { $0.isWhitespace }), text.count <= 1024,
            text.allSatisfy({ $0.isASCII })
        else { throw rejected("it is empty, too long, or has spaces or non-ASCII characters in it") }
        let user: GitHubUser
        do {
            user = try await github.user(token: text, transport: transport)
        } catch let error as AuthError
            where error.category != .retry && error.category != .server && error.category != .throttling
        {
            throw rejected(
                "GitHub \(github.host.isGitHubDotCom ? "" : "(\(github.host.hostname)) ")refused it "
                    + "(HTTP \(error.httpStatus.map(String.init) ?? "?"))", underlying: error)
        }
        let granted = user.scopes ?? []
        let implied = GitHubScopes.implied(by: Set(granted))
        let missing = request.permissions.map(\.name).filter { !granted.contains($0) && !implied.contains($0) }
        if user.scopes != nil, !missing.isEmpty {
            throw rejected("it lacks the scope\(missing.count == 1 ? "" : "s") \(missing.joined(separator: ", "))")
        }
        return AccessToken(
            tokenString: text, provider: .github, appID: github.credentialAppID, userID: user.login,
            permissions: PermissionSet(granted: granted), expirationDate: user.tokenExpiration,
            refreshDate: github.now())
    }
}

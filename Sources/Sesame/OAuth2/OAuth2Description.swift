import Foundation

/// A plain OAuth 2.0 provider, said as data: its endpoints, how its client authenticates, what it
/// adds to the authorization request, whether its refresh tokens rotate, how the person's identity
/// and the provider's errors are read, and its own error rows. The generic engine
/// (`OAuth2Provider`) does every login, renewal, revocation and identity check from it.
///
/// ```swift
/// let dropbox = OAuth2Description(
///     id: "dropbox", displayName: "Dropbox",
///     endpoints: OAuth2Endpoints(
///         authorization: URL(string: "https://www.dropbox.com/oauth2/authorize")!,
///         token: URL(string: "https://api.dropboxapi.com/oauth2/token")!,
///         revocation: URL(string: "https://api.dropboxapi.com/2/auth/token/revoke")!),
///     authorizationParameters: [("token_access_type", "offline")],
///     refreshTokensRotate: false,
///     errors: OAuth2ErrorFormat(codePath: ["error", ".tag"]), errorRows: DropboxErrors.table)
/// ```
public struct OAuth2Description: Sendable {
    /// The id logins are stored under and the command line names (`dropbox`).
    public var id: ProviderID
    /// A human name (`Dropbox`).
    public var displayName: String
    /// Where the person signs in and where tokens come from.
    public var endpoints: OAuth2Endpoints
    /// How the client authenticates at the token endpoint when it has a secret; without one it is
    /// always `none`.
    public var clientAuthenticationMethod: ClientAuthenticationMethod
    /// Whether the provider's client secret for a desktop app is public (Google's "Desktop app"
    /// clients): it may then be given in a configuration file or on the command line, as the
    /// client id may. A secret that is not public comes only from the environment or standard input.
    public var clientSecretIsPublic: Bool
    /// Added to every authorization URL, in order (`token_access_type=offline`, `prompt=consent`).
    public var authorizationParameters: [(String, String)]
    /// Whether a refresh answer replaces the refresh token. When it does not (or an answer carries
    /// none), the stored refresh token is kept.
    public var refreshTokensRotate: Bool
    /// Scopes asked for when a login names none.
    public var defaultScopes: [String]
    /// Scopes every login asks for first, whatever it names (OpenID Connect's `openid`).
    public var requiredScopes: [String] = []
    /// How scopes are joined: a space per RFC 6749 §3.3; some providers use a comma.
    public var scopeSeparator: String
    /// How the signed-in account is found.
    public var identity: OAuth2Identity
    /// Where the error code sits in an error answer.
    public var errors: OAuth2ErrorFormat
    /// The provider's own error rows, tried before the base rows every table extends; `nil` when
    /// the base rows are all it needs.
    public var errorRows: ErrorRuleTable?
    /// The member of a code grant's answer that holds the token fields (`access_token`,
    /// `refresh_token`, `expires_in`, `scope`), for a provider that nests them: Slack's person's
    /// token is under `authed_user`. Empty for the top level, where RFC 6749 §5.1 has them; a
    /// refresh answer is read at the top level.
    public var tokenAnswerPath: [String] = []
    /// The authorization request's parameter that carries the scopes: `scope` (RFC 6749 §3.3), or
    /// Slack's `user_scope` for a person's own token.
    public var scopeParameter: String = "scope"
    /// Whether revocation is a POST with the access token as the bearer token and no body, which
    /// ends its refresh token too (Dropbox's `/2/auth/token/revoke`), instead of RFC 7009's form.
    public var revokesWithBearer = false
    /// Whether device login sends the client id alone, as a public client, even when the client has
    /// a secret: GitHub's device flow takes none (a GitHub App's secret is for refreshing).
    public var deviceLoginIsPublic = false
    /// Classifies the provider's errors instead of ``errorRows`` on the base rows, for a provider
    /// whose answers say more than a code (GitHub's rate-limit and single sign-on headers); `nil`
    /// for the rows.
    public var classifier: (any ErrorTaxonomy)?
    /// Where to get a new token, said when a token the person supplied is refused; `nil` for a
    /// generic sentence.
    public var newTokenAdvice: String?
    /// Whether a refresh asks again for the scopes the login was granted (`scope`, RFC 6749 §6),
    /// as OpenID clients do; by default it names none, which RFC 6749 reads as the same scopes.
    public var refreshRepeatsScopes = false
    /// What a login redirect's `iss` must be (RFC 9207), for a provider with an issuer identifier;
    /// `nil` checks nothing.
    public var authorizationResponseIssuer: AuthorizationResponseIssuer?

    /// Creates a description; everything after `endpoints` has the plain RFC 6749 default.
    public init(
        id: ProviderID, displayName: String? = nil, endpoints: OAuth2Endpoints,
        clientAuthenticationMethod: ClientAuthenticationMethod = .clientSecretBasic,
        clientSecretIsPublic: Bool = false, authorizationParameters: [(String, String)] = [],
        refreshTokensRotate: Bool = true, defaultScopes: [String] = [], scopeSeparator: String = " ",
        identity: OAuth2Identity = .none, errors: OAuth2ErrorFormat = .rfc6749, errorRows: ErrorRuleTable? = nil
    ) {
        self.id = id
        self.displayName = displayName ?? id.rawValue
        self.endpoints = endpoints
        self.clientAuthenticationMethod = clientAuthenticationMethod
        self.clientSecretIsPublic = clientSecretIsPublic
        self.authorizationParameters = authorizationParameters
        self.refreshTokensRotate = refreshTokensRotate
        self.defaultScopes = defaultScopes
        self.scopeSeparator = scopeSeparator
        self.identity = identity
        self.errors = errors
        self.errorRows = errorRows
    }

    /// The login flows the endpoints allow: the browser (and pasting its redirect) with an
    /// authorization endpoint, device login with a device authorization endpoint.
    public var supportedLoginFlows: Set<LoginFlowKind> {
        var flows: Set<LoginFlowKind> = []
        if endpoints.authorization != nil { flows.insert(.browser) }
        if endpoints.deviceAuthorization != nil { flows.insert(.device) }
        return flows
    }

    /// The client authentication of a client with `secret`: `none` without one, else
    /// ``clientAuthenticationMethod`` with it.
    public func clientAuthentication(secret: ClientSecret?) -> ClientAuthentication {
        ClientAuthentication(clientAuthenticationMethod, secret: secret)
    }
}

/// The endpoints of an OAuth 2.0 provider. Only the token endpoint is required; a login flow,
/// revocation or the identity check is offered when its endpoint is there.
public struct OAuth2Endpoints: Sendable, Hashable {
    /// Where the person is sent to sign in (RFC 6749 §3.1); `nil` for a provider without browser
    /// login.
    public var authorization: URL?
    /// Where codes, refresh tokens and device codes are exchanged (RFC 6749 §3.2).
    public var token: URL
    /// RFC 8628 device authorization, when the provider has it.
    public var deviceAuthorization: URL?
    /// RFC 7009 revocation, when the provider has it.
    public var revocation: URL?
    /// Where the signed-in account is read with the access token (OpenID's userinfo, an API's
    /// `me`), when the identity comes from a request.
    public var identity: URL?

    /// Creates endpoints.
    public init(
        authorization: URL? = nil, token: URL, deviceAuthorization: URL? = nil, revocation: URL? = nil,
        identity: URL? = nil
    ) {
        self.authorization = authorization
        self.token = token
        self.deviceAuthorization = deviceAuthorization
        self.revocation = revocation
        self.identity = identity
    }

    /// The endpoints moved onto `base`: each keeps its path (after `base`'s own) and takes `base`'s
    /// scheme, host and port, for a provider people run at an address of their own (a GitLab
    /// host, a built-in emulator).
    public func rebased(onto base: URL) -> OAuth2Endpoints {
        func moved(_ url: URL) -> URL {
            var path = url.path
            if path.hasPrefix("/") { path.removeFirst() }
            return path.isEmpty ? base : base.appending(path: path)
        }
        var endpoints = self
        for (name, url) in named { endpoints.set(name, to: moved(url)) }
        return endpoints
    }

    /// Sets the endpoint called `name` in ``named`` to `url`.
    public mutating func set(_ name: String, to url: URL) {
        switch name {
        case "authorization endpoint": authorization = url
        case "token endpoint": token = url
        case "device authorization endpoint": deviceAuthorization = url
        case "revocation endpoint": revocation = url
        case "identity endpoint": identity = url
        default: break
        }
    }

    /// The endpoints with their names, for checks and doctor lines.
    public var named: [(name: String, url: URL)] {
        let all: [(String, URL?)] = [
            ("authorization endpoint", authorization), ("token endpoint", token),
            ("device authorization endpoint", deviceAuthorization), ("revocation endpoint", revocation),
            ("identity endpoint", identity),
        ]
        return all.compactMap { name, url in url.map { (name, $0) } }
    }
}

/// Where a provider says who signed in, and which JSON fields give the account's id, login name
/// and display name. A path is a list of member names (`["user", "id"]`); numbers are read as
/// their decimal text.
public struct OAuth2Identity: Sendable, Hashable {
    /// Where the fields are read.
    public enum Source: Sendable, Hashable {
        /// Nowhere: the provider says nothing about the account.
        case none
        /// The token answer itself (Dropbox's `account_id`, Slack's `authed_user.id`).
        case tokenAnswer
        /// A GET of ``OAuth2Endpoints/identity`` with the access token as a bearer token.
        case identityRequest
    }

    /// Where the fields are read.
    public var source: Source
    /// The account's stable id.
    public var id: [String]
    /// The account's login or e-mail, when there is one.
    public var login: [String]?
    /// The person's display name, when there is one.
    public var name: [String]?
    /// How the identity request is sent: GET with the bearer token, or POST with no body
    /// (Dropbox's `/2/users/get_current_account`).
    public var method: HTTPMethod = .get

    /// Creates an identity reading.
    public init(source: Source, id: [String], login: [String]? = nil, name: [String]? = nil) {
        self.source = source
        self.id = id
        self.login = login
        self.name = name
    }

    /// The provider says nothing about the account.
    public static let none = OAuth2Identity(source: .none, id: [])

    /// The account is read from fields of the token answer.
    public static func tokenAnswer(id: [String], login: [String]? = nil, name: [String]? = nil) -> OAuth2Identity {
        OAuth2Identity(source: .tokenAnswer, id: id, login: login, name: name)
    }

    /// The account is read by a request to the identity endpoint (OpenID's userinfo: `sub`,
    /// `preferred_username`, `name`).
    public static func identityRequest(
        id: [String] = ["sub"], login: [String]? = ["preferred_username"], name: [String]? = ["name"]
    ) -> OAuth2Identity {
        OAuth2Identity(source: .identityRequest, id: id, login: login, name: name)
    }
}

/// Where a provider's error answers carry their code: RFC 6749's top-level `error`, a nested
/// member (Dropbox's `{"error": {".tag": "expired_access_token"}}`), or a flag on a successful
/// status (Slack's `{"ok": false, "error": "invalid_auth"}` on HTTP 200).
public struct OAuth2ErrorFormat: Sendable, Hashable {
    /// Where the code is, tried in order; the first string found is the code.
    public var codePaths: [[String]]
    /// Where a human-readable description is, tried in order.
    public var descriptionPaths: [[String]]
    /// A member that, when `false` in a 2xx answer, makes the answer a failure (Slack's `ok`);
    /// `nil` when only the HTTP status says.
    public var successFlag: [String]?

    /// Creates a format.
    public init(
        codePaths: [[String]], descriptionPaths: [[String]] = [["error_description"]], successFlag: [String]? = nil
    ) {
        self.codePaths = codePaths
        self.descriptionPaths = descriptionPaths
        self.successFlag = successFlag
    }

    /// A format whose code sits at `codePath`, RFC 6749's `error` tried after it.
    public init(codePath: [String], successFlag: [String]? = nil) {
        self.init(codePaths: [codePath, ["error"]], successFlag: successFlag)
    }

    /// RFC 6749 §5.2: `{"error": "invalid_grant", "error_description": "…"}`.
    public static let rfc6749 = OAuth2ErrorFormat(codePaths: [["error"]])

    /// The error code in `json`, when it has one at a path.
    public func code(in json: JSONValue?) -> String? { Self.firstString(in: json, at: codePaths) }

    /// The error description in `json`, when it has one at a path.
    public func errorDescription(in json: JSONValue?) -> String? { Self.firstString(in: json, at: descriptionPaths) }

    /// Whether a 2xx answer with `json` is a failure by ``successFlag``.
    public func isFailure(_ json: JSONValue?) -> Bool {
        guard let successFlag else { return false }
        return json?[path: successFlag]?.boolValue == false
    }

    private static func firstString(in json: JSONValue?, at paths: [[String]]) -> String? {
        for path in paths {
            if let text = json?[path: path]?.stringValue, !text.isEmpty { return text }
        }
        return nil
    }
}

extension JSONValue {
    /// The value at `path`, a list of object member names; `nil` when one is missing.
    public subscript(path path: [String]) -> JSONValue? {
        var value: JSONValue? = self
        for name in path { value = value?[name] }
        return value
    }

    /// The value as text for an identity field: a string, or a whole number's decimal text.
    package var identityText: String? {
        if let text = stringValue { return text }
        return lenientInt.map(String.init)
    }
}

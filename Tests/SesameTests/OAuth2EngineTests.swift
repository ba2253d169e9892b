import Foundation
import Sesame
import SesameTesting
import Testing

/// The generic OAuth 2.0 provider driven by a description (issue 49, items 1 and 2).
@Suite("OAuth 2.0 engine from a description")
struct OAuth2EngineTests {
    static let dropboxLike = OAuth2Description(
        id: "box", displayName: "Box",
        endpoints: OAuth2Endpoints(
            authorization: URL(string: "https://box.example/oauth2/authorize")!,
            token: URL(string: "https://api.box.example/oauth2/token")!,
            revocation: URL(string: "https://api.box.example/2/auth/token/revoke")!),
        clientAuthenticationMethod: .clientSecretPost, authorizationParameters: [("token_access_type", "offline")],
        refreshTokensRotate: false, identity: .tokenAnswer(id: ["account_id"]),
        errors: OAuth2ErrorFormat(codePath: ["error", ".tag"]))

    static func json(_ text: String, status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Data(text.utf8))
    }

    static let stored = AccessToken(
        tokenString: "old-access", provider: "box", appID: "app", userID: "dbid:1",
        expirationDate: Date(timeIntervalSinceNow: -10), refreshDate: Date(timeIntervalSinceNow: -3600),
        refreshToken: "long-lived-refresh")

    @Test("a refresh answer without a refresh token keeps the stored one, sent with the client's authentication")
    func nonRotatingRefresh() async throws {
        let transport = RecordingTransport(
            always: Self.json(#"{"access_token": "new-access", "expires_in": 14400, "token_type": "bearer"}"#))
        let provider = try OAuth2Provider(
            Self.dropboxLike, clientID: "app", clientSecret: ClientSecret("s"), transport: transport)
        let renewed = try await provider.refresh(Self.stored)
        #expect(renewed.tokenString == "new-access")
        #expect(renewed.refreshToken == "long-lived-refresh")
        #expect(renewed.userID == "dbid:1")
        let form = FormEncoding.decode(transport.requests[0].body ?? Data())
        #expect(form.map(\.0) == ["grant_type", "refresh_token", "client_id", "client_secret"])
    }

    @Test("the core renews an expired login once through the engine's renewer and saves it")
    func renewalThroughTheSession() async throws {
        let transport = RecordingTransport(always: Self.json(#"{"access_token": "new-access", "expires_in": 3600}"#))
        let provider = try OAuth2Provider(Self.dropboxLike, clientID: "app", transport: transport)
        let store = InMemoryCredentialStore([
            StoredCredential(key: CredentialKey(provider: "box", appID: "app", account: "default"), token: Self.stored)
        ])
        let session = OAuth2Session(provider: provider, store: store)
        #expect(try await session.open(allowLoginUI: false) == .openTokenExtended)
        async let first = session.validToken()
        async let second = session.validToken()
        let tokens = try await [first, second]
        #expect(tokens.map(\.tokenString) == ["new-access", "new-access"])
        #expect(transport.requests.count == 1, "one renewal for both callers")
        let saved = try await store.load(CredentialKey(provider: "box", appID: "app", account: "default"))
        #expect(saved?.token.refreshToken == "long-lived-refresh")
    }

    @Test("an error whose code sits in a nested member is classified by the provider's path, 429 with Retry-After")
    func nestedErrorCode() async throws {
        let taxonomy = OAuth2ErrorTaxonomy(Self.dropboxLike)
        let expired = taxonomy.classify(
            Self.json(#"{"error": {".tag": "invalid_grant"}, "error_summary": "x"}"#, status: 400))
        #expect(expired.ruleID == "invalid-grant")
        #expect(expired.category == .authenticationReopenSession)
        let throttled = taxonomy.classify(Self.json("{}", status: 429, headers: ["Retry-After": "7"]))
        #expect(throttled.ruleID == "too-many-requests")
        #expect(throttled.retryAfter == .seconds(7))
        let page = taxonomy.classify(Self.json("<html>oops</html>", status: 502))
        #expect(page.category == .server)
    }

    @Test("a provider's rows come first and the base rows follow, each traced to its table")
    func inheritance() throws {
        let own = ErrorRule(
            id: "invalid-grant", match: ErrorRuleMatch(error: ["invalid_grant"]),
            category: .authenticationReopenSession, recoveryTactic: .reauthenticate, shouldNotifyUser: false,
            closesSession: false, userMessage: "Box says no.", meaning: "m", source: "s")
        var described = Self.dropboxLike
        described.errorRows = ErrorRuleTable(name: "BoxErrors", rules: [own], extending: .base)
        let taxonomy = OAuth2ErrorTaxonomy(described)
        #expect(taxonomy.classify(Self.json(#"{"error": "invalid_grant"}"#, status: 400)).userMessage == "Box says no.")
        #expect(described.errorRows?.origin(ofRule: "invalid-grant")?.table == "BoxErrors")
        #expect(described.errorRows?.origin(ofRule: "invalid-grant")?.row == 1)
        #expect(described.errorRows?.origin(ofRule: "conflict")?.table == "BaseErrors")
        #expect(taxonomy.classify(Self.json("{}", status: 409)).ruleID == "conflict")
        #expect(taxonomy.classify(Self.json("{}", status: 404)).ruleID == "not-found")
    }

    @Test("a base row a table leaves out is not tried: its errors fall to the next row, still traced to the base")
    func leavingOutBaseRows() throws {
        let table = ErrorRuleTable(name: "NoErrors", rules: [], extending: .base, leavingOut: ["not-found"])
        let taxonomy = OAuth2ErrorTaxonomy(provider: "box", displayName: "Box", table: table)
        #expect(table.rule(id: "not-found") == nil)
        #expect(table.rules.count == ErrorRuleTable.base.rules.count - 1)
        #expect(taxonomy.classify(Self.json("{}", status: 404)).ruleID == "bad-request")
        #expect(taxonomy.classify(Self.json("{}", status: 409)).ruleID == "conflict")
        let origin = try #require(table.origin(ofRule: "bad-request"))
        #expect(origin.table == "BaseErrors")
        let baseIndex = try #require(ErrorRuleTable.base.rules.firstIndex { $0.id == "bad-request" })
        #expect(origin.row == baseIndex + 1)
    }

    @Test("Slack's ok: false on HTTP 200 is an error, not a token")
    func successFlagFailure() async throws {
        var slack = Self.dropboxLike
        slack.errors = OAuth2ErrorFormat(codePath: ["error"], successFlag: ["ok"])
        let transport = RecordingTransport(always: Self.json(#"{"ok": false, "error": "invalid_refresh_token"}"#))
        let provider = try OAuth2Provider(slack, clientID: "app", transport: transport)
        let error = await #expect(throws: AuthError.self) { try await provider.refresh(Self.stored) }
        #expect(error?.httpStatus == 200)
    }

    @Test("the browser login sends the description's parameters and reads the account from the token answer")
    func browserDialect() async throws {
        let transport = RecordingTransport(
            always: Self.json(#"{"access_token": "a", "refresh_token": "r", "account_id": "dbid:42"}"#))
        let provider = try OAuth2Provider(Self.dropboxLike, clientID: "app", transport: transport)
        let dialect = try #require(provider.browserDialect)
        #expect(provider.deviceDialect == nil)
        let request = LoginRequest(provider: "box", appID: "app", permissions: [.read("files.read")])
        let url = try dialect.authorizationURL(
            for: request, redirectURI: URL(string: "http://127.0.0.1:9/cb")!, state: "s", pkce: try PKCE.generate())
        #expect(url.absoluteString.contains("token_access_type=offline"))
        let token = try await dialect.token(from: transport.send(HTTPRequest(url: url)), for: request)
        #expect(token.userID == "dbid:42")
    }

    @Test("revocation sends the refresh token and then the access token, authenticated")
    func revocation() async throws {
        let transport = RecordingTransport(always: Self.json("{}"))
        let provider = try OAuth2Provider(
            Self.dropboxLike, clientID: "app", clientSecret: ClientSecret("s"), transport: transport)
        #expect(try await provider.revoke(Self.stored))
        let tokens = transport.requests.map { FormEncoding.decode($0.body ?? Data()).first { $0.0 == "token" }?.1 }
        #expect(tokens == ["long-lived-refresh", "old-access"])
    }

    @Test(
        "a provider's hooks: required scopes first, the nonce, scopes repeated on refresh, the token check on each grant"
    )
    func providerHooks() async throws {
        var described = Self.dropboxLike
        (described.requiredScopes, described.defaultScopes, described.refreshRepeatsScopes) = (
            ["openid"], ["email"], true
        )
        let transport = RecordingTransport(always: Self.json(#"{"access_token": "a", "refresh_token": "r2"}"#))
        var provider = try OAuth2Provider(described, clientID: "app", transport: transport)
        provider.checkToken = { issued in
            var token = issued.token
            token.userID = "\(issued.nonce ?? "-")/\(issued.renewing?.tokenString ?? "-")"
            return token
        }
        let dialect = try #require(provider.browserDialect(nonce: "n-1"))
        let request = LoginRequest(provider: "box", appID: "app")
        let url = try dialect.authorizationURL(
            for: request, redirectURI: URL(string: "http://127.0.0.1:9/cb")!, state: "s", pkce: try PKCE.generate())
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.first { $0.name == "scope" }?.value == "openid email")
        #expect(items.first { $0.name == "nonce" }?.value == "n-1")
        let token = try await dialect.token(from: transport.send(HTTPRequest(url: url)), for: request)
        #expect(token.userID == "n-1/-")
        var stored = Self.stored
        stored.permissions = PermissionSet(granted: ["b", "a"], declined: [])
        #expect(try await provider.refresh(stored).userID == "-/old-access")
        let form = FormEncoding.decode(transport.requests.last?.body ?? Data())
        #expect(form.first { $0.0 == "scope" }?.1 == "a b")
    }

    @Test("a refresh answer the token check refuses keeps only its rotated refresh token")
    func refusedAnswerKeepsRotation() async throws {
        let transport = RecordingTransport(always: Self.json(#"{"access_token": "new", "refresh_token": "rotated"}"#))
        var provider = try OAuth2Provider(Self.dropboxLike, clientID: "app", transport: transport)
        provider.checkToken = { _ in throw AuthError(category: .invalid, message: "bad", provider: "box") }
        let failure = try await #require(throws: RenewalKeepingRotation.self) {
            try await provider.refresh(Self.stored)
        }
        #expect(failure.kept.refreshToken == "rotated")
        #expect(failure.kept.tokenString == "old-access")
    }

    @Test("an access token refused as invalid_token once its refresh token is revoked counts as revoked (Google)")
    func accessTokenEndedWithItsGrant() async throws {
        let transport = RecordingTransport { request, _ in
            FormEncoding.decode(request.body ?? Data()).contains { $0 == ("token_type_hint", "access_token") }
                ? Self.json(#"{"error": "invalid_token"}"#, status: 400) : Self.json("{}")
        }
        let provider = try OAuth2Provider(Self.dropboxLike, clientID: "app", transport: transport)
        #expect(try await provider.revoke(Self.stored))
        var accessOnly = Self.stored
        accessOnly.refreshToken = nil
        await #expect(throws: AuthError.self) { try await provider.revoke(accessOnly) }
    }

    @Test("an endpoint over plain http to another host is refused")
    func endpointSecurity() {
        var described = Self.dropboxLike
        described.endpoints.token = URL(string: "http://api.box.example/token")!
        #expect(throws: AuthError.self) {
            try OAuth2Provider(described, clientID: "app", transport: RecordingTransport(always: Self.json("{}")))
        }
    }
}

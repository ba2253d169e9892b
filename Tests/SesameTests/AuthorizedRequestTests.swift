import Foundation
import Sesame
import SesameTesting
import Testing

private let example: ProviderID = "example"

/// A provider's table in brief: a 401 refuses the token; anything else is a server error.
private struct ExampleTaxonomy: ErrorTaxonomy {
    var provider: ProviderID { example }

    func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        if status == 401 {
            return AuthError(
                category: .authenticationReopenSession,
                message: "The token was refused: \(String(decoding: body, as: UTF8.self))", httpStatus: status,
                closesSession: false, provider: example)
        }
        return AuthError(category: .server, message: "HTTP \(status)", httpStatus: status, provider: example)
    }
}

/// A token string long enough to be redacted wherever it appears.
private func secret(_ number: Int) -> String { "at-\(number)-5f0c2b9e7d" }

private func token(_ secret: String, refreshToken: String? = "rt-1", scopes: [String] = ["read"]) -> AccessToken {
    AccessToken(
        tokenString: secret, provider: example, appID: "app", userID: "alice",
        permissions: PermissionSet(granted: scopes), expirationDate: Date().addingTimeInterval(3600),
        refreshToken: refreshToken)
}

/// An open session on an in-memory store whose renewer hands out `at-2`, `at-3`, … and counts.
private struct Fixture {
    let store = InMemoryCredentialStore()
    let renewals = Locked(0)
    let session: Session

    init(first: AccessToken = token(secret(1))) async throws {
        let renewals = self.renewals
        session = Session(
            provider: example, appID: "app", store: store,
            renewer: .refreshToken { current in
                let count = renewals.withLock {
                    $0 += 1
                    return $0
                }
                var renewed = current
                renewed.tokenString = secret(count + 1)
                renewed.refreshToken = "rt-\(count + 1)"
                return renewed
            })
        try await store.save(StoredCredential(key: session.key, token: first))
        try await session.open(allowLoginUI: false)
    }

    var renewalCount: Int { renewals.withLock { $0 } }
    func stored() async throws -> StoredCredential? { try await store.load(session.key) }
}

private let resource = HTTPRequest(url: URL(string: "https://api.example.com/v1/calendar")!)
private let ok = HTTPResponse(status: 200, body: Data(#"{"ok":true}"#.utf8))

private func refusal(echoing token: String = "") -> HTTPResponse {
    HTTPResponse(
        status: 401, headers: ["WWW-Authenticate": #"Bearer realm="api", error="invalid_token""#],
        body: Data("bad token \(token)".utf8))
}

private func sentTokens(_ transport: RecordingTransport) -> [String?] {
    transport.requests.map { $0.headers["Authorization"] }
}

@Suite("WWW-Authenticate challenges (RFC 9110 §11.6.1)")
struct AuthenticationChallengeTests {
    @Test(
        "a header's challenges are read with their parameters, quoted or not",
        arguments: [
            (
                #"Bearer realm="example", error="insufficient_scope", scope="read write""#,
                ["Bearer"], ["error": "insufficient_scope", "scope": "read write", "realm": "example"]
            ),
            (
                #"Basic realm="api", charset="UTF-8", Bearer error="invalid_token", error_description="The \"x\" token, expired""#,
                ["Basic", "Bearer"], ["error": "invalid_token", "error_description": #"The "x" token, expired"#]
            ),
            (
                #"Negotiate abc+/==, bearer ERROR=insufficient_user_authentication , acr_values="urn:a urn:b",max_age=300"#,
                ["Negotiate", "bearer"],
                ["error": "insufficient_user_authentication", "acr_values": "urn:a urn:b", "max_age": "300"]
            ),
            (#"Bearer, Basic realm="x""#, ["Bearer", "Basic"], [:]),
            (#"=== garbage, Bearer error="x" junk, scope=s"#, ["Bearer"], ["error": "x", "scope": "s"]),
        ] as [(String, [String], [String: String])])
    func parses(header: String, schemes: [String], bearer: [String: String]) {
        let challenges = AuthenticationChallenge.parse(header)
        #expect(challenges.map(\.scheme) == schemes)
        let found = challenges.first { $0.isScheme("Bearer") }
        for (name, value) in bearer { #expect(found?[name] == value, "\(name) of \(header)") }
    }

    @Test("a token68 is kept apart from parameters, and every header field is read")
    func token68AndFields() {
        var headers = HTTPHeaders()
        headers.add(name: "WWW-Authenticate", value: "Negotiate YII=")
        headers.add(name: "www-authenticate", value: #"Bearer scope="a b""#)
        let challenges = AuthenticationChallenge.parse(headers)
        #expect(challenges.map(\.token68) == ["YII=", nil])
        #expect(challenges.last?["SCOPE"] == "a b")
    }

    @Test("insufficient_scope and insufficient_user_authentication become what a step-up needs")
    func requirement() throws {
        let scope = try #require(
            StepUpRequirement(
                HTTPResponse(
                    status: 403,
                    headers: [
                        "WWW-Authenticate":
                            #"Basic realm="x", Bearer error="insufficient_scope", scope="calendar contacts""#
                    ]
                )))
        #expect(scope.scopes == ["calendar", "contacts"])
        #expect(scope.authorizationParameters.isEmpty)
        let user = try #require(
            StepUpRequirement(
                HTTPResponse(
                    status: 401,
                    headers: [
                        "WWW-Authenticate":
                            #"Bearer error="insufficient_user_authentication", acr_values="urn:mfa", max_age="60""#
                    ])))
        #expect(user.authorizationParameters == ["acr_values": "urn:mfa", "max_age": "60"])
        #expect(StepUpRequirement(refusal()) == nil)
        let error = AuthError.stepUpNeeded(scope, httpStatus: 403, provider: example)
        #expect(error.category == .permissions)
        #expect(error.recoveryTactic == .requestPermissions)
        #expect(error.message.contains("calendar, contacts"))
        #expect(error.details(as: StepUpRequirement.self) == scope)
    }
}

@Suite("Authorized requests: 401 → renew once → retry once; step-up once")
struct AuthorizedRequestTests {
    @Test("a refused token is renewed once and the request sent once more, with the new token")
    func renewsOnce() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport { _, index in index == 0 ? refusal() : ok }
        let response = try await fixture.session.send(resource, through: transport, taxonomy: ExampleTaxonomy())
        #expect(response.status == 200)
        #expect(fixture.renewalCount == 1)
        #expect(sentTokens(transport) == ["Bearer \(secret(1))", "Bearer \(secret(2))"])
        #expect(try await fixture.stored()?.token.tokenString == secret(2))
    }

    @Test("a token refused twice: no loop, the refusal thrown, the login kept and marked as needing a login")
    func refusedTwice() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport { request, _ in
            refusal(echoing: request.headers["Authorization"] ?? "")
        }
        let error = try await #require(throws: AuthError.self) {
            try await fixture.session.send(resource, through: transport, taxonomy: ExampleTaxonomy())
        }
        #expect(error.category == .authenticationReopenSession)
        #expect(error.message.contains("refused too") && error.message.contains("needs a new login"))
        #expect(!error.message.contains(secret(2)), "the token echoed back is redacted")
        #expect(transport.requests.count == 2)
        #expect(fixture.renewalCount == 1)
        let stored = try #require(try await fixture.stored())
        #expect(stored.needsLogin)
        #expect(stored.token.tokenString == secret(2))
        #expect(fixture.session.condition(of: stored) == .needsLogin(.refused))
        #expect(await fixture.session.state == .closed)
    }

    @Test("a refused token that cannot be renewed is sent once, recorded as refused, and the refusal thrown")
    func cannotRenew() async throws {
        let fixture = try await Fixture(first: token(secret(1), refreshToken: nil))
        let transport = RecordingTransport(always: refusal())
        let error = try await #require(throws: AuthError.self) {
            try await fixture.session.send(resource, through: transport, taxonomy: ExampleTaxonomy())
        }
        #expect(error.httpStatus == 401)
        #expect(error.message.contains("cannot be renewed"))
        #expect(transport.requests.count == 1)
        #expect(fixture.renewalCount == 0)
        let stored = try #require(try await fixture.stored())
        #expect(fixture.session.condition(of: stored) == .needsLogin(.expired))
    }

    @Test("an app's own request keeps its method, headers and body; other failures come back as answers")
    func ownRequest() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport(always: HTTPResponse(status: 404))
        var request = HTTPRequest(
            method: .post, url: URL(string: "https://api.example.com/v1/events")!,
            headers: ["Content-Type": "application/json"], body: Data("{}".utf8))
        request.headers["Authorization"] = "Bearer stale"
        let response = try await fixture.session.send(request, through: transport, taxonomy: ExampleTaxonomy())
        #expect(response.status == 404)
        let sent = try #require(transport.requests.first)
        #expect(sent.method == .post && sent.body == Data("{}".utf8))
        #expect(sent.headers.values(for: "Authorization") == ["Bearer \(secret(1))"])
        #expect(sent.headers["Content-Type"] == "application/json")
        #expect(transport.requests.count == 1)
    }

    @Test("insufficient_scope without login UI: a permissions error naming the scopes, nothing else sent")
    func stepUpWithoutUI() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport(always: insufficientScope)
        let login = RecordingLoginUI(grantingToken: "at-stepped")
        let error = try await #require(throws: AuthError.self) {
            try await fixture.session.send(
                resource, through: transport, taxonomy: ExampleTaxonomy(), allowLoginUI: false, loginUI: login)
        }
        #expect(error.category == .permissions)
        #expect(error.message.contains("calendar"))
        #expect(error.details(as: StepUpRequirement.self)?.scopes == ["calendar"])
        #expect(transport.requests.count == 1)
        #expect(login.callCount == 0)
        #expect(fixture.renewalCount == 0)
    }

    @Test("insufficient_scope with login UI: one re-authorization for the union of scopes, saved, one replay")
    func stepUp() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport { _, index in index == 0 ? insufficientScope : ok }
        let login = RecordingLoginUI(grantingToken: "at-stepped")
        let response = try await fixture.session.send(
            resource, through: transport, taxonomy: ExampleTaxonomy(), allowLoginUI: true, loginUI: login)
        #expect(response.status == 200)
        #expect(login.callCount == 1)
        #expect(login.requests.first?.permissions.map(\.name) == ["calendar", "read"])
        #expect(login.requests.first?.isRerequest == true)
        #expect(sentTokens(transport) == ["Bearer \(secret(1))", "Bearer at-stepped"])
        #expect(try await fixture.stored()?.token.permissions.granted == ["calendar", "read"])
    }

    @Test("a resource that still wants more after the step-up: one login, two sends, the error thrown")
    func stepUpNeverLoops() async throws {
        let fixture = try await Fixture()
        let transport = RecordingTransport { _, _ in stepUpAnswer }
        let login = RecordingLoginUI(grantingToken: "at-stepped")
        let error = try await #require(throws: AuthError.self) {
            try await fixture.session.send(
                resource, through: transport, taxonomy: ExampleTaxonomy(), allowLoginUI: true, loginUI: login)
        }
        #expect(error.category == .permissions)
        #expect(login.callCount == 1)
        #expect(transport.requests.count == 2)
        // insufficient_user_authentication's acr_values and max_age are authorization parameters.
        #expect(
            login.requests.first?.options.authorizationParameters == ["acr_values": "urn:mfa", "max_age": "0"])
    }
}

private let insufficientScope = HTTPResponse(
    status: 403, headers: ["WWW-Authenticate": #"Bearer realm="api", error="insufficient_scope", scope="calendar""#])

private let stepUpAnswer = HTTPResponse(
    status: 401,
    headers: [
        "WWW-Authenticate": #"Bearer error="insufficient_user_authentication", acr_values="urn:mfa", max_age=0"#
    ])

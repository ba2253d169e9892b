import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import SesameTesting
import Testing

/// A tiny OAuth 2.0 authorization server: `/authorize` answers at once with a redirect (as if
/// the person had clicked), `/token` checks the code, the redirect URI and the PKCE verifier.
final class TinyAuthorizationServer: Sendable {
    enum Behaviour: Sendable {
        case approve
        case deny
        case forgeState
        case rejectExchange
    }

    struct Grant: Sendable {
        var challenge: String
        var redirectURI: String
        var scope: String
    }

    final class Records: Sendable {
        let grants = Locked<[String: Grant]>([:])
        let log = Locked<[String]>([])
    }

    let server: HTTPServer
    private let records = Records()

    init(_ behaviour: Behaviour) throws {
        let records = records
        server = HTTPServer { request in
            records.log.withLock { $0.append("\(request.method) \(request.path)") }
            return Self.handle(request, behaviour: behaviour, grants: records.grants)
        }
        try server.start()
    }

    var authorizeURL: URL { server.url("/authorize") }
    var tokenURL: URL { server.url("/token") }
    var requests: [String] { records.log.withLock { $0 } }

    static func handle(
        _ request: HTTPServerRequest, behaviour: Behaviour, grants: Locked<[String: Grant]>
    )
        -> HTTPServerResponse
    {
        switch request.path {
        case "/authorize":
            guard let redirect = request.queryValue("redirect_uri"), let redirectURI = URL(string: redirect),
                let state = request.queryValue("state"), let challenge = request.queryValue("code_challenge"),
                request.queryValue("code_challenge_method") == "S256", request.queryValue("client_id") == "app-1",
                request.queryValue("response_type") == "code"
            else { return .text("bad authorization request", status: 400) }
            switch behaviour {
            case .deny:
                return .redirect(
                    to: OAuth.appendingQuery(
                        [("error", "access_denied"), ("error_reason", "user_denied"), ("state", state)], to: redirectURI
                    ))
            case .forgeState:
                return .redirect(
                    to: OAuth.appendingQuery([("code", "stolen"), ("state", "not-yours")], to: redirectURI))
            case .approve, .rejectExchange:
                let code = UUID().uuidString
                grants.withLock {
                    $0[code] = Grant(
                        challenge: challenge, redirectURI: redirect, scope: request.queryValue("scope") ?? "")
                }
                return .redirect(to: OAuth.appendingQuery([("code", code), ("state", state)], to: redirectURI))
            }
        case "/token":
            guard request.method == .post, request.formValue("grant_type") == "authorization_code",
                let code = request.formValue("code"), let verifier = request.formValue("code_verifier"),
                let grant = grants.withLock({ $0.removeValue(forKey: code) }),
                behaviour != .rejectExchange,
                PKCE.challenge(for: verifier) == grant.challenge,
                request.formValue("redirect_uri") == grant.redirectURI
            else {
                return .json(
                    .object([
                        "error": .string("invalid_grant"),
                        "error_description": .string("The code, verifier or redirect URI is wrong."),
                    ]), status: 400)
            }
            return .json(
                .object([
                    "access_token": .string("token-for-\(code.prefix(8))"), "token_type": .string("bearer"),
                    "expires_in": .number(3600), "scope": .string(grant.scope),
                ]))
        default:
            return .text("not found", status: 404)
        }
    }
}

@Suite("Browser login flow, end to end over loopback", .timeLimit(.minutes(2)))
struct BrowserLoginFlowTests {
    static func flow(_ authorization: TinyAuthorizationServer, browser: FollowingBrowser) -> BrowserLoginFlow {
        BrowserLoginFlow(
            dialect: OAuth2BrowserDialect(
                provider: "example", errorTaxonomy: PlainTaxonomy(), authorizationEndpoint: authorization.authorizeURL,
                tokenEndpoint: authorization.tokenURL, clientID: "app-1"),
            receiver: LoopbackRedirectReceiver(appName: "Example"),
            opener: browser,
            transport: LoopbackTransport())
    }

    @Test("a session opens through the browser: PKCE, state, redirect, code exchange, token stored")
    func success() async throws {
        let authorization = try TinyAuthorizationServer(.approve)
        let browser = FollowingBrowser()
        let store = InMemoryCredentialStore()
        let session = Session(provider: "example", appID: "app-1", store: store)
        let state = try await session.open(
            permissions: [.read("email"), .read("public_profile")], allowLoginUI: true,
            loginUI: Self.flow(authorization, browser: browser))
        #expect(state == .open)
        let token = try #require(await session.token)
        #expect(token.tokenString.hasPrefix("token-for-"))
        #expect(token.permissions.granted == ["email", "public_profile"])
        #expect(token.expirationDate != nil)
        #expect(try await store.load(session.key)?.token == token)

        let opened = try #require(browser.opened.first)
        let query = FormEncoding.decode(opened.query ?? "")
        #expect(query.first { $0.0 == "code_challenge_method" }?.1 == "S256")
        #expect(query.first { $0.0 == "scope" }?.1 == "email public_profile")
        #expect(query.first { $0.0 == "redirect_uri" }?.1.hasPrefix("http://127.0.0.1:") == true)
        let visits = try await browser.lastVisits()
        #expect(visits.map(\.status) == [302, 200])
        #expect(visits.last?.body.contains("You are signed in to Example") == true)
        #expect(authorization.requests == ["GET /authorize", "POST /token"])
        await authorization.server.stop()
    }

    @Test("the person declining is userCancelled and the session records the failed login")
    func denied() async throws {
        let authorization = try TinyAuthorizationServer(.deny)
        let browser = FollowingBrowser()
        let session = Session(provider: "example", appID: "app-1", store: InMemoryCredentialStore())
        let error = await #expect(throws: AuthError.self) {
            try await session.open(allowLoginUI: true, loginUI: Self.flow(authorization, browser: browser))
        }
        #expect(error?.category == .userCancelled)
        #expect(error?.loginFailedReason == .userDenied)
        #expect(await session.state == .closedLoginFailed)
        #expect(try await browser.lastVisits().last?.body.contains("Sign-in cancelled") == true)
        #expect(authorization.requests == ["GET /authorize"])
        await authorization.server.stop()
    }

    @Test("a redirect with someone else's state is refused, no code is exchanged, and the login waits on")
    func forgedState() async throws {
        let authorization = try TinyAuthorizationServer(.forgeState)
        let browser = FollowingBrowser()
        var flow = Self.flow(authorization, browser: browser)
        // The forged redirect does not end the login: only the timeout does, on a clock the test moves.
        let clock = ManualClock()
        flow.receiver = LoopbackRedirectReceiver(timeout: .seconds(300), clock: clock, appName: "Example")
        let login = Task { try await flow.logIn(LoginRequest(provider: "example", appID: "app-1")) }
        await clock.waitForSleepers()
        #expect(await browser.waitUntilOpened(), "the login never opened the browser")
        let visits = try await browser.lastVisits()
        #expect(visits.last?.status == 400)
        #expect(visits.last?.body.contains("keeps waiting") == true)
        clock.advance(by: .seconds(300))
        let error = await #expect(throws: AuthError.self) { try await login.value }
        #expect(error?.loginFailedReason == .timedOut)
        #expect(authorization.requests == ["GET /authorize"])
        await authorization.server.stop()
    }

    @Test("a rejected code exchange is classified by the provider and shown in the browser")
    func exchangeRejected() async throws {
        let authorization = try TinyAuthorizationServer(.rejectExchange)
        let browser = FollowingBrowser()
        let error = await #expect(throws: AuthError.self) {
            try await Self.flow(authorization, browser: browser).logIn(
                LoginRequest(provider: "example", appID: "app-1"))
        }
        #expect(error?.loginFailedReason == .codeExchangeFailed)
        #expect(error?.httpStatus == 400)
        let page = try await browser.lastVisits().last
        #expect(page?.status == 400)
        #expect(page?.body.contains("Sign-in failed") == true)
        #expect(page?.body.contains("invalid_grant") == true)
        await authorization.server.stop()
    }
}

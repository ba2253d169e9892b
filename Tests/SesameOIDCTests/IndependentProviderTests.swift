import Foundation
import Sesame
import SesameCurl
import SesameHTTPServer
import SesameOIDC
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The independent provider's issuer, from `scripts/interop`.
let independentIssuer = ProcessInfo.processInfo.environment["SESAME_INTEROP_ISSUER"]

/// Sesame against an OpenID provider nobody here wrote (`oidc-provider-mock`, assembled from
/// Authlib's server parts), which `scripts/interop` installs from PyPI, starts on loopback and
/// names in `SESAME_INTEROP_ISSUER`. Its discovery lists no `token_endpoint_auth_methods_supported`,
/// so a client with a secret must use `client_secret_basic` (issue 18, item 1); it issues
/// tokens for 40 s, shorter than the old fixed 60 s margin (item 2).
@Suite(
    "Sesame against an independent OpenID provider",
    .enabled(
        if: independentIssuer != nil,
        "SESAME_INTEROP_ISSUER is not set: scripts/interop starts an independent OpenID provider and sets it"))
struct IndependentProviderTests {
    static let issuer = independentIssuer
    let transport = CurlTransport(configuration: .init(timeout: .seconds(30), redirects: .never, proxy: .direct))

    /// The person on the provider's sign-in page: submits it as `subject`, follows the redirect.
    final class FormBrowser: BrowserOpener {
        let transport: any HTTPTransport
        let subject: String
        init(transport: any HTTPTransport, subject: String) {
            self.transport = transport
            self.subject = subject
        }

        func open(_ url: URL) async throws {
            let answer = try await transport.send(
                HTTPRequest(
                    method: .post, url: url, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Data(FormEncoding.encode([("sub", subject)]).utf8)))
            guard answer.status == 302, let location = answer.headers["Location"].flatMap(URL.init(string:)) else {
                throw AuthError(
                    category: .invalid,
                    message: "the provider's sign-in form answered HTTP \(answer.status), not a redirect: "
                        + String(decoding: answer.body.prefix(300), as: UTF8.self))
            }
            let transport = transport
            Task { _ = try? await transport.send(HTTPRequest(url: location)) }
        }
    }

    /// Registers a confidential client with `client_secret_basic` (RFC 7591 at the provider).
    func register(issuer: String, redirect: String) async throws -> (id: String, secret: String) {
        let body = JSONValue.object([
            "redirect_uris": .array([.string(redirect)]),
            "token_endpoint_auth_method": .string("client_secret_basic"),
        ])
        let answer = try await transport.send(.postJSON(URL(string: issuer + "/oauth2/clients")!, body))
        #expect(answer.status == 201, "registering a client: HTTP \(answer.status)")
        let json = try #require(answer.json)
        return (try #require(json["client_id"]?.stringValue), try #require(json["client_secret"]?.stringValue))
    }

    func session(issuer: String, clientID: String, secret: String, port: Int) async throws -> OIDCSession {
        let provider = try await OIDCProvider.discover(
            OIDCConfiguration(issuer: issuer, clientID: clientID, clientSecret: ClientSecret(secret)),
            transport: transport)
        #expect(provider.clientAuthMethod == .clientSecretBasic, "Discovery §3's default when none is listed")
        let login = OIDCBrowserLogin(
            oidc: provider, receiver: LoopbackRedirectReceiver(port: port, timeout: .seconds(30)),
            opener: FormBrowser(transport: transport, subject: "alice@example.com"), transport: transport)
        return OIDCSession(
            provider: provider, transport: transport, store: InMemoryCredentialStore(), loginUI: login)
    }

    @Test("a confidential client logs in with client_secret_basic, reads userinfo, uses a 40 s token, refreshes")
    func confidentialClient() async throws {
        let issuer = try #require(Self.issuer)
        let port = try Sockets.unusedPort()
        let client = try await register(issuer: issuer, redirect: "http://127.0.0.1:\(port)/callback")
        let session = try await session(issuer: issuer, clientID: client.id, secret: client.secret, port: port)
        try await session.open(allowLoginUI: true)
        let token = try #require(await session.token)
        #expect(token.userID == "alice@example.com")
        let lifetime = (token.expirationDate ?? .distantFuture).timeIntervalSince(token.refreshDate)
        #expect(lifetime <= 60, "the provider was started with short-lived tokens (\(lifetime) s)")
        let valid = try await session.validToken()
        #expect(valid.tokenString == token.tokenString, "a fresh short-lived token is used, not refreshed")
        #expect(session.session.renewer.expiryWarning(for: valid, at: Date()) == nil)
        let claims = try await session.userInfo()
        #expect(claims["sub"]?.stringValue == "alice@example.com")
        let refreshed = try await session.refresh()
        #expect(refreshed.tokenString != token.tokenString)
        #expect(refreshed.userID == "alice@example.com")
    }

    @Test("a wrong client secret is refused with a message that says to check the configured secret")
    func wrongSecret() async throws {
        let issuer = try #require(Self.issuer)
        let port = try Sockets.unusedPort()
        let client = try await register(issuer: issuer, redirect: "http://127.0.0.1:\(port)/callback")
        let session = try await session(issuer: issuer, clientID: client.id, secret: "not-the-secret", port: port)
        let error = await #expect(throws: AuthError.self) { try await session.open(allowLoginUI: true) }
        #expect(
            error?.ruleID == "client-refused", "\(String(describing: error))")
        #expect(error?.message.contains("client secret was sent") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("not-the-secret") == false)
    }
}

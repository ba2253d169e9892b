import Foundation
import SesameHTTPServer
import SesameOIDCEmulator
import SesameTestSupport
import Testing

@testable import Sesame

/// Issue 51 item 3: workload identity by the token exchange (RFC 8693), as processes, with a
/// local stand-in for GitHub Actions' ID token endpoint and the OIDC emulator trusting its issuer.
@Suite("Machine logins: the token exchange of a workload's identity token, as processes")
struct TokenExchangeProcessTests {
    init() { TestProviders.bootstrap() }

    static let ciIssuer = "https://ci.sesame.test"
    static let audience = "sesame-exchange"
    static let requestToken = "gha-request-token-7c1d"

    /// A local "CI": its signing key, the JWTs it handed out, and the endpoint that hands them
    /// out as GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL does (bearer request token, `audience=`).
    final class CI: Sendable {
        let key: SignatureSigningKey
        let handedOut: Locked<[String]>
        let server: HTTPServer

        init() throws {
            let key = try SignatureSigningKey(generating: .es256)
            self.key = key
            let handedOut = Locked<[String]>([])
            self.handedOut = handedOut
            server = HTTPServer { request in
                guard request.headers["Authorization"] == "Bearer \(TokenExchangeProcessTests.requestToken)" else {
                    return .json(.object(["message": .string("bad request token")]), status: 401)
                }
                let audience = request.query.first { $0.0 == "audience" }?.1 ?? "https://github.com/acme"
                guard let token = try? CI.sign(key, audience: audience) else { return .text("", status: 500) }
                handedOut.withLock { $0.append(token) }
                return .json(.object(["count": .number(1), "value": .string(token)]))
            }
        }

        static func sign(_ key: SignatureSigningKey, audience: String, kid: String = "ci-key-1") throws -> String {
            let now = Date().timeIntervalSince1970.rounded(.down)
            let header = JSONValue.object(["alg": .string("ES256"), "kid": .string(kid), "typ": .string("JWT")])
            let claims = JSONValue.object([
                "iss": .string(TokenExchangeProcessTests.ciIssuer), "aud": .string(audience),
                "sub": .string("repo:acme/app:ref:refs/heads/main"), "iat": .number(now), "exp": .number(now + 300),
            ])
            let input = Base64URL.encode(header.jsonData) + "." + Base64URL.encode(claims.jsonData)
            return input + "." + Base64URL.encode(try key.sign(Data(input.utf8)))
        }

        var jwks: JSONValue {
            .object([
                "keys": .array([
                    .object(
                        Dictionary(uniqueKeysWithValues: key.publicJWKMembers.map { ($0, JSONValue.string($1)) })
                            .merging(["kid": .string("ci-key-1")]) { $1 })
                ])
            ])
        }

        var environment: [String: String] {
            [
                "ACTIONS_ID_TOKEN_REQUEST_URL": "http://127.0.0.1:\(server.port)/_apis/idtoken?api-version=2.0",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": TokenExchangeProcessTests.requestToken,
            ]
        }
    }

    /// A local CI's endpoint, the emulator trusting its tokens, and a `login oidc --token-exchange`
    /// made with GitHub Actions' variables, which `body` gets again for its own runs.
    static func withExchangeLogin(
        _ body: (OIDCEmulator, CI, CLIHarness, _ environment: [String: String]) async throws -> Void
    ) async throws {
        let ci = try CI()
        try await withStarted({ try ci.server.start() }, stop: { await ci.server.stop() }) {
            try await OIDCProcessTests.withEmulator { emulator, issuer in
                try await emulator.trustSubjectTokens(issuer: Self.ciIssuer, jwks: ci.jwks, audience: Self.audience)
                let cli = try CLIHarness()
                let environment = ci.environment.merging([
                    "SESAME_OIDC_SUBJECT_TOKEN": "github-actions", "SESAME_OIDC_SUBJECT_TOKEN_AUDIENCE": Self.audience,
                ]) { $1 }
                let login = try await cli.run(
                    "sesame",
                    [
                        "login", "oidc", "--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID,
                        "--token-exchange",
                    ],
                    environment: environment)
                try #require(login.status == 0, "\(login.standardError)")
                try await body(emulator, ci, cli, environment)
            }
        }
    }

    @Test(
        "a GitHub-Actions-shaped ID token is exchanged for an access token, the login records only where it came from, and an expired login is renewed by exchanging a fresh one"
    )
    func githubActionsExchange() async throws {
        try await Self.withExchangeLogin { emulator, ci, cli, environment in
            #expect(emulator.grantCount(MachineGrant.tokenExchangeGrantType) == 1)
            let stored = try #require(try await cli.store.list(provider: nil).first)
            #expect(
                stored.token.machineGrant
                    == .tokenExchange(
                        source: .githubActions, subjectTokenType: MachineGrant.jwtTokenType, audience: Self.audience
                    ))
            #expect(stored.token.refreshToken == nil)

            try await cli.expireStoredLogin()
            let token = try await cli.run("sesame", ["token", "oidc"], environment: environment)
            #expect(token.status == 0, "\(token.standardError)")
            #expect(emulator.grantCount(MachineGrant.tokenExchangeGrantType) == 2)
            let handedOut = ci.handedOut.withLock { $0 }
            #expect(handedOut.count == 2 && Set(handedOut).count == 2, "a fresh subject token for each exchange")
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(token.standardOutput == renewed.token.tokenString + "\n")

            // No secret stored: neither a subject token nor the request token is in the store.
            let file = try String(
                contentsOf: cli.root.appending(path: "state/sesame/credentials.json"), encoding: .utf8)
            for secret in handedOut + [Self.requestToken] { #expect(!file.contains(secret)) }
            cli.expectNoTokenLeaks(handedOut + [Self.requestToken])
        }
    }

    @Test(
        "20 'sesame token' processes on an expired token-exchange login make one exchange, ask the CI for one subject token, and all print its token"
    )
    func twentyProcessesOneExchange() async throws {
        try await Self.withExchangeLogin { emulator, ci, cli, environment in
            let expired = try await cli.expireStoredLogin()
            let results = try await cli.runAtOnce(20, ["token", "oidc"], environment: environment)
            for result in results { #expect(result.status == 0, "\(result.standardError)") }
            let exchanges = emulator.grantCount(MachineGrant.tokenExchangeGrantType)
            #expect(exchanges == 2, "the login and \(exchanges - 1) renewals")
            let handedOut = ci.handedOut.withLock { $0 }
            #expect(handedOut.count == 2, "the login and \(handedOut.count - 1) subject tokens for the renewal")
            let renewed = try #require(try await cli.store.list(provider: nil).first)
            #expect(renewed.token.tokenString != expired.token.tokenString && !renewed.needsLogin)
            #expect(Set(results.map(\.standardOutput)) == [renewed.token.tokenString + "\n"])
            cli.expectNoTokenLeaks(handedOut + [Self.requestToken])
        }
    }

    @Test(
        "a subject token file signed by a key the issuer does not trust, or for another audience, is refused and nothing is stored"
    )
    func untrustedSubjectTokenRefused() async throws {
        let ci = try CI()
        let stranger = try SignatureSigningKey(generating: .es256)
        try await OIDCProcessTests.withEmulator { emulator, issuer in
            try await emulator.trustSubjectTokens(issuer: Self.ciIssuer, jwks: ci.jwks, audience: Self.audience)
            let cli = try CLIHarness()
            let tokenFile = cli.root.appending(path: "token").path
            for subject in [
                try CI.sign(stranger, audience: Self.audience), try CI.sign(ci.key, audience: "someone-else"),
            ] {
                #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data(subject.utf8)))
                let login = try await cli.run(
                    "sesame",
                    [
                        "login", "oidc", "--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID,
                        "--token-exchange", "--subject-token", "file:\(tokenFile)",
                    ])
                #expect(login.status != 0)
                #expect(login.standardError.contains("invalid_grant"), "\(login.standardError)")
                cli.expectNoTokenLeaks([subject])
            }
            #expect(emulator.grantCount(MachineGrant.tokenExchangeGrantType) == 0)
            #expect(try await cli.store.list(provider: nil).isEmpty)
        }
    }
}

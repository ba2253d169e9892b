import Foundation
import Sesame
import SesameCurl
import SesameOIDC
import SesameOIDCEmulator
import Testing

/// The OIDC emulator as independent client libraries see it (issue 18, items 5-7), over raw
/// HTTP so that each request is exactly what such a client sends.
@Suite("The OIDC emulator as real clients see it")
struct EmulatorInteropTests {
    static let redirect = "http://127.0.0.1:9/callback"
    static let alice = "248289761001"
    static let bob = "248289761002"

    struct Client: Sendable {
        let emulator: OIDCEmulator
        let endpoints: OIDCEmulatorEndpoints
        let transport = CurlTransport(configuration: .init(timeout: .seconds(30), redirects: .never, proxy: .direct))

        func url(_ path: String, _ query: [(String, String)] = []) -> URL {
            let url = URL(string: endpoints.issuer + path)!
            return query.isEmpty ? url : OAuth.appendingQuery(query, to: url)
        }

        func post(_ path: String, _ form: [(String, String)], headers: HTTPHeaders = [:]) async throws -> HTTPResponse {
            var all = headers
            all["Content-Type"] = "application/x-www-form-urlencoded"
            return try await transport.send(
                HTTPRequest(method: .post, url: url(path), headers: all, body: Data(FormEncoding.encode(form).utf8)))
        }

        func get(
            _ path: String, _ query: [(String, String)] = [], headers: HTTPHeaders = [:]
        ) async throws
            -> HTTPResponse
        {
            try await transport.send(HTTPRequest(url: url(path, query), headers: headers))
        }

        /// Tokens from a device login approved as `user`, the client authenticated by `auth`.
        func deviceTokens(
            scope: String = "openid profile email", user: String? = nil, typed: (String) -> String = { $0 },
            clientID: String = OIDCEmulator.defaultClientID, auth: [(String, String)] = [], headers: HTTPHeaders = [:]
        ) async throws -> JSONValue {
            let start = try await post(
                "/device_authorization", [("client_id", clientID), ("scope", scope)] + auth, headers: headers)
            #expect(start.status == 200, "\(String(decoding: start.body, as: UTF8.self))")
            let json = try #require(start.json)
            let userCode = try #require(json["user_code"]?.stringValue)
            var form = [("user_code", typed(userCode)), ("action", "allow")]
            if let user { form.append(("user", user)) }
            let approved = try await post("/device", form)
            #expect(approved.status == 200, "approving \(typed(userCode))")
            let token = try await post(
                "/token",
                [
                    ("grant_type", RFC8628DeviceDialect.grantType),
                    ("device_code", try #require(json["device_code"]?.stringValue)), ("client_id", clientID),
                ] + auth, headers: headers)
            #expect(token.status == 200, "\(String(decoding: token.body, as: UTF8.self))")
            return try #require(token.json)
        }

        func refresh(_ refreshToken: String, scope: String? = nil) async throws -> HTTPResponse {
            var form = [
                ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
                ("client_id", OIDCEmulator.defaultClientID),
            ]
            if let scope { form.append(("scope", scope)) }
            return try await post("/token", form)
        }

        func authorizeQuery(_ extra: [(String, String)]) -> [(String, String)] {
            [
                ("response_type", "code"), ("client_id", OIDCEmulator.defaultClientID),
                ("redirect_uri", EmulatorInteropTests.redirect), ("scope", "openid profile"), ("state", "s1"),
                ("code_challenge", PKCE.challenge(for: String(repeating: "v", count: 43))),
                ("code_challenge_method", "S256"),
            ] + extra
        }
    }

    static func with(_ body: (Client) async throws -> Void) async throws {
        let emulator = try OIDCEmulator(algorithm: "ES256")  // EC keys: generated in microseconds, not seconds
        let endpoints = try await emulator.start()
        do {
            try await body(Client(emulator: emulator, endpoints: endpoints))
        } catch {
            await emulator.stop()
            throw error
        }
        await emulator.stop()
    }

    static func claims(_ idToken: String?) throws -> JSONValue {
        let parts = try #require(idToken?.split(separator: "."))
        try #require(parts.count == 3)
        return try #require(Base64URL.decode(parts[1]).flatMap { JSONValue(parsing: $0) })
    }

    static func query(_ response: HTTPResponse) -> [String: String] {
        guard let location = response.headers["Location"], let url = URLComponents(string: location) else {
            return [:]
        }
        var result: [String: String] = [:]
        for (name, value) in FormEncoding.decode(url.percentEncodedQuery ?? "") { result[name] = value }
        return result
    }

    @Test("ID-token times are whole seconds, never ahead of the clock, with auth_time, azp and at_hash")
    func idTokenClaims() async throws {
        try await Self.with { client in
            var refreshToken = try #require(try await client.deviceTokens()["refresh_token"]?.stringValue)
            for _ in 0..<8 {
                let answer = try #require(try await client.refresh(refreshToken).json)
                let received = Date().timeIntervalSince1970
                refreshToken = try #require(answer["refresh_token"]?.stringValue)
                let claims = try Self.claims(answer["id_token"]?.stringValue)
                let iat = try #require(claims["iat"]?.doubleValue)
                #expect(iat == iat.rounded(.down) && iat <= received, "iat \(iat) at \(received)")
                #expect(claims["exp"]?.doubleValue == (claims["exp"]?.doubleValue ?? 0.5).rounded(.down))
                let authTime = try #require(claims["auth_time"]?.doubleValue)
                #expect(authTime <= iat && authTime == authTime.rounded(.down))
                #expect(claims["azp"]?.stringValue == OIDCEmulator.defaultClientID)
                let access = try #require(answer["access_token"]?.stringValue)
                let expected = Base64URL.encode(Crypto.sha256(Data(access.utf8)).prefix(16))
                #expect(claims["at_hash"]?.stringValue == expected)
            }
            let discovery = try #require(try await client.get("/.well-known/openid-configuration").json)
            let supported = discovery["claims_supported"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(Set(["auth_time", "azp", "at_hash", "sub"]).isSubset(of: Set(supported)))
        }
    }

    @Test("prompt=none never shows a page: login_required, consent_required, or a code after consent")
    func promptNone() async throws {
        try await Self.with { client in
            let anonymous = try await client.get("/authorize", client.authorizeQuery([("prompt", "none")]))
            #expect(anonymous.status == 302)
            #expect(Self.query(anonymous)["error"] == "login_required")
            #expect(Self.query(anonymous)["state"] == "s1")
            let hinted = client.authorizeQuery([("prompt", "none"), ("login_hint", "alice@example.com")])
            let beforeConsent = try await client.get("/authorize", hinted)
            #expect(Self.query(beforeConsent)["error"] == "consent_required")
            // Alice consents once on the page...
            let page = try await client.get("/authorize", client.authorizeQuery([]))
            let html = String(decoding: page.body, as: UTF8.self)
            let range = try #require(html.range(of: "name=\"request\" value=\""))
            let id = String(html[range.upperBound...].prefix { $0 != "\"" })
            let consent = try await client.post(
                "/authorize", [("request", id), ("action", "allow"), ("user", Self.alice)])
            #expect(Self.query(consent)["code"] != nil)
            // ...and prompt=none then answers with a code and no page.
            let silent = try await client.get("/authorize", hinted)
            #expect(silent.status == 302)
            #expect(Self.query(silent)["code"] != nil && Self.query(silent)["error"] == nil)
        }
    }

    @Test("an authorization request may be form-POSTed (Core §3.1.2.1)")
    func postedAuthorizationRequest() async throws {
        try await Self.with { client in
            let page = try await client.post("/authorize", client.authorizeQuery([]))
            #expect(page.status == 200)
            #expect(String(decoding: page.body, as: UTF8.self).contains("name=\"request\""))
        }
    }

    @Test("userinfo takes the token from a form body; no token is a challenge without an error code")
    func userinfoBearerForms() async throws {
        try await Self.with { client in
            let access = try #require(try await client.deviceTokens()["access_token"]?.stringValue)
            let form = try await client.post("/userinfo", [("access_token", access)])
            #expect(form.status == 200)
            #expect(form.json?["sub"]?.stringValue == Self.alice)
            let none = try await client.get("/userinfo")
            #expect(none.status == 401)
            let challenge = try #require(none.headers["WWW-Authenticate"])
            #expect(challenge.hasPrefix("Bearer") && !challenge.contains("error="))
            let wrong = try await client.get("/userinfo", headers: ["Authorization": "Bearer nope"])
            #expect(wrong.headers["WWW-Authenticate"]?.contains("error=\"invalid_token\"") == true)
            let twice = try await client.post(
                "/userinfo", [("access_token", access)], headers: ["Authorization": "Bearer \(access)"])
            #expect(twice.status == 400)
        }
    }

    @Test("a refresh may narrow the scope, not widen it, and the refresh token keeps the whole grant")
    func narrowingRefresh() async throws {
        try await Self.with { client in
            let first = try await client.deviceTokens(scope: "openid profile")
            let firstRefresh = try #require(first["refresh_token"]?.stringValue)
            let narrowed = try #require(try await client.refresh(firstRefresh, scope: "openid").json)
            #expect(narrowed["scope"]?.stringValue == "openid")
            let access = try #require(narrowed["access_token"]?.stringValue)
            let info = try await client.get("/userinfo", headers: ["Authorization": "Bearer \(access)"])
            #expect(info.json?["name"] == nil, "profile was dropped from the access token")
            let refresh = try #require(narrowed["refresh_token"]?.stringValue)
            let whole = try await client.refresh(refresh, scope: "openid profile")
            #expect(whole.status == 200 && whole.json?["scope"]?.stringValue == "openid profile")
            let wider = try await client.refresh(
                try #require(whole.json?["refresh_token"]?.stringValue), scope: "openid email")
            #expect(wider.status == 400 && wider.json?["error"]?.stringValue == "invalid_scope")
        }
    }

    @Test("revoking a refresh token revokes the access tokens of its grant (RFC 7009 §2.1)")
    func revocationCascades() async throws {
        try await Self.with { client in
            let tokens = try await client.deviceTokens()
            let access = try #require(tokens["access_token"]?.stringValue)
            let other = try #require(try await client.deviceTokens()["access_token"]?.stringValue)
            let revoked = try await client.post(
                "/revoke",
                [
                    ("token", try #require(tokens["refresh_token"]?.stringValue)),
                    ("client_id", OIDCEmulator.defaultClientID),
                ])
            #expect(revoked.status == 200)
            let after = try await client.get("/userinfo", headers: ["Authorization": "Bearer \(access)"])
            #expect(after.status == 401)
            let untouched = try await client.get("/userinfo", headers: ["Authorization": "Bearer \(other)"])
            #expect(untouched.status == 200, "another grant's token keeps working")
        }
    }

    @Test("a confidential client authenticates with HTTP Basic or in the body; a refusal carries a Basic challenge")
    func confidentialClients() async throws {
        try await Self.with { client in
            let secret = "s3cret:with+odd/chars"
            let registered = try await client.transport.send(
                HTTPRequest(
                    method: .post, url: client.endpoints.adminURL.appendingPathComponent("clients"),
                    headers: ["Content-Type": "application/json"],
                    body: Data(
                        JSONValue.object(["client_id": .string("backend"), "client_secret": .string(secret)]).jsonText
                            .utf8)))
            #expect(registered.status == 201)
            let basic = Data((FormEncoding.escape("backend") + ":" + FormEncoding.escape(secret)).utf8)
            let viaBasic = try await client.deviceTokens(
                clientID: "backend", headers: ["Authorization": "Basic " + basic.base64EncodedString()])
            #expect(viaBasic["access_token"] != nil)
            let viaBody = try await client.deviceTokens(clientID: "backend", auth: [("client_secret", secret)])
            #expect(viaBody["access_token"] != nil)

            let wrong = Data("backend:nope".utf8).base64EncodedString()
            let refused = try await client.post(
                "/device_authorization", [("scope", "openid")], headers: ["Authorization": "Basic \(wrong)"])
            #expect(refused.status == 401 && refused.json?["error"]?.stringValue == "invalid_client")
            #expect(refused.headers["WWW-Authenticate"]?.hasPrefix("Basic") == true)
            let missing = try await client.post("/device_authorization", [("client_id", "backend")])
            #expect(missing.status == 401)
            let twice = try await client.post(
                "/device_authorization", [("client_secret", secret)],
                headers: ["Authorization": "Basic " + basic.base64EncodedString()])
            #expect(twice.status == 400 && twice.json?["error"]?.stringValue == "invalid_request")
        }
    }

    @Test("the device page takes the code in any case, without its dash, prefilled, approved as the person chosen")
    func lenientDevicePage() async throws {
        try await Self.with { client in
            let tokens = try await client.deviceTokens(
                user: Self.bob, typed: { $0.lowercased().replacingOccurrences(of: "-", with: "") })
            #expect(try Self.claims(tokens["id_token"]?.stringValue)["sub"]?.stringValue == Self.bob)
            let start = try #require(
                try await client.post(
                    "/device_authorization", [("client_id", OIDCEmulator.defaultClientID), ("scope", "openid")]
                ).json)
            let complete = try #require(start["verification_uri_complete"]?.stringValue.flatMap(URL.init(string:)))
            let page = try await client.transport.send(HTTPRequest(url: complete))
            let userCode = try #require(start["user_code"]?.stringValue)
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains("value=\"\(userCode)\""), "the code is prefilled")
            #expect(html.contains("Bob Example"), "the page offers who approves")
        }
    }
}

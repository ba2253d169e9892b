import Foundation
import Sesame
import SesameFacebook
import SesameTesting
import Testing

private let provider = FacebookProvider(
    appID: "42", clientToken: "client", graphBaseURL: URL(string: "https://graph.example.test")!)

private func json(_ text: String, status: Int = 200, headers: HTTPHeaders = [:]) -> HTTPResponse {
    HTTPResponse(status: status, headers: headers, body: Data(text.utf8))
}

@Suite("Facebook provider, unit")
struct FacebookUnitTests {
    @Test("appsecret_proof is the hex HMAC-SHA256 of the token under the secret (RFC 4231-style vector)")
    func appSecretProofVector() {
        let secret = FacebookAppSecret("key")
        #expect(
            secret.proof(for: "The quick brown fox jumps over the lazy dog")
                == "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
        #expect(!String(describing: secret).contains("key"))
        #expect(!String(reflecting: secret).contains("key"))
    }

    @Test("with a secret every call carries appsecret_proof; the token goes in a header, never the URL")
    func proofAndHeader() async throws {
        var signed = provider
        signed.appSecret = FacebookAppSecret("s3cret")
        let transport = RecordingTransport(always: json(#"{"id":"1"}"#))
        let client = GraphClient(provider: signed, transport: transport, accessToken: "TOKEN")
        _ = try await client.get("me", parameters: ["fields": "id"])
        _ = try await client.post("me/feed", parameters: ["message": "hi"])
        let get = try #require(transport.requests.first)
        #expect(get.url.absoluteString.contains("appsecret_proof=\(FacebookAppSecret("s3cret").proof(for: "TOKEN"))"))
        #expect(!get.url.absoluteString.contains("TOKEN"))
        #expect(get.headers["Authorization"] == "Bearer TOKEN")
        let post = try #require(transport.requests.last)
        #expect(String(decoding: post.body ?? Data(), as: UTF8.self).contains("appsecret_proof="))
    }

    @Test("without a secret no proof is sent")
    func noProof() async throws {
        let transport = RecordingTransport(always: json(#"{"id":"1"}"#))
        _ = try await GraphClient(provider: provider, transport: transport, accessToken: "T").get("me")
        #expect(transport.requests.first?.url.absoluteString.contains("appsecret_proof") == false)
    }

    @Test(
        "the version is the client's, overridable per call, and checked",
        arguments: [
            (nil as String?, nil as String?, "/v27.0/me"), ("v18.0", nil, "/v18.0/me"), ("v18.0", "v20.0", "/v20.0/me"),
        ])
    func versions(client: String?, call: String?, path: String) async throws {
        let transport = RecordingTransport(always: json("{}"))
        let graph = GraphClient(provider: provider, transport: transport, accessToken: "T", version: client)
        _ = try await graph.get("me", version: call)
        #expect(transport.requests.first?.url.path == path)
    }

    @Test("a version that is not one is refused before sending")
    func badVersion() async throws {
        let transport = RecordingTransport(always: json("{}"))
        let graph = GraphClient(provider: provider, transport: transport, accessToken: "T")
        await #expect(throws: AuthError.self) { try await graph.get("me", version: "19.0") }
        #expect(transport.requests.isEmpty)
    }

    @Test("a paging link to another host is not followed with the token")
    func pagingStaysOnGraph() async throws {
        let transport = RecordingTransport(
            always: json(#"{"data":[{"id":"1"}],"paging":{"next":"https://evil.example/v19.0/me/feed?after=x"}}"#))
        let graph = GraphClient(provider: provider, transport: transport, accessToken: "T")
        var pages = 0
        let error = await #expect(throws: AuthError.self) {
            for try await _ in graph.pages("me/feed") { pages += 1 }
        }
        #expect(error?.category == .invalid)
        #expect(pages == 1)
        #expect(transport.requests.count == 1)
    }

    @Test("a bare true answer reads as {\"success\": true}")
    func bareTrue() async throws {
        let graph = GraphClient(
            provider: provider, transport: RecordingTransport(always: json("true")), accessToken: "T")
        #expect(try await graph.delete("me/permissions/email")["success"] == .bool(true))
    }

    @Test("Decodable results are decoded, and a mismatch says what did not fit")
    func decodable() async throws {
        struct Me: Decodable, Sendable { var id: String }
        let graph = GraphClient(
            provider: provider, transport: RecordingTransport(always: json(#"{"id":"7"}"#)), accessToken: "T")
        #expect(try await graph.get("me", as: Me.self).id == "7")
        struct Wrong: Decodable, Sendable { var name: String }
        let error = await #expect(throws: AuthError.self) { try await graph.get("me", as: Wrong.self) }
        #expect(error?.message.contains("Wrong") == true)
    }

    @Test(
        "usage below the threshold does not wait; above it waits in proportion; at 100% the regain time",
        arguments: [
            (#"{"call_count":50,"total_cputime":10,"total_time":10}"#, 0.0),
            (#"{"call_count":80,"total_cputime":10,"total_time":10}"#, 2.0),
            (#"{"call_count":95,"total_cputime":10,"total_time":10}"#, 8.0),
            (#"{"call_count":100,"total_cputime":10,"total_time":10}"#, 10.0),
        ])
    func governor(header: String, seconds: Double) async throws {
        let governor = GraphUsageGovernor(threshold: 75, maxDelay: .seconds(10))
        let clock = ManualClock(autoAdvance: true)
        let graph = GraphClient(
            provider: provider,
            transport: RecordingTransport(always: json("{}", headers: ["X-App-Usage": header])),
            accessToken: "T", governor: governor, clock: clock)
        _ = try await graph.get("me")
        #expect(clock.sleeps.isEmpty)
        _ = try await graph.get("me")
        let waited = clock.sleeps.first ?? .zero
        #expect(abs(waited.inSeconds - seconds) < 0.001)
    }

    @Test(
        "Graph API versions: 'v', a number, at most one dot between digits",
        arguments: [
            ("v19.0", true), ("v1", true), ("v2.12", true), ("v1234567", true), ("v", false), ("19.0", false),
            ("v19.", false), ("v.19", false), ("v1.2.3", false), ("v1..2", false), ("v12345678", false),
            ("v١٩", false), ("v19.0 ", false), ("V19.0", false), ("v-1", false),
        ])
    func graphVersions(version: String, valid: Bool) {
        #expect(FacebookProvider.isValidVersion(version) == valid)
    }

    @Test("the governor keeps the newest usage, whether or not the headers repeat an earlier answer's")
    func governorFollowsChangingHeaders() {
        let governor = GraphUsageGovernor(threshold: 75, maxDelay: .seconds(10))
        let low = #"{"call_count":10,"total_cputime":5,"total_time":5}"#
        let high = #"{"call_count":90,"total_cputime":5,"total_time":5}"#
        governor.record(["X-App-Usage": low])
        #expect(governor.lastUsage?.highestPercentage == 10)
        governor.record(["X-App-Usage": high])
        #expect(governor.lastUsage?.highestPercentage == 90)
        governor.record(["X-App-Usage": high])
        #expect(governor.lastUsage?.highestPercentage == 90)
        governor.record(["X-App-Usage": low])
        #expect(governor.lastUsage?.highestPercentage == 10)
        governor.record(["X-App-Usage": low, "X-Page-Usage": high])
        #expect(governor.lastUsage?.highestPercentage == 90)
        governor.record(["Content-Type": "application/json"])  // no usage headers: nothing changes
        #expect(governor.lastUsage?.highestPercentage == 90)
    }

    @Test("a batch item's error is classified on its own; a bare-null item is reported, not dropped")
    func batchParsing() async throws {
        let body = #"""
            [{"code":200,"headers":[],"body":"{\"id\":\"1\"}"},
             {"code":400,"headers":[],"body":"{\"error\":{\"code\":200,\"message\":\"(#200) no\",\"type\":\"OAuthException\"}}"},
             null]
            """#
        let transport = RecordingTransport(always: json(body))
        let graph = GraphClient(provider: provider, transport: transport, accessToken: "T")
        let results = try await graph.batch([
            GraphRequest(.get, "me"), GraphRequest(.post, "me/feed"), GraphRequest(.get, "x"),
        ])
        #expect(try results[0].get().json["id"] == .string("1"))
        guard case .failure(let error) = results[1], case .failure = results[2] else {
            Issue.record("expected failures for items 2 and 3")
            return
        }
        #expect(error.category == .permissions)
        let sent = String(decoding: transport.requests[0].body ?? Data(), as: UTF8.self)
        let batch = try #require(FormEncoding.decode(sent).first { $0.0 == "batch" }?.1)
        let items = try #require(JSONValue(parsing: Data(batch.utf8))?.arrayValue)
        #expect(items[0]["relative_url"] == .string("me"))
        #expect(items[1]["method"] == .string("POST"))
    }
}

@Suite("Facebook login dialects, unit")
struct FacebookDialectTests {
    private func context() -> DevicePollContext {
        DevicePollContext(
            authorization: DeviceAuthorization(
                deviceCode: "dc", userCode: "UC", verificationURL: URL(string: "https://x.test/device")!,
                expiresIn: .seconds(420), interval: .seconds(5)),
            interval: .seconds(5),
            request: LoginRequest(provider: .facebook, appID: "42"))
    }

    @Test(
        "device poll answers are read by subcode",
        arguments: [
            (1_349_174, "pending"), (1_349_172, "slowDown"), (1_349_152, "expired"), (1_349_173, "denied"),
            (1, "unrecognized"),
        ])
    func devicePoll(subcode: Int, expected: String) async throws {
        let dialect = FacebookDeviceDialect(provider: provider, transport: RecordingTransport(responses: []))
        let body = #"{"error":{"message":"m","code":31,"error_subcode":\#(subcode),"error_user_msg":"never shown"}}"#
        let answer = try await dialect.readPoll(json(body, status: 400), context: context())
        switch answer {
        case .pending: #expect(expected == "pending")
        case .slowDown(let interval):
            #expect(expected == "slowDown")
            #expect(interval == .seconds(10))
        case .expired: #expect(expected == "expired")
        case .denied(let error):
            #expect(expected == "denied")
            #expect(provider.taxonomy.classifyLoginError(error).category == .userCancelled)
        case .unrecognized: #expect(expected == "unrecognized")
        default: Issue.record("unexpected answer \(answer)")
        }
    }

    @Test("device login sends the client access token and comma-separated scopes")
    func deviceStart() throws {
        let dialect = FacebookDeviceDialect(provider: provider, transport: RecordingTransport(responses: []))
        let request = try dialect.startRequest(
            for: LoginRequest(provider: .facebook, appID: "42", permissions: [.read("email"), .read("user_posts")]))
        let form = FormEncoding.decode(request.body ?? Data())
        #expect(form.contains { $0 == ("access_token", "42|client") })
        #expect(form.contains { $0 == ("scope", "email,user_posts") })
        #expect(request.url.path == "/\(FacebookProvider.defaultGraphVersion)/device/login")
    }

    @Test("a Login for Business configuration replaces the scope list, in the dialog and in device login")
    func businessConfiguration() throws {
        var business = provider
        business.loginConfigurationID = "800000000000001"
        let request = LoginRequest(provider: .facebook, appID: "42", permissions: [.read("email")])
        let url = try FacebookBrowserDialect(provider: business, transport: RecordingTransport(responses: []))
            .authorizationURL(
                for: request, redirectURI: URL(string: "http://127.0.0.1:5000/cb")!, state: "s",
                pkce: try PKCE.generate())
        let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(query.contains { $0.name == "config_id" && $0.value == "800000000000001" })
        #expect(!query.contains { $0.name == "scope" })
        let device = try FacebookDeviceDialect(provider: business, transport: RecordingTransport(responses: []))
            .startRequest(for: request)
        let form = FormEncoding.decode(device.body ?? Data())
        #expect(form.contains { $0 == ("config_id", "800000000000001") })
        #expect(!form.contains { $0.0 == "scope" })
        let plain = try FacebookBrowserDialect(provider: provider, transport: RecordingTransport(responses: []))
            .authorizationURL(
                for: request, redirectURI: URL(string: "http://127.0.0.1:5000/cb")!, state: "s",
                pkce: try PKCE.generate())
        #expect(plain.query?.contains("scope=email") == true && plain.query?.contains("config_id") == false)
    }

    @Test("granular_scopes are kept on the login, and a login stored before them still reads")
    func granularScopesStored() throws {
        var token = AccessToken(tokenString: "T", provider: .facebook, appID: "42")
        token.granularScopes = [FacebookGranularScope(scope: "pages_show_list", targetIDs: ["1", "2"])]
        let data = try JSONEncoder().encode(token)
        let read = try JSONDecoder().decode(AccessToken.self, from: data)
        #expect(read.granularScopes == token.granularScopes)
        let old =
            #"{"tokenString":"T","provider":"facebook","appID":"42","permissions":{"granted":[],"declined":[]},"#
            + #""refreshDate":0}"#
        #expect(try JSONDecoder().decode(AccessToken.self, from: Data(old.utf8)).granularScopes.isEmpty)
        let info = TokenIntrospection(
            debugTokenData: .object([
                "is_valid": .bool(true),
                "granular_scopes": .array([
                    .object(["scope": .string("pages_show_list"), "target_ids": .array([.string("9")])]),
                    .object(["scope": .string("email")]),
                ]),
            ]))
        #expect(
            info.granularScopes == [
                FacebookGranularScope(scope: "pages_show_list", targetIDs: ["9"]),
                FacebookGranularScope(scope: "email"),
            ])
    }

    @Test("device login without a client token says where to find one")
    func deviceNeedsClientToken() {
        var bare = provider
        bare.clientToken = nil
        let dialect = FacebookDeviceDialect(provider: bare, transport: RecordingTransport(responses: []))
        #expect(throws: AuthError.self) {
            try dialect.startRequest(for: LoginRequest(provider: .facebook, appID: "42"))
        }
    }

    @Test("the dialog URL asks again with auth_type=rerequest and carries the audience and PKCE")
    func dialogURL() throws {
        let dialect = FacebookBrowserDialect(provider: provider, transport: RecordingTransport(responses: []))
        let pkce = try PKCE.generate()
        let url = try dialect.authorizationURL(
            for: LoginRequest(
                provider: .facebook, appID: "42", permissions: [.publish("publish_actions")],
                options: LoginRequest.Options(defaultAudience: .everyone), isRerequest: true),
            redirectURI: URL(string: "http://127.0.0.1:5000/callback")!, state: "st", pkce: pkce)
        let query = FormEncoding.decode(url.query ?? "")
        for pair in [
            ("auth_type", "rerequest"), ("default_audience", "everyone"), ("scope", "publish_actions"),
            ("code_challenge_method", "S256"), ("return_scopes", "true"), ("client_id", "42"),
        ] {
            #expect(query.contains { $0 == pair }, "missing \(pair)")
        }
        let exchange = try dialect.tokenRequest(
            code: "c", redirectURI: URL(string: "http://127.0.0.1:5000/callback")!, pkce: pkce,
            for: LoginRequest(provider: .facebook, appID: "42"))
        let form = FormEncoding.decode(exchange.body ?? Data())
        #expect(form.contains { $0 == ("code_verifier", pkce.verifier) })
        #expect(!form.contains { $0.0 == "client_secret" })
    }

    @Test("permissions read from /me/permissions: granted, declined and expired")
    func permissionList() throws {
        let list = try #require(
            JSONValue(
                parsing: Data(
                    #"{"data":[{"permission":"email","status":"granted"},{"permission":"user_posts","status":"declined"},{"permission":"publish_actions","status":"expired"}]}"#
                        .utf8)))
        let set = PermissionSet(graphPermissions: list)
        #expect(set.granted == ["email"])
        #expect(set.declined == ["user_posts", "publish_actions"])
    }
}

import Foundation
import Sesame
import SesameFacebook
import SesameTesting
import Testing

/// Records every request, around another transport.
private final class RequestLog: HTTPTransport {
    let base: any HTTPTransport
    private let requests = Locked<[HTTPRequest]>([])

    init(_ base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        requests.withLock { $0.append(request) }
        return try await base.send(request)
    }

    var all: [HTTPRequest] { requests.withLock { $0 } }
}

@Suite("Tokens stay out of URLs")
struct TokenOutOfURLTests {
    @Test("a supplied token is checked with debug_token in a POST body, never in a URL")
    func suppliedTokenInBody() async throws {
        try await FacebookHarness.with { harness in
            let string = try await harness.emulator.issueToken(permissions: ["email"])
            let log = RequestLog(harness.transport)
            let store = InMemoryCredentialStore()
            let login = ExistingTokenLogin(provider: harness.provider, transport: log) { string }
            let session = harness.session(store: store, loginUI: login)
            #expect(try await session.openActiveSession(allowLoginUI: true) == .open)
            let debug = try #require(log.all.first { $0.url.path.hasSuffix("/debug_token") })
            #expect(debug.method == .post)
            let form = FormEncoding.decode(String(decoding: debug.body ?? Data(), as: UTF8.self))
            #expect(form.contains { $0 == ("input_token", string) })
            #expect(form.contains { $0 == ("method", "get") })
            for request in log.all { #expect(!request.url.absoluteString.contains(string), "\(request.url.path)") }
        }
    }

    @Test("introspectToken sends debug_token as a POST, with the token out of the URL")
    func introspectionInBody() async throws {
        try await FacebookHarness.with { harness in
            let store = InMemoryCredentialStore()
            try await harness.storeIssuedToken(in: store, permissions: ["email"])
            let log = RequestLog(harness.transport)
            let session = harness.session(store: store, transport: log)
            try await session.openActiveSession(allowLoginUI: false)
            let token = try #require(await session.token?.tokenString)
            let info = try await session.introspectToken()
            #expect(info.isValid)
            let debug = try #require(log.all.first { $0.url.path.hasSuffix("/debug_token") })
            #expect(debug.method == .post)
            for request in log.all { #expect(!request.url.absoluteString.contains(token)) }
        }
    }

    @Test("a token the server echoes back in an error is redacted from every field, whatever its characters")
    func echoedTokenRedacted() async throws {
        let token = "opaque-token_with-dashes_and_underscores-1234567890"
        let echo = RecordingTransport { request, _ in
            HTTPResponse(
                status: 400, headers: ["Content-Type": "application/json"],
                body: Data(
                    #"{"error":{"message":"Bad token \#(token) (also \#(FormEncoding.encode([("t", token)])))","type":"OAuthException","code":100,"error_user_msg":"Token \#(token) is bad","fbtrace_id":"\#(token)"}}"#
                        .utf8))
        }
        let client = GraphClient(provider: FacebookProvider(appID: "1234"), transport: echo, accessToken: token)
        let error = try await #require(throws: AuthError.self) { _ = try await client.get("me") }
        let texts = [
            error.message, error.userMessage ?? "", error.userTitle ?? "",
            error.details(as: GraphErrorDetails.self)?.traceID ?? "", error.description,
            error.body?.jsonText ?? "",
        ]
        for text in texts {
            #expect(!text.contains(token), "\(text)")
            #expect(!text.contains("with-dashes"), "\(text)")
        }
        #expect(error.message.contains(Redaction.placeholder))
    }
}

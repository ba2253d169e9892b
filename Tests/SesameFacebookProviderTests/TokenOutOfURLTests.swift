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
    @Test("a supplied token is checked with GET debug_token, the token in input_token and in no other URL")
    func suppliedTokenInQuery() async throws {
        try await FacebookHarness.with { harness in
            let string = try await harness.emulator.issueToken(permissions: ["email"])
            let log = RequestLog(harness.transport)
            let store = InMemoryCredentialStore()
            let login = ExistingTokenLogin(provider: harness.provider, transport: log) { string }
            let session = harness.session(store: store, loginUI: login)
            #expect(try await session.openActiveSession(allowLoginUI: true) == .open)
            let debug = try #require(log.all.first { $0.url.path.hasSuffix("/debug_token") })
            #expect(debug.method == .get && debug.body == nil)
            let query = URLComponents(url: debug.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            #expect(query.map(\.name) == ["input_token"], "no method override, nothing else")
            #expect(query.first?.value == string)
            for request in log.all where !request.url.path.hasSuffix("/debug_token") {
                #expect(!request.url.absoluteString.contains(string), "\(request.url.path)")
            }
        }
    }

    @Test("introspectToken sends GET debug_token; a failure of it never shows the token")
    func introspectionAsGraphDocumentsIt() async throws {
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
            #expect(debug.method == .get && debug.url.query?.contains("method=") == false)
            for request in log.all where !request.url.path.hasSuffix("/debug_token") {
                #expect(!request.url.absoluteString.contains(token))
            }
        }
        // A transport that names the whole URL in its failure, and a server that echoes the query.
        let failing = RecordingTransport { request, _ in
            throw TransportError(kind: .connectionFailed, message: "could not reach \(request.url.absoluteString)")
        }
        let echoing = RecordingTransport { request, _ in
            HTTPResponse(
                status: 400,
                body: Data(
                    #"{"error":{"message":"bad \#(request.url.query ?? "")","type":"OAuthException","code":100}}"#.utf8)
            )
        }
        for transport in [failing, echoing] {
            try await FacebookHarness.with { harness in
                let store = InMemoryCredentialStore()
                try await harness.storeIssuedToken(in: store, permissions: ["email"])
                let session = harness.session(store: store, transport: transport)
                try await session.openActiveSession(allowLoginUI: false)
                let token = try #require(await session.token?.tokenString)
                let error = try await #require(throws: AuthError.self) { _ = try await session.introspectToken() }
                let texts = "\(error) \(error.message) \(error.userMessage ?? "") \(error.body?.jsonText ?? "")"
                #expect(!texts.contains(token), "\(texts)")
            }
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

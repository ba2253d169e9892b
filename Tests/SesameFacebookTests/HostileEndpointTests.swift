import Foundation
import Sesame
import Testing

@testable import SesameFacebook

@Suite("Facebook endpoints and token patterns under hostile input")
struct FacebookHostileInputTests {
    @Test("plain http to a host that is not loopback is refused for Graph and dialog URLs, unless named")
    func insecureGraphURL() throws {
        let remote = URL(string: "http://graph.example.com")!
        let provider = FacebookProvider(appID: "1234", dialogBaseURL: remote, graphBaseURL: remote)
        let graph = try #require(throws: AuthError.self) { try provider.graphURL("me") }
        #expect(graph.category == .invalid)
        #expect(graph.message.contains("http") && graph.message.contains("graph.example.com"))
        #expect(throws: AuthError.self) { try provider.dialogURL() }

        let optedIn = FacebookProvider(
            appID: "1234", dialogBaseURL: remote, graphBaseURL: remote, allowedInsecureHosts: ["Graph.Example.com"])
        #expect(try optedIn.graphURL("me").absoluteString.hasPrefix("http://graph.example.com/"))
        #expect(try optedIn.dialogURL().scheme == "http")

        for loopback in ["http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:9"] {
            let local = FacebookProvider(
                appID: "1234", dialogBaseURL: URL(string: loopback)!, graphBaseURL: URL(string: loopback)!)
            #expect(try local.graphURL("me").scheme == "http", "\(loopback)")
        }
        #expect(try FacebookProvider(appID: "1234").graphURL("me").scheme == "https")
    }

    @Test("a GraphClient on a plain-http origin that is not loopback sends nothing; once allowed, one URL a call")
    func insecureGraphClient() async throws {
        let remote = URL(string: "http://graph.example.com")!
        let sent = Locked<[URL]>([])
        let transport = RecordingTransport { url in sent.withLock { $0.append(url) } }
        let refused = GraphClient(
            provider: FacebookProvider(appID: "1234", dialogBaseURL: remote, graphBaseURL: remote),
            transport: transport,
            accessToken: "token")
        let error = try await #require(throws: AuthError.self) { try await refused.get("me") }
        #expect(error.category == .invalid && error.message.contains("graph.example.com"))
        await #expect(throws: AuthError.self) { try await refused.batch([GraphRequest(.get, "me")]) }
        #expect(sent.withLock { $0 }.isEmpty)

        let allowed = GraphClient(
            provider: FacebookProvider(
                appID: "1234", graphVersion: "v19.0", dialogBaseURL: remote, graphBaseURL: remote,
                allowedInsecureHosts: ["graph.example.com"]),
            transport: transport, accessToken: "token")
        _ = try await allowed.get("/me/feed", parameters: ["fields": "id,message", "limit": "2"])
        #expect(
            sent.withLock { $0 }.map(\.absoluteString) == [
                "http://graph.example.com/v19.0/me/feed?fields=id%2Cmessage&limit=2"
            ])
    }

    @Test(
        "tokens with - and _ are redacted whole from error text",
        arguments: [
            "EAAB-abc_def-ghi_jkl-mno_pqr-stu_vwx-yz0_123-456_789",
            "EAA" + String(repeating: "x_-", count: 22),
            "EAAGm0PX4ZCpsBAAbcdefghijklmnopqrstuvwxyz0123456789",
        ])
    func dashedTokens(token: String) throws {
        let body = Data(#"{"error":{"message":"Invalid OAuth access token: \#(token) is bad","code":190}}"#.utf8)
        let error = FacebookErrorTaxonomy().classify(status: 400, headers: [:], body: body)
        #expect(!error.message.contains(token))
        // Not even a tail of it: the old pattern stopped at the first - or _.
        #expect(!error.message.contains(String(token.suffix(12))), "\(error.message)")
        #expect(error.message.contains(Redaction.placeholder))
    }
}

/// Answers `{"id":"1"}` to every request, and tells `record` each URL it was asked for.
private struct RecordingTransport: HTTPTransport {
    let record: @Sendable (URL) -> Void

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        record(request.url)
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(#"{"id":"1"}"#.utf8))
    }
}

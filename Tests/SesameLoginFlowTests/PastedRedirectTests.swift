import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import SesameTesting
import Testing

/// Lines a person pastes, handed out as the test adds them; every prompt shown is kept.
final class ScriptedPastes: RedirectPasteSource {
    let prompts = Observed<[String]>([])
    private let lines = Observed<[String?]>([])
    /// How many reads ended because the task was cancelled (the redirect came another way).
    let cancelledReads = Observed(0)

    init(_ lines: [String?] = []) { self.lines.change { $0 = lines } }

    func add(_ line: String?) { lines.change { $0.append(line) } }

    func nextPaste(prompt: String) async -> String? {
        prompts.change { $0.append(prompt) }
        guard await lines.wait(until: { !$0.isEmpty }) else {
            cancelledReads.change { $0 += 1 }
            return nil
        }
        return lines.change { $0.removeFirst() }
    }
}

/// A browser on another machine: it loads the authorization URL, and the redirect it is sent to
/// is not followed (127.0.0.1 there is not this machine); the address is kept for pasting.
final class RemoteBrowser: BrowserOpener {
    let redirects = Observed<[String]>([])

    func open(_ url: URL) async throws {
        let response = try await LoopbackTransport().send(HTTPRequest(url: url))
        guard (300..<400).contains(response.status), let location = response.headers["Location"] else {
            Issue.record("the authorization server did not redirect: \(response.status)")
            return
        }
        redirects.change { $0.append(location) }
    }

    /// The address the browser was sent to, once it has been.
    func redirect() async throws -> String {
        #expect(await redirects.wait(limit: .seconds(60)) { !$0.isEmpty })
        return try #require(redirects.value.first)
    }
}

@Suite("Pasting the redirect: what is accepted, what is refused, and the login it ends", .timeLimit(.minutes(2)))
struct PastedRedirectTests {
    static let redirectURI = URL(string: "http://127.0.0.1:5555/callback")!
    static let state = "state-0123456789"

    enum Expected: Sendable, CustomStringConvertible {
        case code(String)
        case error(String)
        case refused(LoginFailedReason, containing: String)

        var description: String {
            switch self {
            case .code(let code): "code \(code)"
            case .error(let error): "error \(error)"
            case .refused(let reason, let text): "refused (\(reason)): \(text)"
            }
        }
    }

    static let cases: [(String, Expected)] = [
        ("http://127.0.0.1:5555/callback?code=abc12345&state=\(state)", .code("abc12345")),
        ("  http://127.0.0.1:5555/callback?code=abc12345&state=\(state)\r\n", .code("abc12345")),
        (
            "http://127.0.0.1:5555/callback?state=\(state)&session_state=x.y&scope=openid%20email&code=c%2Fd12345",
            .code("c/d12345")
        ),
        ("http://localhost:5555/callback?code=abc12345&state=\(state)", .code("abc12345")),
        ("code=abc12345&state=\(state)", .code("abc12345")),
        ("?code=abc12345&state=\(state)", .code("abc12345")),
        ("4/0AbCdEf-gh_ij.KL", .code("4/0AbCdEf-gh_ij.KL")),
        (
            "http://127.0.0.1:5555/callback?error=access_denied&error_description=No&state=\(state)",
            .error("access_denied")
        ),
        (
            "http://127.0.0.1:5555/callback?code=abc12345&state=someone-elses",
            .refused(.stateMismatch, containing: "did not match")
        ),
        ("http://127.0.0.1:5555/callback?code=abc12345", .refused(.stateMismatch, containing: "no 'state'")),
        (
            "http://127.0.0.1:5555/callback?code=abc12345&code=xyz67890&state=\(state)",
            .refused(.malformedRedirect, containing: "'code' more than once")
        ),
        (
            "code=abc12345&state=\(state)&state=\(state)",
            .refused(.malformedRedirect, containing: "'state' more than once")
        ),
        (
            "http://127.0.0.1:5555/callback?error=access_denied&state=\(state)&error=server_error",
            .refused(.malformedRedirect, containing: "'error' more than once")
        ),
        ("http://127.0.0.1:5555/callback?state=\(state)", .refused(.malformedRedirect, containing: "neither")),
        ("http://127.0.0.1:5555/callback", .refused(.malformedRedirect, containing: "no sign-in answer")),
        ("this is not an address", .refused(.malformedRedirect, containing: "spaces or control characters")),
        ("%%%###", .refused(.malformedRedirect, containing: "neither a web address nor a sign-in code")),
        ("abc", .refused(.malformedRedirect, containing: "neither a web address nor a sign-in code")),
        ("", .refused(.malformedRedirect, containing: "empty")),
        ("http://[::1", .refused(.malformedRedirect, containing: "not a web address")),
        (
            "https://id.example.com/callback?code=abc12345&state=\(state)",
            .refused(.malformedRedirect, containing: "goes to https://id.example.com/callback, not")
        ),
        (
            "http://127.0.0.1:6666/callback?code=abc12345&state=\(state)",
            .refused(.malformedRedirect, containing: "goes to http://127.0.0.1:6666/callback")
        ),
        (
            "http://127.0.0.1:5555/authorize?client_id=x&state=\(state)&redirect_uri=http%3A%2F%2F127.0.0.1",
            .refused(.malformedRedirect, containing: "not to this sign-in's redirect address")
        ),
    ]

    @Test("a pasted line is read as the loopback receiver reads a redirect", arguments: cases)
    func parse(_ line: String, expected: Expected) throws {
        let result = Result {
            try PastedRedirect.parse(
                line, redirectURI: Self.redirectURI, expectedState: Self.state, expectedIssuer: nil,
                provider: "example")
        }
        switch (expected, result) {
        case (.code(let code), .success(.code(let got))):
            #expect(got == code)
        case (.error(let error), .success(.error(let got))):
            #expect(got.error == error)
        case (.refused(let reason, let text), .failure(let error as AuthError)):
            #expect(error.loginFailedReason == reason, "\(error.message)")
            #expect(error.message.contains(text), "\(error.message)")
            #expect(error.category == .invalid)
            #expect(!error.message.contains("abc12345"), "the code is not repeated in a refusal")
        default:
            Issue.record("\(line.debugDescription): expected \(expected), got \(result)")
        }
    }

    @Test("a provider that promises 'iss' needs the whole address: a bare code is refused, a wrong 'iss' too")
    func issuerRequired() throws {
        let issuer = AuthorizationResponseIssuer(issuer: "https://id.example.com", required: true)
        func parse(_ line: String) -> Result<RedirectOutcome, any Error> {
            Result {
                try PastedRedirect.parse(
                    line, redirectURI: Self.redirectURI, expectedState: Self.state, expectedIssuer: issuer,
                    provider: "example")
            }
        }
        guard case .failure(let bare as AuthError) = parse("abc12345xyz") else {
            Issue.record("a bare code was taken although 'iss' must be checked")
            return
        }
        #expect(bare.message.contains("paste the whole address"), "\(bare.message)")
        let iss = "https%3A%2F%2Fid.example.com"
        let good = parse("http://127.0.0.1:5555/callback?code=abc12345&state=\(Self.state)&iss=\(iss)")
        #expect((try? good.get()) == .code("abc12345"))
        guard
            case .failure(let wrong as AuthError) = parse(
                "http://127.0.0.1:5555/callback?code=abc12345&state=\(Self.state)&iss=https%3A%2F%2Fevil.example")
        else {
            Issue.record("a wrong 'iss' was taken")
            return
        }
        #expect(wrong.loginFailedReason == .issuerMismatch)
    }

    @Test("a garbage line and a wrong state are refused with the reason, and the next paste is read")
    func retries() async throws {
        let pastes = ScriptedPastes([
            "hello there",
            "http://127.0.0.1:5555/callback?code=abc12345&state=forged-state",
            "http://127.0.0.1:5555/callback?code=abc12345&state=\(Self.state)",
        ])
        let outcome = try await PastedRedirect.receive(
            from: pastes, redirectURI: Self.redirectURI, expectedState: Self.state, expectedIssuer: nil,
            provider: "example")
        #expect(outcome == .code("abc12345"))
        let prompts = pastes.prompts.value
        #expect(prompts.count == 3)
        #expect(prompts[0].contains("http://127.0.0.1:5555/callback?"), "\(prompts[0])")
        #expect(prompts[1].contains("spaces or control characters") && prompts[1].contains("4 tries left"))
        #expect(prompts[2].contains("'state' did not match") && prompts[2].contains("3 tries left"))
    }

    @Test("the input ending cancels the login (userCancelled); too many refused pastes fail with the last refusal")
    func endAndBound() async throws {
        let ended = ScriptedPastes(["garbage line", nil])
        await #expect {
            _ = try await PastedRedirect.receive(
                from: ended, redirectURI: Self.redirectURI, expectedState: Self.state, expectedIssuer: nil,
                provider: "example")
        } throws: { ($0 as? AuthError)?.category == .userCancelled }

        let stubborn = ScriptedPastes(Array(repeating: "http://127.0.0.1:5555/callback?code=x&state=nope", count: 9))
        await #expect {
            _ = try await PastedRedirect.receive(
                from: stubborn, redirectURI: Self.redirectURI, expectedState: Self.state, expectedIssuer: nil,
                provider: "example", attempts: 3)
        } throws: { ($0 as? AuthError)?.loginFailedReason == .stateMismatch }
        #expect(stubborn.prompts.value.count == 3)
    }

    static func flow(
        _ authorization: TinyAuthorizationServer, opener: any BrowserOpener, pastes: ScriptedPastes
    ) -> BrowserLoginFlow {
        BrowserLoginFlow(
            dialect: OAuth2BrowserDialect(
                provider: "example", errorTaxonomy: PlainTaxonomy(), authorizationEndpoint: authorization.authorizeURL,
                tokenEndpoint: authorization.tokenURL, clientID: "app-1"),
            receiver: LoopbackRedirectReceiver(appName: "Example", pasteSource: pastes),
            opener: opener, transport: LoopbackTransport())
    }

    /// A login against a server that behaves as `behaviour` says, opened by a browser on another
    /// machine, running until pastes end it.
    static func remoteLogin(
        _ behaviour: TinyAuthorizationServer.Behaviour
    ) throws -> (
        login: Task<AccessToken, any Error>, server: TinyAuthorizationServer, browser: RemoteBrowser,
        pastes: ScriptedPastes
    ) {
        let authorization = try TinyAuthorizationServer(behaviour)
        let browser = RemoteBrowser()
        let pastes = ScriptedPastes()
        let login = Task {
            try await flow(authorization, opener: browser, pastes: pastes).logIn(
                LoginRequest(provider: "example", appID: "app-1", permissions: [.read("email")]))
        }
        return (login, authorization, browser, pastes)
    }

    @Test("a browser on another machine: its redirect address pasted, after a forged one, ends the login with PKCE")
    func pastedLogin() async throws {
        let (login, authorization, browser, pastes) = try Self.remoteLogin(.approve)
        let redirect = try await browser.redirect()
        #expect(redirect.hasPrefix("http://127.0.0.1:"))
        let forged = redirect.replacing(#/state=[^&]+/#, with: "state=forged")
        pastes.add(forged)
        pastes.add(redirect)
        let token = try await login.value
        #expect(token.tokenString.hasPrefix("token-for-"))
        #expect(pastes.prompts.value.count == 2)
        #expect(pastes.prompts.value[1].contains("did not match"))
        #expect(authorization.requests == ["GET /authorize", "POST /token"])
        await authorization.server.stop()
    }

    @Test("a declined sign-in pasted back is the provider's refusal (userCancelled), not a paste error")
    func pastedRefusal() async throws {
        let (login, authorization, browser, pastes) = try Self.remoteLogin(.deny)
        pastes.add(try await browser.redirect())
        await #expect {
            _ = try await login.value
        } throws: { error in
            guard let error = error as? AuthError else { return false }
            return error.category == .userCancelled && error.loginFailedReason != .malformedRedirect
        }
        #expect(pastes.prompts.value.count == 1)
        await authorization.server.stop()
    }

    @Test("a browser on this machine still answers the listener first, and the paste prompt is then stopped")
    func listenerWins() async throws {
        let authorization = try TinyAuthorizationServer(.approve)
        let browser = FollowingBrowser()
        let pastes = ScriptedPastes()
        let token = try await Self.flow(authorization, opener: browser, pastes: pastes).logIn(
            LoginRequest(provider: "example", appID: "app-1"))
        #expect(token.tokenString.hasPrefix("token-for-"))
        // The receiver awaited the paste reading's end before returning.
        #expect(pastes.cancelledReads.value == 1)
        #expect(try await browser.lastVisits().last?.body.contains("You are signed in") == true)
        await authorization.server.stop()
    }
}

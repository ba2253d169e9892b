import Foundation
import Sesame
import SesameTestSupport
import Testing

@Suite("OAuth primitives")
struct OAuthTests {
    @Test("PKCE S256 matches RFC 7636 appendix B")
    func rfc7636Vector() throws {
        let pkce = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pkce.method == "S256")
        #expect(!pkce.description.contains(pkce.verifier))
    }

    @Test("generated verifiers are 43 unreserved characters and differ each time")
    func generatedVerifier() throws {
        let a = try PKCE.generate()
        let b = try PKCE.generate()
        #expect(a.verifier.count == 43)
        #expect(a.verifier != b.verifier)
        #expect(try PKCE(verifier: a.verifier).challenge == a.challenge)
    }

    @Test(
        "a verifier outside RFC 7636's alphabet or length is refused",
        arguments: ["short", String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "+"])
    func badVerifier(_ verifier: String) {
        #expect(throws: AuthError.self) { try PKCE(verifier: verifier) }
    }

    @Test("SHA-256 and HMAC-SHA256 match their published test vectors")
    func digests() {
        #expect(
            Crypto.sha256(Data("abc".utf8)).map { String(format: "%02x", $0) }.joined()
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 4231 test case 2.
        #expect(
            Crypto.hmacSHA256(key: Data("Jefe".utf8), data: Data("what do ya want for nothing?".utf8))
                .map { String(format: "%02x", $0) }.joined()
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("base64url round-trips without padding", arguments: [0, 1, 2, 3, 31, 32, 33])
    func base64url(_ count: Int) throws {
        let bytes = try Crypto.randomBytes(count: count)
        let text = Base64URL.encode(bytes)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(Base64URL.decode(text) == bytes)
    }

    @Test("the authorization URL carries every parameter, form-encoded")
    func authorizationURL() throws {
        let pkce = try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        let url = OAuth.authorizationURL(
            endpoint: URL(string: "https://www.facebook.com/v19.0/dialog/oauth")!, clientID: "1234",
            redirectURI: URL(string: "http://127.0.0.1:5000/callback")!, scopes: ["email", "public_profile"],
            state: "s t&ate", pkce: pkce, scopeSeparator: ",", extraParameters: [("auth_type", "rerequest")])
        let items = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems)
        let query = Dictionary(uniqueKeysWithValues: items.map { ($0.name, $0.value ?? "") })
        #expect(query["client_id"] == "1234")
        #expect(query["redirect_uri"] == "http://127.0.0.1:5000/callback")
        #expect(query["response_type"] == "code")
        #expect(query["state"] == "s t&ate")
        #expect(query["scope"] == "email,public_profile")
        #expect(query["code_challenge"] == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(query["code_challenge_method"] == "S256")
        #expect(query["auth_type"] == "rerequest")
    }

    @Test("a redirect with a code and the right state yields the code")
    func redirectSuccess() throws {
        let url = URL(string: "http://127.0.0.1:5000/callback?code=AQD-code&state=xyz")!
        #expect(try OAuth.parseRedirect(url, expectedState: "xyz") == .code("AQD-code"))
    }

    @Test("a user-denied redirect yields the OAuth error, classified as userCancelled")
    func redirectDenied() throws {
        let url = URL(
            string: "http://127.0.0.1:5000/callback?error=access_denied&error_code=200"
                + "&error_description=Permissions+error&error_reason=user_denied&state=xyz")!
        let outcome = try OAuth.parseRedirect(url, expectedState: "xyz")
        guard case .error(let error) = outcome else {
            Issue.record("expected an error outcome, got \(outcome)")
            return
        }
        #expect(error.error == "access_denied")
        #expect(error.additionalParameters == ["error_reason": "user_denied", "error_code": "200"])
        #expect(error.errorDescription == "Permissions error")
        let classified = NeutralTaxonomy().classifyLoginError(error)
        #expect(classified.category == .userCancelled)
        #expect(classified.loginFailedReason == .userDenied)
        #expect(classified.recoveryTactic == RecoveryTactic.none)
    }

    @Test("a missing state is refused as a possible CSRF")
    func redirectMissingState() {
        let error = #expect(throws: AuthError.self) {
            try OAuth.parseRedirect(URL(string: "http://127.0.0.1/callback?code=abc")!, expectedState: "xyz")
        }
        #expect(error?.loginFailedReason == .stateMismatch)
        #expect(error?.message.contains("cross-site request forgery") == true)
    }

    @Test("a mismatched state is refused even when the redirect carries a code")
    func redirectMismatchedState() {
        let error = #expect(throws: AuthError.self) {
            try OAuth.parseRedirect(URL(string: "http://127.0.0.1/callback?code=abc&state=evil")!, expectedState: "xyz")
        }
        #expect(error?.loginFailedReason == .stateMismatch)
        #expect(error?.message.contains("did not match") == true)
    }

    /// (query, iss required, accepted): the RFC 9207 issuer check on a login redirect.
    static let issuerCases: [(String, Bool, Bool)] = [
        ("code=abc&state=xyz&iss=https%3A%2F%2Fid.example", false, true),
        ("code=abc&state=xyz&iss=https%3A%2F%2Fid.example", true, true),
        ("code=abc&state=xyz&iss=https%3A%2F%2Fevil.example", false, false),
        ("code=abc&state=xyz&iss=https%3A%2F%2Fid.example%2F", false, false),  // compared without normalising
        ("code=abc&state=xyz", false, true),
        ("code=abc&state=xyz", true, false),
        ("error=access_denied&state=xyz&iss=https%3A%2F%2Fevil.example", false, false),  // errors are checked too
    ]

    @Test(
        "a redirect's iss must be the issuer when present, and present when the provider promises it",
        arguments: issuerCases)
    func redirectIssuer(query: String, required: Bool, accepted: Bool) throws {
        let url = try #require(URL(string: "http://127.0.0.1/callback?" + query))
        let expected = AuthorizationResponseIssuer(issuer: "https://id.example", required: required)
        if accepted {
            #expect(throws: Never.self) {
                try OAuth.parseRedirect(url, expectedState: "xyz", expectedIssuer: expected, provider: "oidc")
            }
        } else {
            let error = #expect(throws: AuthError.self) {
                try OAuth.parseRedirect(url, expectedState: "xyz", expectedIssuer: expected, provider: "oidc")
            }
            #expect(error?.loginFailedReason == .issuerMismatch)
            #expect(error?.message.contains("RFC 9207 issuer check") == true)
            #expect(error?.details(as: IssuerCheckFailure.self)?.json["check"]?.stringValue == "issuer")
        }
    }

    @Test("without an expected issuer, iss is not looked at")
    func redirectIssuerUnchecked() throws {
        let url = try #require(
            URL(string: "http://127.0.0.1/callback?code=abc&state=xyz&iss=https%3A%2F%2Fevil.example"))
        #expect(try OAuth.parseRedirect(url, expectedState: "xyz") == .code("abc"))
    }

    @Test(
        "garbage redirects are errors, never codes",
        arguments: [
            "http://127.0.0.1/callback", "http://127.0.0.1/callback?state=xyz", "http://127.0.0.1/cb?%%%&&==&state=xyz",
        ])
    func redirectGarbage(_ text: String) throws {
        let url = try #require(URL(string: text) ?? URL(string: text.replacingOccurrences(of: "%%%", with: "%25")))
        #expect(throws: AuthError.self) { try OAuth.parseRedirect(url, expectedState: "xyz") }
    }

    @Test("form encoding round-trips reserved characters and spaces")
    func formEncoding() {
        let items = [("a b", "c&d=e"), ("emoji", "✓"), ("empty", "")]
        let decoded = FormEncoding.decode(FormEncoding.encode(items))
        #expect(decoded.map(\.0) == items.map(\.0))
        #expect(decoded.map(\.1) == items.map(\.1))
        #expect(FormEncoding.decode("a=1+2&b=%2B").map(\.1) == ["1 2", "+"])
    }

    @Test("form decoding gives what Foundation's percent-decoding gives, on random and broken input")
    func formDecodingMatchesFoundation() {
        /// The decoding as it was written with Foundation, before it was done byte by byte.
        func foundationDecode(_ text: String) -> [(String, String)] {
            text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func unescape(_ s: Substring) -> String {
                    let spaced = s.replacingOccurrences(of: "+", with: " ")
                    return spaced.removingPercentEncoding ?? spaced
                }
                return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
            }
        }
        let pieces = [
            "%", "%2", "%2B", "%e2%9c%93", "%E2%9C", "%zz", "%00", "+", "=", "&", "a", "Z9", "é", "✓", " ", "%C3%A9",
            "%ff",
        ]
        var generator = SeededGenerator(seed: 3986)
        for _ in 0..<3_000 {
            let text = (0..<Int.random(in: 0...8, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }
            .joined()
            let ours = FormEncoding.decode(text)
            let theirs = foundationDecode(text)
            #expect(ours.map(\.0) == theirs.map(\.0), "\(text.debugDescription)")
            #expect(ours.map(\.1) == theirs.map(\.1), "\(text.debugDescription)")
            #expect(FormEncoding.percentDecoded(text) == text.removingPercentEncoding, "\(text.debugDescription)")
        }
    }

    @Test(
        "query items are appended after any query and before any fragment",
        arguments: [
            ("https://g.example/v19.0/me", "https://g.example/v19.0/me?a=1&b=x%20y"),
            ("https://g.example/me?fields=id", "https://g.example/me?fields=id&a=1&b=x%20y"),
            ("https://g.example/me?", "https://g.example/me?a=1&b=x%20y"),
            ("https://g.example/me?x=1&", "https://g.example/me?x=1&a=1&b=x%20y"),
            ("https://g.example/me#top", "https://g.example/me?a=1&b=x%20y#top"),
            ("https://g.example/me?x=1#frag?ment", "https://g.example/me?x=1&a=1&b=x%20y#frag?ment"),
            ("https://g.example/caf%C3%A9", "https://g.example/caf%C3%A9?a=1&b=x%20y"),
        ])
    func appendingQuery(base: String, expected: String) throws {
        let url = try #require(URL(string: base))
        #expect(OAuth.appendingQuery([("a", "1"), ("b", "x y")], to: url).absoluteString == expected)
        #expect(OAuth.appendingQuery([], to: url) == url)
    }

    @Test("form escaping is Foundation's percent-encoding of all but the unreserved characters, byte for byte")
    func formEscapingMatchesFoundation() {
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = Array("aZ09-._~ !\"#$%&'()*+,/:;<=>?@[\\]^`{|}\n\t\u{0}é✓€𝄞👩‍👩‍👧ß")
        var samples = ["", "plain", "a b&c=d", "100%", "é", "\u{7F}\u{80}", "👩‍👩‍👧"]
        for _ in 0..<500 {
            samples.append(
                String((0..<Int.random(in: 0...24, using: &generator)).map { _ in alphabet.randomElement()! }))
        }
        for sample in samples {
            #expect(FormEncoding.escape(sample) == sample.addingPercentEncoding(withAllowedCharacters: unreserved))
        }
        #expect(FormEncoding.encode([("k 1", "v/2"), ("", ""), ("x", "✓")]) == "k%201=v%2F2&=&x=%E2%9C%93")
    }
}

/// The core's default taxonomy behaviour, with no provider rules.
struct NeutralTaxonomy: ErrorTaxonomy {
    var provider: ProviderID { "neutral" }
    func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        AuthError(category: status >= 500 ? .server : .badRequest, message: "HTTP \(status)", httpStatus: status)
    }
}

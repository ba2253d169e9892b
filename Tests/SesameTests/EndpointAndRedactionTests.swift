import Foundation
import Sesame
import SesameTestSupport
import Testing

@Suite("Endpoint security and redaction of known secrets")
struct EndpointAndRedactionTests {
    @Test(
        "loopback hosts are recognised, others are not",
        arguments: [
            ("localhost", true), ("LOCALHOST", true), ("app.localhost", true), ("127.0.0.1", true),
            ("127.8.9.10", true), ("::1", true), ("[::1]", true), ("0:0:0:0:0:0:0:1", true),
            ("128.0.0.1", false), ("localhost.example.com", false), ("127.0.0.1.nip.io", false), ("::2", false),
            ("example.com", false), ("", false), ("10.0.0.1", false),
            // Dotted quads at the edges (read from the bytes, without copying).
            ("127.0.0.1.", true), ("127.255.255.255", true), ("127.0.0.256", false), ("127.0.0", false),
            ("127.0.0.1.1", false), ("127..0.1", false), ("1127.0.0.1", false), ("127.0.0.1x", false),
            ("0.0.0.0", false), ("126.255.255.255", false), ("127.000.000.001", true),
        ])
    func loopback(host: String, expected: Bool) {
        #expect(EndpointSecurity.isLoopback(host) == expected)
    }

    @Test("https passes, http only to loopback or a host named by the user, other schemes never")
    func check() throws {
        try EndpointSecurity.check(URL(string: "https://idp.example.com")!, role: "The issuer", provider: nil)
        try EndpointSecurity.check(URL(string: "http://127.0.0.1:9/x")!, role: "The issuer", provider: nil)
        let error = try #require(throws: AuthError.self) {
            try EndpointSecurity.check(
                URL(string: "http://idp.example.com/x?secret=1")!, role: "The issuer",
                provider: ProviderID(rawValue: "oidc"))
        }
        #expect(error.category == .invalid)
        #expect(error.message.contains("idp.example.com") && !error.message.contains("secret=1"))
        try EndpointSecurity.check(
            URL(string: "http://idp.example.com")!, role: "The issuer", provider: nil,
            allowingInsecureHosts: ["IDP.example.com"])
        #expect(throws: AuthError.self) {
            try EndpointSecurity.check(URL(string: "ftp://idp.example.com")!, role: "The issuer", provider: nil)
        }
    }

    @Test("a known secret is redacted wherever it appears: raw, percent-encoded, form-encoded, in JSON")
    func knownSecret() {
        let secret = "tok-en_with/odd+chars=="
        let text =
            "a \(secret) b \(secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!) c "
            + FormEncoding.encode([("x", secret)])
        let redacted = Redaction.redacting([secret], in: text)
        #expect(!redacted.contains("en_with"), "\(redacted)")
        #expect(!redacted.contains("en%5Fwith") && !redacted.contains("en_with"))
        #expect(redacted.components(separatedBy: Redaction.placeholder).count == 4)
        // Too short to be a token: left alone, rather than blanking every "ab".
        #expect(Redaction.redacting(["ab"], in: "abc") == "abc")

        let error = AuthError(
            category: .invalid, message: "bad \(secret)", userTitle: secret, userMessage: "see \(secret)",
            body: .object(["error": .object(["message": .string("echo \(secret)"), secret: .bool(true)])]),
            details: [IssuerCheckFailure(expectedIssuer: "x", receivedIssuer: secret)]
        ).redacting([secret])
        for text in [
            error.message, error.userTitle!, error.userMessage!, error.body!.jsonText,
            error.details.map(\.json.jsonText).joined(),
        ] {
            #expect(!text.contains("en_with"), "\(text)")
        }
    }

    @Test("property: redaction removes a random secret from random text around it")
    func redactionProperty() {
        var generator = SeededGenerator(seed: 8)
        let alphabet = Array("abcXYZ019-_.~+/=%& \n\"")
        for _ in 0..<200 {
            let secret = String(
                (0..<Int.random(in: 8...40, using: &generator)).map { _ in
                    alphabet.randomElement(using: &generator)!
                })
            let noise = { (generator: inout SeededGenerator) in
                String(
                    (0..<Int.random(in: 0...20, using: &generator)).map { _ in
                        alphabet.randomElement(using: &generator)!
                    })
            }
            let text = noise(&generator) + secret + noise(&generator) + secret + noise(&generator)
            #expect(!Redaction.redacting([secret], in: text).contains(secret), "\(secret.debugDescription)")
        }
    }
}

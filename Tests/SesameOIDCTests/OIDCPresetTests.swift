import Foundation
import Sesame
import SesameOIDC
import Testing

@Suite("The OpenID presets fill their issuer with a tenant or host, and nothing else")
struct OIDCPresetTests {
    @Test(
        "a tenant or host goes into the issuer; consumers is its tenant id; anything that would change the URL is refused",
        arguments: [
            ("microsoft", nil, "https://login.microsoftonline.com/common/v2.0"),
            ("microsoft", "organizations", "https://login.microsoftonline.com/organizations/v2.0"),
            ("microsoft", "consumers", "https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0"),
            (
                "microsoft", "5b7e1d2a-3c4f-4a6b-8d9e-0f1a2b3c4d5e",
                "https://login.microsoftonline.com/5b7e1d2a-3c4f-4a6b-8d9e-0f1a2b3c4d5e/v2.0"
            ),
            ("microsoft", "evil.example/x", nil), ("microsoft", "a?b", nil), ("microsoft", "", nil),
            ("gitlab", nil, "https://gitlab.com"), ("gitlab", "gitlab.example.com", "https://gitlab.example.com"),
            ("gitlab", "gitlab.example.com:8443", "https://gitlab.example.com:8443"),
            ("gitlab", "x@evil.example", nil), ("google", nil, "https://accounts.google.com"),
        ] as [(String, String?, String?)])
    func issuer(preset name: String, part: String?, expected: String?) throws {
        let preset = try #require(OIDCPreset.all.first { $0.name == name })
        #expect((try? preset.issuer(part: part)) == expected)
    }

    @Test("google asks offline access with consent and its secret is public; microsoft asks offline_access")
    func parameters() throws {
        let google = try OIDCPreset.google.configuration(clientID: "id.apps.googleusercontent.com")
        #expect(
            google.extraAuthorizationParameters.map { "\($0.0)=\($0.1)" } == ["access_type=offline", "prompt=consent"])
        #expect(OIDCPreset.google.clientSecretIsPublic)
        #expect(OIDCPreset.microsoft.scopes.contains("offline_access"))
        #expect(!OIDCPreset.microsoft.clientSecretIsPublic)
    }
}

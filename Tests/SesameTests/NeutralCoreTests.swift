import Foundation
import Sesame
import Testing

/// A provider's own login option, as a provider module would declare one.
private enum ColourOption: LoginOptionKey {
    static let defaultValue = "none"
}

/// Another, to show that keys do not mix.
private enum AttemptOption: LoginOptionKey {
    static let defaultValue = 0
}

/// A token record as Sesame wrote it before provider extras existed: Facebook's data-access
/// expiry at the top level, dates in Foundation's default encoding (seconds since 2001).
private let oldRecord = """
    {"key":{"account":"alice","appID":"1234","provider":"facebook"},"needsLogin":false,"savedAt":800000000,\
    "token":{"appID":"1234","dataAccessExpirationDate":926692800.5,"expirationDate":921692800.25,\
    "permissions":{"declined":[],"granted":["email"]},"provider":"facebook","refreshDate":821692800.125,\
    "tokenString":"EAAB-old-secret","userID":"100001"}}
    """

@Suite("A provider-neutral core")
struct NeutralCoreTests {
    @Test("a token stored before provider extras existed still reads, its data-access expiry kept as an extra")
    func oldRecordReads() throws {
        let credential = try JSONDecoder().decode(StoredCredential.self, from: Data(oldRecord.utf8))
        #expect(credential.token.tokenString == "EAAB-old-secret")
        #expect(credential.token.userID == "100001")
        #expect(credential.token.expirationDate == Date(timeIntervalSince1970: 1_900_000_000.25))
        #expect(credential.token.providerExtras == ["data_access_expires_at": .number(1_905_000_000.5)])
    }

    @Test("a token file written before provider extras existed loads through the file store")
    func oldFileLoads() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-old-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("credentials.json")
        #expect(
            FileManager.default.createFile(
                atPath: url.path, contents: Data(#"{"version":1,"credentials":[\#(oldRecord)]}"#.utf8),
                attributes: [.posixPermissions: 0o600]))
        let loaded = try #require(
            try await FileCredentialStore(url: url).load(
                CredentialKey(provider: "facebook", appID: "1234", account: "alice")))
        #expect(loaded.token.providerExtras["data_access_expires_at"] == .number(1_905_000_000.5))
    }

    @Test("a token is written with its extras under one key, and without the old top-level field")
    func extrasAreWrittenOnce() throws {
        var token = AccessToken(tokenString: "t", provider: "facebook", appID: "1")
        let plain = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(token))
        #expect(plain["providerExtras"] == nil)
        token.providerExtras["data_access_expires_at"] = .number(1_905_000_000.5)
        let written = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(token))
        #expect(written["providerExtras"] == .object(["data_access_expires_at": .number(1_905_000_000.5)]))
        #expect(written["dataAccessExpirationDate"] == nil)
        #expect(try JSONDecoder().decode(AccessToken.self, from: JSONEncoder().encode(token)) == token)
    }

    @Test("an unset login option reads as its default, and one set to its default counts as unset")
    func loginOptionDefaults() {
        var options = LoginRequest.Options()
        #expect(options[ColourOption.self] == "none")
        #expect(options[AttemptOption.self] == 0)
        options[ColourOption.self] = "blue"
        #expect(options[ColourOption.self] == "blue")
        #expect(options[AttemptOption.self] == 0)
        #expect(options != LoginRequest.Options())
        options[ColourOption.self] = "none"
        #expect(options == LoginRequest.Options())
        #expect(options.hashValue == LoginRequest.Options().hashValue)
    }

    @Test("login options are equal when every key has the same value, whatever order they were set in")
    func loginOptionEquality() {
        var first = LoginRequest.Options()
        first[ColourOption.self] = "red"
        first[AttemptOption.self] = 2
        var second = LoginRequest.Options()
        second[AttemptOption.self] = 2
        second[ColourOption.self] = "red"
        #expect(first == second)
        #expect(Set([first, second]).count == 1)
        second[AttemptOption.self] = 3
        #expect(first != second)
    }

    @Test("a permission kind a provider adds round-trips as its name, as the old enum wrote it")
    func permissionKindCoding() throws {
        let old = #"{"name":"publish_actions","kind":"publish"}"#
        let permission = try JSONDecoder().decode(Permission.self, from: Data(old.utf8))
        #expect(permission.kind == Permission.Kind(rawValue: "publish"))
        #expect(permission.kind != .read)
        let written = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(Permission.read("email")))
        #expect(written["kind"] == .string("read"))
    }

    @Test("an OAuth error keeps the provider's own redirect parameters, but not state, iss or code")
    func oauthErrorKeepsExtras() throws {
        let url = URL(
            string: "http://127.0.0.1:5000/callback?error=access_denied&error_subcode=7&iss=https://a.example"
                + "&state=xyz&error_uri=https://a.example/e")!
        let outcome = try OAuth.parseRedirect(url, expectedState: "xyz")
        guard case .error(let error) = outcome else {
            Issue.record("expected an error outcome, got \(outcome)")
            return
        }
        #expect(error.additionalParameters == ["error_subcode": "7"])
        #expect(error.errorURI == "https://a.example/e")
        let body = JSONValue(parsing: Data(#"{"error":"invalid_grant","error_code":190,"hint":"x","nested":{}}"#.utf8))
        #expect(OAuthErrorResponse(json: body)?.additionalParameters == ["error_code": "190", "hint": "x"])
    }
}

import Foundation
import Sesame
import Testing

@testable import SesameKeyring

/// How a credential is laid out in a keyring item, and what Sesame makes of items it finds.
/// No keyring needed: items are built as libsecret would return them.
@Suite("KeyringItemFormat")
struct KeyringItemFormatTests {
    static let key = CredentialKey(provider: "facebook", appID: "1234", account: "alice")

    static func item(
        secret: String?, attributes: [String: String]? = nil,
        modified: Date = Date(timeIntervalSince1970: 1_700_000_000)
    )
        -> KeyringItem
    {
        // By default, the layout of schema_version 1 (the secret as it is), as items stored by hand.
        var all = attributes ?? KeyringItemFormat.attributes(for: key).merging(["schema_version": "1"]) { $1 }
        all["xdg:schema"] = "org.sesame.Credential"
        return KeyringItem(
            path: "/org/freedesktop/secrets/collection/login/1", label: KeyringItemFormat.label(for: key),
            attributes: all, isLocked: false, modified: modified, secret: secret.map { Array($0.utf8) })
    }

    @Test("the attributes identify the credential and hold nothing secret")
    func attributes() {
        #expect(
            KeyringItemFormat.attributes(for: Self.key) == [
                "provider": "facebook", "app_id": "1234", "account": "alice", "schema_version": "2",
            ])
        #expect(KeyringItemFormat.label(for: Self.key) == "Sesame: facebook (app 1234) — alice")
    }

    @Test("the parser's reading of the JSON Sesame writes is JSONDecoder's, for random credentials")
    func writtenShapeMatchesJSONDecoder() throws {
        var generator = SystemRandomNumberGenerator()
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { Bool.random(using: &generator) ? value() : nil }
        func text() -> String {
            let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "é", "😀", "\n", "/"]
            return String((0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement()! })
        }
        func date() -> Date { Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &generator)) }
        let decoder = JSONDecoder()
        for _ in 0..<300 {
            var extras: [String: JSONValue] = [:]
            if Bool.random(using: &generator) {
                extras = [
                    AccessToken.dataAccessExpiryExtra: .number(Double(Int.random(in: 0...2_000_000_000))),
                    text(): .array([.bool(true), .null, .string(text()), .number(0.1)]),
                ]
            }
            let provider = ProviderID(text())
            let token = AccessToken(
                tokenString: text(), provider: provider, appID: text(), userID: maybe(text()),
                permissions: PermissionSet(granted: (0..<3).map { _ in text() }, declined: maybe([text()]) ?? []),
                expirationDate: maybe(date()), refreshDate: date(), refreshToken: maybe(text()),
                idToken: maybe(text()), providerExtras: extras)
            let credential = StoredCredential(
                key: CredentialKey(provider: provider, appID: token.appID, account: text()), token: token,
                savedAt: date(), needsLogin: Bool.random(using: &generator))
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let data = try encoder.encode(credential)
            let parsed = try #require(KeyringItemFormat.decodeWritten(data), "\(String(decoding: data, as: UTF8.self))")
            #expect(parsed == (try decoder.decode(StoredCredential.self, from: data)))
            #expect(parsed == credential)
        }
    }

    @Test(
        "shapes Sesame does not write are left to JSONDecoder",
        arguments: [
            // An ISO 8601 date, as a person writes one; an AccessToken alone; a missing field; a wrong type.
            #"{"key":{"provider":"f","appID":"1","account":"a"},"needsLogin":false,"savedAt":"2024-01-01T00:00:00Z","token":{"tokenString":"t","provider":"f","appID":"1","refreshDate":0,"permissions":{"granted":[],"declined":[]}}}"#,
            #"{"tokenString":"t","provider":"f","appID":"1","refreshDate":0,"permissions":{"granted":[],"declined":[]}}"#,
            #"{"key":{"provider":"f","appID":"1","account":"a"},"savedAt":0,"token":{"tokenString":"t","provider":"f","appID":"1","refreshDate":0,"permissions":{"granted":[],"declined":[]}}}"#,
            #"{"key":{"provider":"f","appID":"1","account":"a"},"needsLogin":false,"savedAt":0,"token":{"tokenString":"t","provider":"f","appID":"1","refreshDate":0,"userID":7,"permissions":{"granted":[],"declined":[]}}}"#,
        ])
    func otherShapesFallBack(_ json: String) {
        #expect(KeyringItemFormat.decodeWritten(Data(json.utf8)) == nil)
    }

    @Test("an old record's top-level dataAccessExpirationDate is read into the extras, as JSONDecoder reads it")
    func legacyDataAccessDate() throws {
        let json =
            #"{"key":{"provider":"f","appID":"1","account":"a"},"needsLogin":false,"savedAt":5,"#
            + #""token":{"tokenString":"t","provider":"f","appID":"1","refreshDate":0,"userID":null,"#
            + #""dataAccessExpirationDate":100,"permissions":{"granted":["b","a"],"declined":["a"]}}}"#
        let parsed = try #require(KeyringItemFormat.decodeWritten(Data(json.utf8)))
        #expect(parsed == (try JSONDecoder().decode(StoredCredential.self, from: Data(json.utf8))))
        #expect(parsed.token.providerExtras[AccessToken.dataAccessExpiryExtra] == .number(978_307_300))
        // As stored: a name in both lists stays in both.
        #expect(parsed.token.permissions.granted == ["a", "b"])
    }

    @Test("the secret Sesame writes reads back as the same credential")
    func roundTrip() throws {
        let token = AccessToken(
            tokenString: "EAAB", provider: "facebook", appID: "1234", userID: "7",
            permissions: PermissionSet(granted: ["email"], declined: ["user_posts"]),
            expirationDate: Date(timeIntervalSinceReferenceDate: 800_000_000.123456), refreshToken: "r")
        let credential = StoredCredential(key: Self.key, token: token, needsLogin: true)
        let secret = try KeyringItemFormat.secret(for: credential)
        let item = KeyringItem(
            path: "/p", label: "l", attributes: KeyringItemFormat.attributes(for: Self.key), isLocked: false,
            modified: Date(), secret: secret)
        #expect(try KeyringItemFormat.credential(from: item).get() == credential)
    }

    /// Values that KeePassXC would take for placeholders and resolve, or refuse, in a secret.
    static let placeholders = [
        "{REF:P@I:46C9B1FFBD4ABC4BBB260C6190BAD20C}", "{USERNAME}", "{PASSWORD}", "tok{REF:T@I:x}en", "{{S:x}}",
    ]

    @Test("the secret Sesame writes has no braces, and values that look like placeholders come back as they were")
    func placeholdersRoundTrip() throws {
        for value in Self.placeholders {
            let key = CredentialKey(provider: "facebook", appID: "1234", account: value)
            let token = AccessToken(tokenString: value, provider: "facebook", appID: "1234", refreshToken: value)
            let credential = StoredCredential(key: key, token: token)
            let secret = try KeyringItemFormat.secret(for: credential)
            #expect(!secret.contains(UInt8(ascii: "{")) && !secret.contains(UInt8(ascii: "}")), "\(value)")
            let item = KeyringItem(
                path: "/p", label: "l", attributes: KeyringItemFormat.attributes(for: key), isLocked: false,
                modified: Date(), secret: secret)
            #expect(try KeyringItemFormat.credential(from: item).get() == credential, "\(value)")
        }
    }

    @Test("an item of the first layout (schema_version 1: the JSON itself) is still read")
    func firstLayout() throws {
        let token = AccessToken(tokenString: "EAAB", provider: "facebook", appID: "1234", userID: "7")
        let credential = StoredCredential(key: Self.key, token: token)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = String(decoding: try encoder.encode(credential), as: UTF8.self)
        #expect(try KeyringItemFormat.credential(from: Self.item(secret: json)).get() == credential)
    }

    @Test("a bare token stored by hand reads as a token for the item's provider and app")
    func bareToken() throws {
        let modified = Date(timeIntervalSince1970: 1_700_000_000)
        let credential = try KeyringItemFormat.credential(from: Self.item(secret: "  EAABtoken\n", modified: modified))
            .get()
        #expect(credential.key == Self.key)
        #expect(credential.token.tokenString == "EAABtoken")
        #expect(credential.token.refreshDate == modified)
        #expect(credential.savedAt == modified)
    }

    @Test("an item without schema_version is read as version 1")
    func missingVersion() throws {
        var attributes = KeyringItemFormat.attributes(for: Self.key)
        attributes["schema_version"] = nil
        #expect(throws: Never.self) {
            try KeyringItemFormat.credential(from: Self.item(secret: "t", attributes: attributes)).get()
        }
    }

    /// Secrets and attributes that are not a credential, with words the report must contain.
    static let unreadable: [(name: String, secret: String?, attributes: [String: String]?, reportSays: String)] = [
        ("empty secret", "   ", nil, "is empty"),
        ("truncated JSON", "{\"tokenString\": \"SECRET\"", nil, "not valid JSON"),
        ("JSON of another shape", "{\"password\": \"SECRET\"}", nil, "missing 'tokenString'"),
        ("two words", "SECRET and more", nil, "neither JSON nor a single token"),
        ("no secret", nil, nil, "could not be read"),
        (
            "token of another app",
            "{\"tokenString\":\"SECRET\",\"provider\":\"facebook\",\"appID\":\"999\","
                + "\"permissions\":{\"granted\":[],\"declined\":[]},\"refreshDate\":0}", nil, "app 999"
        ),
        ("no account attribute", "SECRET", ["provider": "facebook", "app_id": "1234"], "no 'account' attribute"),
        (
            "bad schema_version", "SECRET",
            ["provider": "facebook", "app_id": "1234", "account": "alice", "schema_version": "x"],
            "not a version number"
        ),
        (
            "schema_version 2 but not base64", "{SECRET}",
            ["provider": "facebook", "app_id": "1234", "account": "alice", "schema_version": "2"], "is not base64"
        ),
        (
            "newer schema_version", "SECRET",
            ["provider": "facebook", "app_id": "1234", "account": "alice", "schema_version": "9"], "newer Sesame"
        ),
    ]

    @Test("an unreadable item is reported as corrupt, named, and its secret never quoted", arguments: unreadable)
    func unreadableItems(_ name: String, _ secret: String?, _ attributes: [String: String]?, _ reportSays: String) {
        let result = KeyringItemFormat.credential(from: Self.item(secret: secret, attributes: attributes))
        guard case .failure(let error) = result else {
            Issue.record("\(name): read as a credential")
            return
        }
        #expect(error.kind == .corrupt)
        #expect(error.message.contains(reportSays), "\(name): \(error.message)")
        #expect(error.message.contains("“Sesame: facebook (app 1234) — alice”"))
        #expect(!error.message.contains("SECRET"), "\(name): the report quotes the secret")
    }

    @Test("the report of a corrupt item gives the command that removes it, quoted for the shell")
    func removalCommand() {
        let key = CredentialKey(provider: "facebook", appID: "1234", account: "Alice O'Brien")
        var item = Self.item(secret: "{", attributes: KeyringItemFormat.attributes(for: key))
        item.label = KeyringItemFormat.label(for: key)
        guard case .failure(let error) = KeyringItemFormat.credential(from: item) else {
            Issue.record("read as a credential")
            return
        }
        #expect(
            error.message.contains(
                "`secret-tool clear xdg:schema org.sesame.Credential provider facebook app_id 1234 account "
                    + "'Alice O'\\''Brien'`"))
    }
}

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

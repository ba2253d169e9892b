import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameKeyring

/// The store against the keyring of the session the tests run in (scripts/with-keyring gives
/// them a private, unlocked gnome-keyring; scripts/test gives this suite one of its own and runs
/// it one test at a time). Each test uses a provider name of its own, so tests running in
/// parallel never see each other's items.
@Suite(
    "SecretServiceStore against the session's keyring",
    .enabled(if: KeyringTestSupport.keyringPromised, KeyringTestSupport.keyringSkipReason))
struct SecretServiceStoreTests {
    let store = SecretServiceStore(timeout: .seconds(10), unlocking: .never)
    let provider = ProviderID("test-\(UUID().uuidString.prefix(8).lowercased())")

    init() async throws {
        do {
            _ = try await store.status()
        } catch {
            Issue.record("SESAME_TEST_KEYRING=1 promises a Secret Service, but it cannot be reached: \(error)")
            throw error
        }
    }

    func key(_ account: String, app: String = "1234") -> CredentialKey {
        CredentialKey(provider: provider, appID: app, account: account)
    }

    func credential(_ account: String, token: String = "token-\(UUID().uuidString)") -> StoredCredential {
        let key = key(account)
        return StoredCredential(key: key, token: AccessToken(tokenString: token, provider: provider, appID: key.appID))
    }

    func secretTool(_ arguments: [String], input: Data = Data()) async throws -> ProcessResult {
        try await KeyringTestSupport.run("secret-tool", arguments, input: input)
    }

    /// Stores `secret` with Sesame's attributes for `key`, as a person would with secret-tool.
    func storeByHand(_ secret: String, for key: CredentialKey, schemaVersion: String? = "1") async throws {
        var arguments = [
            "store", "--label=Sesame: \(key)", "xdg:schema", "org.sesame.Credential", "provider", key.provider.rawValue,
            "app_id", key.appID, "account", key.account,
        ]
        if let schemaVersion { arguments += ["schema_version", schemaVersion] }
        let output = try await secretTool(arguments, input: Data(secret.utf8))
        try #require(output.status == 0, "secret-tool store failed: \(output.standardError)")
    }

    /// Expects the keyring to hold exactly one item of this suite's provider, whoever wrote it.
    func expectOneItem(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let search = try await secretTool(["search", "--all", "provider", provider.rawValue])
        #expect(
            search.standardOutput.components(separatedBy: "\nlabel = ").count - 1 == 1,
            "items: \(search.standardOutput)", sourceLocation: sourceLocation)
    }

    /// Removes what the test saved (the keyring is a throw-away one, but other tests list it).
    func cleanUp() async {
        _ = try? await secretTool(["clear", "provider", provider.rawValue])
    }

    @Test("every field of a token survives a save and a load")
    func everyFieldRoundTrips() async throws {
        let key = key("alice")
        let token = AccessToken(
            tokenString: "EAAB-\(UUID().uuidString)",
            provider: provider,
            appID: key.appID,
            userID: "10001",
            permissions: PermissionSet(granted: ["email", "public_profile"], declined: ["user_friends"]),
            expirationDate: Date(timeIntervalSinceNow: 3600.125),
            refreshDate: Date(timeIntervalSinceNow: -60.5),
            refreshToken: "refresh-\(UUID().uuidString)",
            idToken: "header.payload.signature",
            providerExtras: [
                "data_access_expires_at": .number(Date(timeIntervalSinceNow: 90 * 86400).timeIntervalSince1970)
            ])
        let saved = StoredCredential(key: key, token: token, savedAt: Date(), needsLogin: true)

        try await store.save(saved)
        let loaded = try #require(try await store.load(key))

        #expect(loaded.key == saved.key)
        #expect(loaded.token.tokenString == token.tokenString)
        #expect(loaded.token.userID == token.userID)
        #expect(loaded.token.permissions == token.permissions)
        #expect(loaded.token.expirationDate == token.expirationDate)
        #expect(loaded.token.providerExtras == token.providerExtras)
        #expect(loaded.token.refreshDate == token.refreshDate)
        #expect(loaded.token.refreshToken == token.refreshToken)
        #expect(loaded.token.idToken == token.idToken)
        #expect(loaded.savedAt == saved.savedAt)
        #expect(loaded.needsLogin)
        #expect(loaded == saved)
        await cleanUp()
    }

    @Test("a credential that was never saved loads as nil")
    func missingIsNil() async throws {
        #expect(try await store.load(key("nobody")) == nil)
    }

    @Test("several accounts are listed, sorted, and filtered by provider")
    func severalAccountsListed() async throws {
        let other = ProviderID("\(provider.rawValue)-other")
        for account in ["carol", "alice", "bob"] { try await store.save(credential(account)) }
        let elsewhere = StoredCredential(
            key: CredentialKey(provider: other, appID: "1", account: "alice"),
            token: AccessToken(tokenString: "t", provider: other, appID: "1"))
        try await store.save(elsewhere)

        let listed = try await store.list(provider: provider)
        #expect(listed.map(\.key) == [key("alice"), key("bob"), key("carol")])

        // Every provider's credentials; other tests, running in parallel, leave unreadable
        // items of their own in the same keyring for a moment, which the listing reports apart.
        let everything = try await store.listing(provider: nil).credentials.map(\.key)
        #expect(Set(everything).isSuperset(of: [key("alice"), key("bob"), key("carol"), elsewhere.key]))
        #expect(everything == everything.sorted())

        try await store.delete(elsewhere.key)
        await cleanUp()
    }

    @Test("containsEntries counts a provider's credentials and unreadable items, and no other provider's")
    func containsEntriesSearchesOnly() async throws {
        let other = ProviderID("\(provider.rawValue)-other")
        #expect(try await store.containsEntries(provider: provider) == false)
        try await store.save(credential("alice"))
        #expect(try await store.containsEntries(provider: provider))
        #expect(try await store.containsEntries(provider: nil))
        #expect(try await store.containsEntries(provider: other) == false, "another provider's login counted")

        // An item that is not a credential is an entry too: the listing reports it.
        let broken = CredentialKey(provider: other, appID: "1", account: "broken")
        try await storeByHand("", for: broken)
        #expect(try await store.containsEntries(provider: other))
        #expect(try await store.listing(provider: other).unreadable.count == 1)

        try await store.delete(key("alice"))
        #expect(try await store.containsEntries(provider: provider) == false, "a deleted login still counted")
        _ = try? await secretTool(["clear", "provider", other.rawValue])
        await cleanUp()
    }

    @Test("saving a credential again replaces it instead of adding an item")
    func overwriteReplaces() async throws {
        let first = credential("alice", token: "first-\(UUID().uuidString)")
        let second = credential("alice", token: "second-\(UUID().uuidString)")
        try await store.save(first)
        try await store.save(second)

        #expect(try await store.load(first.key)?.token.tokenString == second.token.tokenString)
        #expect(try await store.list(provider: provider).count == 1)
        try await expectOneItem()
        await cleanUp()
    }

    @Test("saving replaces a copy written by hand with other attributes")
    func saveReplacesHandWrittenCopy() async throws {
        let key = key("alice")
        try await storeByHand("hand-written-token", for: key, schemaVersion: nil)
        let saved = credential("alice")
        try await store.save(saved)

        #expect(try await store.load(key) == saved)
        try await expectOneItem()
        await cleanUp()
    }

    @Test("an item Sesame is deleting (its secret scrubbed, the item not yet gone) is read as gone, not as corrupt")
    func itemBeingDeletedIsInvisible() async throws {
        // What a reader sees while another process's logout or save scrubs an item: the
        // overwritten secret, on an item newer than any other copy of the credential (a copy
        // with other attributes, which secret-tool stores beside Sesame's item, not over it).
        let kept = credential("alice")
        try await store.save(kept)
        try await storeByHand(
            String(decoding: KeyringItemFormat.scrubbedSecret(round: 3), as: UTF8.self), for: key("alice"),
            schemaVersion: "1")
        try await storeByHand(
            String(decoding: KeyringItemFormat.scrubbedSecret(round: 11), as: UTF8.self), for: key("bob"),
            schemaVersion: "2")

        #expect(try await store.load(key("alice")) == kept)
        #expect(try await store.load(key("bob")) == nil)
        let listing = try await store.listing(provider: provider)
        #expect(listing.credentials.map(\.key) == [key("alice")])
        #expect(listing.unreadable.isEmpty, "\(listing.unreadable.map(\.problem))")
        #expect(try await store.list(provider: provider) == [kept])
        await cleanUp()
    }

    @Test("delete removes one credential and says whether there was one")
    func deleteRemovesOne() async throws {
        try await store.save(credential("alice"))
        try await store.save(credential("bob"))

        #expect(try await store.delete(key("alice")))
        #expect(try await store.load(key("alice")) == nil)
        #expect(try await store.delete(key("alice")) == false)
        #expect(try await store.load(key("bob")) != nil)
        await cleanUp()
    }

    @Test("secret-tool finds what Sesame saved, under a readable label")
    func secretToolFindsSesameItems() async throws {
        let saved = credential("alice")
        try await store.save(saved)

        let search = try await secretTool(["search", "provider", provider.rawValue])
        #expect(search.status == 0)
        #expect(search.standardOutput.contains("label = Sesame: \(provider) (app 1234) — alice"))
        #expect(search.standardOutput.contains("schema = org.sesame.Credential"))
        // secret-tool prints the attributes on standard error.
        #expect(search.standardError.contains("attribute.schema_version = 2"))
        #expect(search.standardError.contains("attribute.app_id = 1234"))

        let lookup = try await secretTool([
            "lookup", "provider", provider.rawValue, "app_id", "1234", "account", "alice",
        ])
        #expect(lookup.status == 0)
        // The secret is the credential's JSON in base64 (`secret-tool lookup … | base64 -d`).
        let json = try #require(Data(base64Encoded: lookup.standardOutput), "the secret is not base64")
        #expect(try JSONDecoder().decode(StoredCredential.self, from: json) == saved)
        await cleanUp()
    }

    /// Secrets a person might store by hand with `secret-tool store`.
    enum HandWritten: String, CaseIterable, CustomTestStringConvertible {
        case bareToken, accessTokenJSON, accessTokenJSONWithISODates, storedCredentialJSON

        var testDescription: String { rawValue }

        func secret(token: String, key: CredentialKey) throws -> String {
            switch self {
            case .bareToken:
                return token + "\n"
            case .accessTokenJSON:
                let value = AccessToken(tokenString: token, provider: key.provider, appID: key.appID, userID: "42")
                return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
            case .accessTokenJSONWithISODates:
                return """
                    {"tokenString": "\(token)", "provider": "\(key.provider)", "appID": "\(key.appID)", "userID": "42",
                     "permissions": {"granted": ["email"], "declined": []},
                     "refreshDate": "2026-01-02T03:04:05Z", "expirationDate": "2026-03-04T05:06:07.250Z"}
                    """
            case .storedCredentialJSON:
                let value = StoredCredential(
                    key: key, token: AccessToken(tokenString: token, provider: key.provider, appID: key.appID))
                return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
            }
        }
    }

    @Test("Sesame reads an item stored by hand with secret-tool", arguments: HandWritten.allCases)
    func sesameReadsSecretToolItems(_ form: HandWritten) async throws {
        let key = key("bob")
        let token = "EAAB-\(UUID().uuidString)"
        try await storeByHand(try form.secret(token: token, key: key), for: key)

        let loaded = try #require(try await store.load(key))
        #expect(loaded.key == key)
        #expect(loaded.token.tokenString == token)
        #expect(loaded.token.provider == provider)
        #expect(loaded.token.appID == key.appID)
        if form == .accessTokenJSONWithISODates {
            #expect(loaded.token.expirationDate == Date(timeIntervalSince1970: 1_772_600_767.25))
        }
        #expect(try await store.list(provider: provider).map(\.key) == [key])
        await cleanUp()
    }

    @Test("an item whose secret is not a credential is reported, and left in place")
    func corruptItemReportedNotDeleted() async throws {
        let key = key("mallory")
        let marker = "SECRET-\(UUID().uuidString)"
        let secret = "{\"tokenString\": \"\(marker)\", "
        try await storeByHand(secret, for: key)

        let error = await #expect(throws: CredentialStoreError.self) { try await store.load(key) }
        #expect(error?.kind == .corrupt)
        #expect(error?.message.contains("Sesame: \(key)") == true)
        #expect(error?.message.contains("secret-tool clear") == true)
        #expect(error?.message.contains(marker) == false, "the message must not quote the secret")

        let listError = await #expect(throws: CredentialStoreError.self) { try await store.list(provider: provider) }
        #expect(listError?.kind == .corrupt)

        let lookup = try await secretTool([
            "lookup", "provider", provider.rawValue, "app_id", key.appID, "account", key.account,
        ])
        #expect(lookup.standardOutput == secret, "the item must still be there, unchanged")
        await cleanUp()
    }

    @Test("an item written by a newer Sesame is reported, not misread")
    func newerSchemaReported() async throws {
        let key = key("future")
        try await storeByHand("{\"from\": \"the future\"}", for: key, schemaVersion: "3")
        let error = await #expect(throws: CredentialStoreError.self) { try await store.load(key) }
        #expect(error?.kind == .corrupt)
        #expect(error?.message.contains("newer Sesame") == true)
        await cleanUp()
    }

    @Test("many tasks saving and loading at once all get their own credential back")
    func concurrentCallsComplete() async throws {
        let accounts = (0..<16).map { "user\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for account in accounts {
                group.addTask {
                    let saved = credential(account)
                    try await store.save(saved)
                    #expect(try await store.load(saved.key) == saved)
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.list(provider: provider).map(\.key.account) == accounts.sorted())
        await cleanUp()
    }

    @Test("status names the default collection and says it is unlocked")
    func statusNamesCollection() async throws {
        let status = try await store.status()
        #expect(status.defaultCollection == KeyringTestSupport.service.defaultCollection)
        #expect(status.isLocked == false)
    }

    @Test("the probe names the program that provides the Secret Service, and its default collection")
    func probeNamesProvider() async throws {
        let info = try await SecretServiceInfo.probe()
        let provider = try #require(info.provider, "nobody owns org.freedesktop.secrets")
        #expect(provider.kind == KeyringTestSupport.service.kind)
        #expect(provider.processID != nil)
        #expect(info.defaultCollection == KeyringTestSupport.service.defaultCollection)
        #expect(info.isLocked == false)
    }

    @Test("values that a Secret Service could take for placeholders come back unaltered")
    func placeholdersSurvive() async throws {
        // KeePassXC resolves `{REF:…}`, `{USERNAME}` and the like in a secret it hands out, and
        // refuses to store a secret holding a reference, keeping an empty one instead.
        for (index, value) in KeyringItemFormatTests.placeholders.enumerated() {
            let key = key("placeholder-\(index)")
            let saved = StoredCredential(
                key: key,
                token: AccessToken(
                    tokenString: "EAAB\(value)", provider: provider, appID: key.appID, userID: value,
                    refreshToken: value))
            try await store.save(saved)
            #expect(try await store.load(key) == saved, "\(value)")
        }
        await cleanUp()
    }

    @Test(
        "after delete, the database file holds no trace of the token, not even in KeePassXC's Recycle Bin",
        .enabled(if: KeyringTestSupport.keePassXCDatabase != nil, KeyringTestSupport.keePassXCSkipReason))
    func deleteLeavesNoToken() async throws {
        let database = try #require(KeyringTestSupport.keePassXCDatabase)
        let token = "EAAB-\(UUID().uuidString)"
        // Saved twice, so that the earlier token sits in the entry's history too.
        let first = credential("recycled", token: token + "-first")
        let saved = credential("recycled", token: token)
        try await store.save(first)
        try await store.save(saved)
        let secrets = try [first, saved].map { String(decoding: try KeyringItemFormat.secret(for: $0), as: UTF8.self) }
        // The file shows the token once KeePassXC has saved it: the check below can see one.
        // A change that makes KeePassXC save again, on another item of this test's provider.
        let poke = { try await store.save(credential("poke")) }
        let written = await KeyringTestSupport.waitForDatabase(database, poke: poke) { $0.contains(secrets[1]) }
        try #require(written, "KeePassXC never wrote the saved credential to its database file")

        #expect(try await store.delete(saved.key))
        #expect(try await store.load(saved.key) == nil)
        let clean = await KeyringTestSupport.waitForDatabase(database, poke: poke) { export in
            !secrets.contains { export.contains($0) } && !export.contains(token)
        }
        let export = try await KeyringTestSupport.exportDatabase(database)
        #expect(
            clean,
            """
            a token is still in the database after delete: the first secret \(export.contains(secrets[0])), \
            the second \(export.contains(secrets[1])), the token in clear \(export.contains(token)), \
            overwritten \(export.components(separatedBy: "deleted by Sesame").count - 1) times
            """)
        // The item itself was kept (moved to the Recycle Bin), with nothing but the marker.
        #expect(export.contains("Recycle Bin") && export.contains("deleted by Sesame"))
        await cleanUp()
    }

    @Test(
        "both keyring policies resolve to the keyring when there is one",
        arguments: [
            StoragePolicy.keyring, .keyringOrFile,
        ])
    func policiesResolveToKeyring(_ policy: StoragePolicy) async throws {
        let file = URL(fileURLWithPath: "/nonexistent/sesame/credentials.json")
        let resolved = try await policy.resolve(fileURL: file, keyring: store)
        #expect(resolved.backend == .keyring)
        #expect(resolved.warning == nil)
        #expect(resolved.fallbackReason == nil)
        #expect(resolved.detail.contains(KeyringTestSupport.service.defaultCollection))
        #expect(resolved.store.backendDescription == store.backendDescription)
    }
}

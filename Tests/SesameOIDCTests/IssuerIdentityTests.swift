import Foundation
import Sesame
import SesameEmulator
import SesameOIDC
import Testing

/// A login made through the emulator's browser flow, saved in `store`.
private func logIn(_ harness: OIDCHarness, store: any CredentialStore) async throws -> AccessToken {
    let session = harness.session(store: store, loginUI: harness.browserLogin(harness.browser()))
    try await session.open(allowLoginUI: true)
    return try #require(await session.token)
}

/// A login made as ``logIn(_:store:)`` does, then deleted from `store`; with its key and the key
/// a store written before issuers were recorded kept it under, where the test puts what it needs.
private func legacyLogIn(
    _ harness: OIDCHarness, store: any CredentialStore
) async throws -> (token: AccessToken, key: CredentialKey, legacyKey: CredentialKey) {
    let token = try await logIn(harness, store: store)
    let key = harness.session(store: store).key
    try await store.delete(key)
    return (token, key, CredentialKey(provider: key.provider, appID: key.appID, account: key.account))
}

@Suite("OpenID logins are kept by issuer")
struct IssuerIdentityTests {
    @Test("a login is stored under its issuer, and the same client id at another issuer does not find it")
    func storedUnderIssuer() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let token = try await logIn(harness, store: store)
            let key = harness.session(store: store).key
            #expect(key.issuer == harness.endpoints.issuer)
            #expect(try await store.load(key)?.token == token)

            // The same client id and account at another issuer: a separate login, none stored.
            var elsewhere = key
            elsewhere.issuer = "https://other.example"
            let other = Session(provider: key.provider, issuer: elsewhere.issuer, appID: key.appID, store: store)
            #expect(try await other.open(allowLoginUI: false) == .created)
            #expect(await other.token == nil)
        }
    }

    @Test("a login stored before issuers were recorded is taken over by the issuer its ID token names")
    func legacyLoginClaimed() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let (token, key, legacyKey) = try await legacyLogIn(harness, store: store)
            try await store.save(StoredCredential(key: legacyKey, token: token))

            let session = harness.session(store: store)
            #expect(try await session.open(allowLoginUI: false).isOpen)
            #expect(await session.token?.tokenString == token.tokenString)
            #expect(try await store.load(key)?.token == token, "moved under the issuer")
            #expect(try await store.load(legacyKey) == nil, "and no longer under the old key")
        }
    }

    @Test("a login stored before issuers were recorded whose ID token names another issuer is never used")
    func legacyLoginOfAnotherIssuerLeftAlone() async throws {
        try await OIDCHarness.with { harness in
            let store = InMemoryCredentialStore()
            let (token, key, legacyKey) = try await legacyLogIn(harness, store: store)
            // The same login, as if it had come from another issuer (its ID token says so).
            var foreign = token
            foreign.idToken = try Self.unsignedIDToken(issuer: "https://other.example")
            try await store.save(StoredCredential(key: legacyKey, token: foreign))
            let requestsBefore = harness.emulator.requestCount(path: "/token")

            let session = harness.session(store: store)
            #expect(try await session.open(allowLoginUI: false) == .created)
            #expect(await session.token == nil, "not presented to this issuer")
            #expect(harness.emulator.requestCount(path: "/token") == requestsBefore, "nothing refreshed here")
            let kept = try await store.load(legacyKey)
            #expect(kept?.token == foreign && kept?.needsLogin == false, "left where it was, unmarked")
            #expect(try await store.load(key) == nil)
        }
    }

    /// A JWT with `iss` = `issuer` and no signature: only ever read for its issuer, as a legacy
    /// login's record.
    static func unsignedIDToken(issuer: String) throws -> String {
        func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }
        return part(#"{"alg":"none"}"#) + "." + part(#"{"iss":"\#(issuer)","sub":"someone"}"#) + "."
    }
}

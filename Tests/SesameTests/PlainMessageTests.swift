import Foundation
import Sesame
import Testing

/// Messages a person reads name no Swift API and no internal names (issue 40, item 10).
@Suite("messages in plain words")
struct PlainMessageTests {
    /// A store that refuses every save as a locked keyring does, naming what it was saving.
    final class LockedStore: CredentialStore {
        var backendDescription: String { "locked" }
        func save(_ credential: StoredCredential) async throws {
            throw CredentialStoreError(
                kind: .locked,
                message: "The keyring is locked, so saving the credential for \(credential.key) was not done.")
        }
        func load(_ key: CredentialKey) async throws -> StoredCredential? { nil }
        func delete(_ key: CredentialKey) async throws -> Bool { false }
        func list(provider: ProviderID?) async throws -> [StoredCredential] { [] }
    }

    @Test("the write check's failure speaks of the login, not of its placeholder")
    func writeCheck() async throws {
        let key = CredentialKey(provider: "facebook", appID: "1234", account: "alice")
        let error = await #expect(throws: CredentialStoreError.self) {
            try await LockedStore().checkWritable(for: key)
        }
        let message = try #require(error?.message)
        #expect(!message.contains("sesame-write-check"), "\(message)")
        #expect(message.contains("\(key)"), "\(message)")
    }

    @Test(
        "a network failure is a sentence without the kind's Swift name",
        arguments: [
            TransportError.Kind.dnsFailure, .connectionFailed, .connectionLost, .timedOut, .tlsFailure,
            .certificateRejected, .bodyTooLarge, .invalidRequest, .other,
        ])
    func networkFailure(_ kind: TransportError.Kind) {
        let text = "\(TransportError(kind: kind, message: "details", host: "graph.facebook.com"))"
        #expect(!text.contains(kind.rawValue), "\(text)")
        #expect(!text.contains("Network error ("), "\(text)")
        #expect(text.hasPrefix("Could not talk to graph.facebook.com: "), "\(text)")
    }
}

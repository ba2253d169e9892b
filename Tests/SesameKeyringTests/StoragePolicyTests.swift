import Foundation
import Sesame
import SesameKeyring
import Testing

@Suite("StoragePolicy")
struct StoragePolicyTests {
    @Test(
        "each policy is written the way the command line spells it",
        arguments: [
            (StoragePolicy.keyring, "keyring"), (.keyringOrFile, "keyring-or-file"), (.file, "file"),
            (.memory, "memory"),
        ])
    func spelling(_ policy: StoragePolicy, _ name: String) {
        #expect(policy.description == name)
        #expect(StoragePolicy(rawValue: name) == policy)
        #expect(!policy.summary.isEmpty)
    }

    @Test("an unknown policy name is not a policy")
    func unknownName() {
        #expect(StoragePolicy(rawValue: "plaintext") == nil)
        #expect(StoragePolicy.default == .keyring)
    }

    @Test("memory resolves to an in-memory store, with no warning")
    func memory() async throws {
        let resolved = try await StoragePolicy.memory.resolve()
        #expect(resolved.backend == .memory)
        #expect(resolved.store is InMemoryCredentialStore)
        #expect(resolved.warning == nil)
        #expect(resolved.description == "policy memory: memory")
    }

    @Test("file resolves to the file store at the given path, with no warning")
    func file() async throws {
        let url = URL(fileURLWithPath: "/tmp/sesame-policy-test/credentials.json")
        let resolved = try await StoragePolicy.file.resolve(fileURL: url)
        #expect(resolved.backend == .file)
        #expect((resolved.store as? FileCredentialStore)?.url == url)
        #expect(resolved.warning == nil)
        #expect(resolved.detail.contains(url.path))
    }

    @Test(
        "an absent keyring fails 'keyring' and makes 'keyring-or-file' fall back to the file, saying so",
        arguments: [CredentialStoreError.Kind.noSessionBus, .noSecretService, .unavailable])
    func absentKeyring(_ kind: CredentialStoreError.Kind) async throws {
        let url = URL(fileURLWithPath: "/tmp/sesame-policy-test/credentials.json")
        let absent = CredentialStoreError(kind: kind, message: "no keyring here")
        await #expect(throws: absent) {
            _ = try await StoragePolicy.keyring.resolve(fileURL: url) { throw absent }
        }
        let resolved = try await StoragePolicy.keyringOrFile.resolve(fileURL: url) { throw absent }
        #expect(resolved.backend == .file)
        #expect((resolved.store as? FileCredentialStore)?.url == url)
        #expect(resolved.fallbackReason == absent)
        #expect(resolved.warning?.contains(url.path) == true)
    }

    @Test(
        "a keyring that is there but locked or silent is an error under 'keyring-or-file', never a fallback",
        arguments: [CredentialStoreError.Kind.locked, .timedOut, .ioFailure])
    func presentButFailing(_ kind: CredentialStoreError.Kind) async throws {
        let url = URL(fileURLWithPath: "/tmp/sesame-policy-test/credentials.json")
        let failure = CredentialStoreError(kind: kind, message: "the keyring did not answer")
        await #expect(throws: failure) {
            _ = try await StoragePolicy.keyringOrFile.resolve(fileURL: url) { throw failure }
        }
    }

    @Test("a keyring that answers is used, with the detail its opener gives")
    func keyringAnswers() async throws {
        let store = InMemoryCredentialStore()
        for policy in [StoragePolicy.keyring, .keyringOrFile] {
            let resolved = try await policy.resolve(fileURL: URL(fileURLWithPath: "/unused")) {
                (store, "keyring (test)")
            }
            #expect(resolved.backend == .keyring)
            #expect(resolved.store as? InMemoryCredentialStore === store)
            #expect(resolved.detail == "keyring (test)")
            #expect(resolved.warning == nil && resolved.fallbackReason == nil)
        }
    }
}

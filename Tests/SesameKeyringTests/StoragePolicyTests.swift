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
}

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
            (.memory, "memory"), (.pass, "pass"), (.auto, "auto"),
        ])
    func spelling(_ policy: StoragePolicy, _ name: String) {
        #expect(policy.description == name)
        #expect(StoragePolicy(rawValue: name) == policy)
        #expect(!policy.summary.isEmpty)
    }

    @Test("an unknown policy name is not a policy")
    func unknownName() {
        #expect(StoragePolicy(rawValue: "plaintext") == nil)
        #expect(StoragePolicy.default == .auto)
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
        "a keyring error fails 'keyring'; 'keyring-or-file' falls back to the file, saying so, when the keyring is absent, and when it is there but locked or silent it is an error, never a fallback",
        arguments: [
            (CredentialStoreError.Kind.noSessionBus, true), (.noSecretService, true), (.unavailable, true),
            (.locked, false), (.timedOut, false), (.ioFailure, false),
        ])
    func keyringError(_ kind: CredentialStoreError.Kind, absent: Bool) async throws {
        let url = URL(fileURLWithPath: "/tmp/sesame-policy-test/credentials.json")
        let error = CredentialStoreError(kind: kind, message: absent ? "no keyring here" : "the keyring did not answer")
        await #expect(throws: error) {
            _ = try await StoragePolicy.keyring.resolve(fileURL: url) { throw error }
        }
        guard absent else {
            await #expect(throws: error) {
                _ = try await StoragePolicy.keyringOrFile.resolve(fileURL: url) { throw error }
            }
            return
        }
        let resolved = try await StoragePolicy.keyringOrFile.resolve(fileURL: url) { throw error }
        #expect(resolved.backend == .file)
        #expect((resolved.store as? FileCredentialStore)?.url == url)
        #expect(resolved.fallbackReason == error)
        #expect(resolved.warning?.contains(url.path) == true)
    }

    @Test(
        "'auto': the keyring when it answers; without one, an initialised password store; otherwise the keyring's error, never a file; a locked keyring is an error",
        arguments: [
            (CredentialStoreError.Kind?.none, true, ResolvedStorage.Backend?.some(.keyring)),
            (.some(.noSessionBus), true, .some(.pass)), (.some(.noSecretService), true, .some(.pass)),
            (.some(.noSessionBus), false, nil), (.some(.locked), true, nil),
        ])
    func auto(
        _ keyringKind: CredentialStoreError.Kind?, initialised: Bool, expected: ResolvedStorage.Backend?
    )
        async throws
    {
        let keyring = InMemoryCredentialStore()
        let pass = InMemoryCredentialStore()
        let failure = keyringKind.map { CredentialStoreError(kind: $0, message: "no keyring here") }
        let resolve = {
            try await StoragePolicy.auto.resolve(
                fileURL: URL(fileURLWithPath: "/unused"),
                openKeyring: {
                    if let failure { throw failure }
                    return (keyring, "keyring (test)")
                },
                openPass: { (pass, "pass (test)", initialised) })
        }
        guard let expected else {
            await #expect(throws: try #require(failure)) { _ = try await resolve() }
            return
        }
        let resolved = try await resolve()
        #expect(resolved.backend == expected)
        #expect(resolved.store as? InMemoryCredentialStore === (expected == .pass ? pass : keyring))
        #expect(resolved.fallbackReason == failure)
        #expect(resolved.warning == nil)
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

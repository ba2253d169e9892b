import Foundation
import Sesame
import SesameKeyring
import SesameTestSupport
import Testing

/// A process's first read (what `sesame token` does) opens libsecret's encrypted session and
/// reads the secret through it. Run against whichever Secret Service the run has (GNOME
/// Keyring; KeePassXC in `scripts/test`'s second keyring run).
@Suite(
    "A process's first read gets the secret through an encrypted session",
    .enabled(if: KeyringTestSupport.keyringPromised, KeyringTestSupport.keyringSkipReason),
    .timeLimit(.minutes(2)))
struct FirstReadTests {
    let store = SecretServiceStore(timeout: .seconds(20), unlocking: .never)
    let provider = ProviderID("reading-\(UUID().uuidString.prefix(8).lowercased())")

    /// Removes what the test stored under its provider.
    func clearStored() async {
        _ = try? await KeyringTestSupport.run("secret-tool", ["clear", "provider", provider.rawValue])
    }

    @Test("the secret read is the one stored, and it crossed the bus encrypted")
    func readThroughEncryptedSession() async throws {
        let key = CredentialKey(provider: provider, appID: "1234", account: "reader")
        // Long enough for several AES blocks, with bytes of every kind around.
        let tokenString = "token-\(UUID().uuidString)-é€😀-" + String(repeating: "x", count: 61)
        let stored = StoredCredential(
            key: key, token: AccessToken(tokenString: tokenString, provider: provider, appID: "1234"))
        try await withStarted({ try await store.save(stored) }, stop: { _ in await clearStored() }) { _ in
            let monitor = try BusMonitor(rule: "type='method_call',destination='org.freedesktop.secrets'")
            defer { monitor.stop() }
            try await monitor.waitUntilListening()
            // Processes of their own: in this one, a session is open already.
            let reads = 3
            for _ in 0..<reads {
                let result = try await ProcessRunner.run(
                    try KeyringTestSupport.probe(),
                    ["--timeout-ms", "20000", "load-token", provider.rawValue, "1234", "reader"],
                    environment: TestChildren.environment(), killAfter: .seconds(60))
                let answer = result.standardOutput
                struct Loaded: Decodable {
                    var ok: Bool
                    var found: Bool?
                    var token: String?
                }
                let loaded = try JSONDecoder().decode(Loaded.self, from: Data(answer.utf8))
                #expect(loaded.ok && loaded.found == true, "the probe's load: \(answer)")
                #expect(loaded.token == tokenString, "the secret read is not the one stored")
            }

            // The probes' calls: each one's search names this test's provider.
            func probeSenders(_ text: String) -> [String] {
                BusMonitor.calls("SearchItems", in: text).filter { $0.contains(provider.rawValue) }
                    .compactMap(BusMonitor.sender(of:))
            }
            func sessions(of sender: String, in text: String) -> [String] {
                BusMonitor.calls("OpenSession", in: text).filter { BusMonitor.sender(of: $0) == sender }
            }
            let seen = await monitor.read(timeout: .seconds(10)) { text in
                let senders = probeSenders(text)
                return senders.count == reads && senders.allSatisfy { !sessions(of: $0, in: text).isEmpty }
            }
            let senders = probeSenders(seen)
            try #require(senders.count == reads, "\(senders.count) searches from the probes: \(BusMonitor.heads(seen))")
            for sender in senders {
                let opened = sessions(of: sender, in: seen)
                #expect(opened.count == 1, "a read opened \(opened.count) sessions: \(BusMonitor.heads(seen))")
                #expect(
                    opened.allSatisfy { $0.contains("dh-ietf1024-sha256-aes128-cbc-pkcs7") },
                    "the session was not the encrypted one: \(opened)")
            }
        }
    }
}

import Foundation
import Sesame
import SesameKeyring
import SesameTestSupport
import Testing

/// A process's first read opens a session of Sesame's own (`ReadingSession`: the Secret Service's
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` with a short exponent), reads the secret through it,
/// and closes it: libsecret would have opened its own session and kept it. Run against whichever
/// Secret Service the run has (GNOME Keyring; KeePassXC in `scripts/test`'s second keyring run):
/// each must accept the session and encrypt the secret so that it decrypts to what was stored.
@Suite(
    "A first read goes through Sesame's own Secret Service session",
    .enabled(if: KeyringTestSupport.keyringPromised, KeyringTestSupport.keyringSkipReason),
    .timeLimit(.minutes(2)))
struct ReadingSessionTests {
    let store = SecretServiceStore(timeout: .seconds(20), unlocking: .never)
    let provider = ProviderID("reading-\(UUID().uuidString.prefix(8).lowercased())")

    /// Removes what the test stored under its provider.
    func clearStored() async {
        _ = try? await KeyringTestSupport.run("secret-tool", ["clear", "provider", provider.rawValue])
    }

    @Test("the secret decrypts to what was stored, and the session opened for it is closed before the read returns")
    func readThroughOwnSession() async throws {
        let key = CredentialKey(provider: provider, appID: "1234", account: "reader")
        // Long enough for several AES blocks, with bytes of every kind around.
        let tokenString = "token-\(UUID().uuidString)-é€😀-" + String(repeating: "x", count: 61)
        let stored = StoredCredential(
            key: key, token: AccessToken(tokenString: tokenString, provider: provider, appID: "1234"))
        try await withStarted({ try await store.save(stored) }, stop: { _ in await clearStored() }) { _ in
            let monitor = try BusMonitor(rule: "type='method_call',destination='org.freedesktop.secrets'")
            defer { monitor.stop() }
            try await monitor.waitUntilListening()
            // Processes of their own (in this one, libsecret's session may be open already), each of
            // which prints the token and exits as soon as its read returns: the session's Close must
            // be on the bus by then. Before it was flushed there, a release build missed it in 2 to 10
            // reads of 40 on a loaded machine, so several reads make a miss show.
            let reads = 8
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
            func sessionsClosed(by sender: String, in text: String) -> Int {
                BusMonitor.calls("Close", in: text).filter {
                    BusMonitor.sender(of: $0) == sender && $0.contains("/org/freedesktop/secrets/session/")
                }.count
            }
            let seen = await monitor.read(timeout: .seconds(10)) { text in
                let senders = probeSenders(text)
                return senders.count == reads && senders.allSatisfy { sessionsClosed(by: $0, in: text) > 0 }
            }
            let senders = probeSenders(seen)
            try #require(senders.count == reads, "\(senders.count) searches from the probes: \(BusMonitor.heads(seen))")
            for sender in senders {
                let opened = BusMonitor.calls("OpenSession", in: seen).filter { BusMonitor.sender(of: $0) == sender }
                #expect(opened.count == 1, "a read opened \(opened.count) sessions: \(BusMonitor.heads(seen))")
                #expect(
                    opened.allSatisfy { $0.contains("dh-ietf1024-sha256-aes128-cbc-pkcs7") },
                    "the session was not the encrypted one: \(opened)")
            }
            let unclosed = senders.filter { sessionsClosed(by: $0, in: seen) != 1 }
            let calls = BusMonitor.heads(seen)
            #expect(
                unclosed.isEmpty,
                "\(unclosed.count) of \(reads) reads did not close Sesame's session before exiting: \(calls)")
        }
    }
}

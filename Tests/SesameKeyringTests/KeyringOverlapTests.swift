import Foundation
import Sesame
import SesameKeyring
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A read's D-Bus calls that do not depend on one another are sent together, not one after the
/// other's answer. Shown by stopping the keyring daemon (SIGSTOP) before the read, so that
/// nothing is answered: what the bus then sees from Sesame is what it sent without waiting.
/// A read that waited between the calls would send only the first, and fail the test. (The
/// items' `GetAll`s and the `GetSecrets`, sent together too, both need the search's answer,
/// which a stopped daemon does not give; they are not shown this way.)
///
/// GNOME Keyring only: with KeePassXC, a read first asks whether its collections are locked
/// (its search of a locked collection prompts), which a stopped daemon cannot answer.
@Suite(
    "A keyring read's calls go out together",
    .enabled(if: KeyringTestSupport.keyringPromised, KeyringTestSupport.keyringSkipReason),
    .enabled(
        if: KeyringTestSupport.service.kind == .gnomeKeyring,
        "stops the keyring daemon mid-read, which only the GNOME Keyring run does (KeePassXC's read asks more first)"),
    .timeLimit(.minutes(2)))
struct KeyringOverlapTests {
    let store = SecretServiceStore(timeout: .seconds(20), unlocking: .never)
    let provider = ProviderID("overlap-\(UUID().uuidString.prefix(8).lowercased())")

    func saved(_ account: String) -> StoredCredential {
        let key = CredentialKey(provider: provider, appID: "1234", account: account)
        return StoredCredential(
            key: key, token: AccessToken(tokenString: "token-\(UUID().uuidString)", provider: provider, appID: "1234"))
    }

    /// The keyring daemon's process id, from the bus.
    func keyringProcess() async throws -> pid_t {
        let info = try await SecretServiceInfo.probe()
        let pid = try #require(info.provider?.processID, "the bus did not say which process serves the keyring")
        return pid_t(pid)
    }

    func cleanUp() async {
        _ = try? await KeyringTestSupport.run("secret-tool", ["clear", "provider", provider.rawValue])
    }

    @Test("a process's first read sends its search with the session's OpenSession, not after it")
    func searchBesideSession() async throws {
        let credential = saved("first-read")
        try await store.save(credential)
        let keyring = try await keyringProcess()

        // A process of its own: this one's session is open already. It connects, then waits.
        let input = Pipe()
        let output = Pipe()
        let probe = ChildProcess(
            executableURL: try KeyringTestSupport.probe(),
            arguments: [
                "--timeout-ms", "20000", "connect-then-load", provider.rawValue, credential.key.appID,
                credential.key.account,
            ],
            environment: TestChildren.environment(), standardInput: .pipe(input), standardOutput: .pipe(output),
            standardError: .null, diesWithParent: true)
        try await probe.start()
        defer { if probe.isRunning { probe.terminate() } }
        let banner = await readUntil(output.fileHandleForReading, contains: "connected\n", timeout: .seconds(30))
        try #require(banner.contains("connected\n"), "the probe did not connect: \(banner)")

        let monitor = try BusMonitor(rule: "type='method_call',interface='org.freedesktop.Secret.Service'")
        defer { monitor.stop() }
        try await monitor.waitUntilListening()
        try #require(kill(keyring, SIGSTOP) == 0, "could not stop the keyring daemon (pid \(keyring))")
        var resumed = false
        defer { if !resumed { kill(keyring, SIGCONT) } }
        // Through the EPIPE-safe writer: a probe that died must fail the test, not trap it.
        StandardStreams.write(Array("go\n".utf8), to: input.fileHandleForWriting.fileDescriptor)
        // The probe's search names this test's provider; its OpenSession comes from the same
        // connection.
        func probeCalls(_ text: String) -> (search: Bool, openSession: Bool) {
            guard
                let search = BusMonitor.calls("SearchItems", in: text).first(where: { $0.contains(provider.rawValue) }),
                let sender = BusMonitor.sender(of: search)
            else { return (false, false) }
            let opened = BusMonitor.calls("OpenSession", in: text).contains { BusMonitor.sender(of: $0) == sender }
            return (true, opened)
        }
        let seen = await monitor.read(timeout: .seconds(10)) { text in probeCalls(text) == (true, true) }
        kill(keyring, SIGCONT)
        resumed = true
        let result = await readUntil(output.fileHandleForReading, contains: "}\n", timeout: .seconds(30))
        // Reaped before the test ends (a probe that printed nothing is stopped first).
        if !result.contains("}\n") { probe.terminate() }
        _ = await probe.exitStatus()
        await cleanUp()

        #expect(result.contains("\"ok\":true") && result.contains("\"found\":true"), "the probe's load: \(result)")
        let heads = BusMonitor.heads(seen)
        #expect(probeCalls(seen).search, "no SearchItems from the probe while the keyring was stopped: \(heads)")
        #expect(
            probeCalls(seen).openSession,
            "the OpenSession waited for the search to be answered, or was not sent: \(heads)")
    }
}

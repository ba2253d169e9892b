import Foundation
import SesameTestSupport
import Testing

/// Each failure the store must tell apart, met for real. libsecret keeps one bus connection per
/// process, so every case runs `sesame-keyring-probe` in a process of its own with the D-Bus
/// environment the case needs.
@Suite("Keyring failures, each in a process of its own")
struct KeyringFailureTests {
    @Test("a bus address that points at a dead socket is reported as no session bus")
    func deadBus() async throws {
        let directory = try KeyringTestSupport.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let address = "unix:path=\(directory.path)/gone"

        let result = try await runProbe(["load", "facebook", "1234", "alice"], busAddress: address)
        #expect(result.ok == false)
        #expect(result.kind == "noSessionBus")
        #expect(result.message?.contains(address) == true)
        #expect(result.message?.contains("dbus-run-session") == true)
    }

    @Test("an unset bus address is reported as no session bus")
    func unsetBus() async throws {
        let directory = try KeyringTestSupport.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }

        // Without an address, GIO looks for $XDG_RUNTIME_DIR/bus and then tries X11 autolaunch.
        let result = try await runProbe(
            ["load", "facebook", "1234", "alice"], busAddress: nil,
            extraEnvironment: ["XDG_RUNTIME_DIR": directory.path], removing: ["DISPLAY", "WAYLAND_DISPLAY"])
        #expect(result.ok == false)
        #expect(result.kind == "noSessionBus")
        #expect(result.message?.contains("DBUS_SESSION_BUS_ADDRESS is not set") == true)
    }

    @Test("a bus that accepts a connection and never answers fails within the timeout")
    func silentBus() async throws {
        let socket = try SilentUnixSocket()
        defer { socket.stop() }

        let result = try await runProbe(
            ["--timeout-ms", "500", "load", "facebook", "1234", "alice"], busAddress: socket.address)
        #expect(result.ok == false)
        #expect(result.kind == "timedOut")
        #expect(result.message?.contains("did not answer within 500 ms") == true)

        // A keyring that hangs is not an absent one: keyring-or-file does not fall back to the file.
        let resolved = try await runProbe(
            ["--timeout-ms", "500", "resolve", "keyring-or-file", "/nonexistent/credentials.json"],
            busAddress: socket.address)
        #expect(resolved.ok == false)
        #expect(resolved.kind == "timedOut")
    }

    @Test(
        "a live bus without a Secret Service is reported as such",
        .enabled(
            if: KeyringTestSupport.canRun(needing: ["dbus-daemon"]),
            KeyringTestSupport.skipReason(needing: ["dbus-daemon"])))
    func noSecretService() async throws {
        let bus = try await PrivateBus()
        defer { bus.stop() }

        let result = try await runProbe(["load", "facebook", "1234", "alice"], busAddress: bus.address)
        #expect(result.ok == false)
        #expect(result.kind == "noSecretService")
        #expect(result.message?.contains("gnome-keyring-daemon") == true)

        let resolved = try await runProbe(
            ["resolve", "keyring", "/nonexistent/credentials.json"], busAddress: bus.address)
        #expect(resolved.kind == "noSecretService")
    }

    @Test("keyring-or-file falls back to the file with a warning that names it; keyring fails loudly")
    func policyFallback() async throws {
        let directory = try KeyringTestSupport.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let address = "unix:path=\(directory.path)/gone"
        let file = directory.appendingPathComponent("state/credentials.json").path

        let fallback = try await runProbe(["resolve", "keyring-or-file", file], busAddress: address)
        #expect(fallback.ok)
        #expect(fallback.backend == "file")
        #expect(fallback.warning?.contains(file) == true)

        let strict = try await runProbe(["resolve", "keyring", file], busAddress: address)
        #expect(strict.ok == false)
        #expect(strict.kind == "noSessionBus")

        let chosen = try await runProbe(["resolve", "file", file], busAddress: address)
        #expect(chosen.backend == "file")
        #expect(chosen.warning == nil)
    }

    static let lockedTools = ["dbus-daemon", "gnome-keyring-daemon", "gdbus"]

    @Test(
        "a locked collection is reported as locked, whether or not the store may prompt",
        .enabled(
            if: KeyringTestSupport.canRun(needing: lockedTools), KeyringTestSupport.skipReason(needing: lockedTools)))
    func lockedCollection() async throws {
        let keyring = try await PrivateKeyring()
        defer { keyring.stop() }
        let address = keyring.bus.address
        let saved = try await runProbe(["save", "facebook", "1234", "alice"], busAddress: address)
        try #require(saved.ok, "could not save before locking: \(saved.message ?? "")")

        try await keyring.lock()
        let status = try await runProbe(["status"], busAddress: address)
        try #require(status.status?.contains("(locked)") == true, "the collection did not lock: \(status)")

        let withoutPrompt = try await runProbe(
            ["--no-prompt", "load", "facebook", "1234", "alice"], busAddress: address)
        #expect(withoutPrompt.kind == "locked")
        #expect(withoutPrompt.message?.contains("does not unlock it by itself") == true)
        #expect(withoutPrompt.message?.contains("`.never`") == false, "no Swift API in a message for a person")
        #expect(withoutPrompt.message?.contains("The Secret Service here is GNOME Keyring") == true)

        // This bus cannot start a prompter, so gnome-keyring's unlock prompt fails at once.
        for command in [["load"], ["save"], ["delete"]] {
            let result = try await runProbe(command + ["facebook", "1234", "alice"], busAddress: address)
            #expect(result.kind == "locked", "\(command[0]): \(result)")
            #expect(result.message?.contains("dismissed or could not be shown") == true, "\(command[0])")
        }
        let list = try await runProbe(["list"], busAddress: address)
        #expect(list.kind == "locked")
    }
}

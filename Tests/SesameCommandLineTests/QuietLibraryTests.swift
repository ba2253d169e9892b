import Foundation
import SesameTestSupport
import Testing

/// The library never speaks for the app: a small library app (`sesame-quiet-probe`) runs a login
/// and an API call as a process, and nothing may reach its standard output or error.
@Suite("a library app: nothing on standard output or error unless the app installs a presenter")
struct QuietLibraryTests {
    @Test(
        "a library call writes nothing to standard output or error",
        arguments: [
            // A login from explicit values with the app's device presenter, then a Graph call.
            "presenter",
            // Desktop.facebook with the built-in emulator and no terminal (it used to announce
            // the emulator on every run).
            "built-in",
            // A device login with neither a terminal nor the app's presenter fails at once with an
            // AuthError saying to supply one (it used to poll silently until the code expired).
            "no-presenter",
            // Desktop.oidc(provider:…) and Desktop.github(clientID:…), from explicit values, with the
            // app's device presenter.
            "oidc-presenter", "github-presenter",
        ])
    func quiet(_ scenario: String) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-quiet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let result = try await ProcessRunner.run(
            ProcessRunner.builtExecutable("sesame-quiet-probe"), [scenario],
            environment: [
                "HOME": home.path, "XDG_STATE_HOME": home.path, "XDG_CONFIG_HOME": home.path,
                "SESAME_STORAGE": "memory", "PATH": "/usr/bin:/bin",
            ])
        #expect(result.status == 0)
        #expect(result.standardOutput == "")
        #expect(result.standardError == "")
    }
}

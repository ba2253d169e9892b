import Acme
import Sesame
import SesameDesktop

extension DescribedProviderPlugin {
    /// Acme's desktop plug-in, derived from its description: an Acme server's address
    /// (`--acme-url`, `SESAME_ACME_URL`, `acme.url`) and client id (`--acme-client-id`,
    /// `SESAME_ACME_CLIENT_ID`, `acme.client_id`), device login (or the browser with `--web`), and
    /// the built-in Acme emulator when nothing is configured and the program allows it.
    public static var acme: DescribedProviderPlugin {
        var plugin = DescribedProviderPlugin(.acme, server: .required)
        plugin.summary =
            "An Acme OAuth 2.0 server (device login, or the browser with PKCE; no ID token); the built-in Acme "
            + "emulator when nothing is configured."
        plugin.loginHelp = (
            "Acme: device login by default, --web for the browser; with nothing configured, the built-in Acme emulator.",
            [
                ("\(Desktop.programName) login acme", "Acme: the built-in emulator, or the configured server"),
                (
                    "\(Desktop.programName) login acme --web --url https://id.acme.example --client-id my-app",
                    "Acme: a real server, in the browser"
                ),
            ]
        )
        plugin.explainErrorExamples = [
            (
                "\(Desktop.programName) explain-error --provider acme --status 400 --body '{\"error\":\"invalid_grant\"}'",
                "An Acme refresh token that was revoked or already used"
            )
        ]
        plugin.builtInEmulator = BuiltInEmulator(
            start: { try await AcmeEmulatorHooks.start(environment: $0) },
            prepare: { AcmeEmulatorHooks.prepared(environment: $0) })
        plugin.foregroundEmulator = AcmeForegroundEmulator()
        return plugin
    }
}

import SesameDesktop
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin
import SesameGitHubEmulatorDesktop
import SesameGitHubPlugin
import SesameOIDCEmulatorDesktop
import SesameOIDCPlugin
import SesamePassDesktop
import SesamePostgresDesktop

/// The providers `sesame`'s main.swift hands the command line, for tests that run the command
/// line in this process. A suite calls ``bootstrap()`` in its `init`.
enum TestProviders {
    /// `Desktop.bootstrap` with `sesame`'s list, as its main.swift does.
    /// Once per process: a second `Desktop.bootstrap` is a programming error.
    static func bootstrap() { _ = once }

    private static let once: Void = Desktop.bootstrap(
        [FacebookPlugin(), OIDCPlugin(), GitHubPlugin()],
        storage: [PassStorage(), PostgresStorage()],
        emulators: [FacebookEmulatorPlugin(), OIDCEmulatorPlugin(), GitHubEmulatorPlugin()],
        // This process is the test runner: its messages are sesame's, as the tests read them.
        programName: "sesame")
}

import SesameDesktop
import SesameFacebookPlugin
import SesameGitHubPlugin
import SesameOIDCPlugin

/// The providers `sesame`'s main.swift hands the command line, for tests that run the command
/// line in this process. A suite calls ``bootstrap()`` in its `init`.
enum TestProviders {
    /// `Desktop.bootstrap` with `sesame`'s list, as its main.swift does.
    static func bootstrap() {
        Desktop.bootstrap([FacebookPlugin(), OIDCPlugin(), GitHubPlugin()])
    }
}

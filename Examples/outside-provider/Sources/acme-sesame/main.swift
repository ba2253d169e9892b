// acme-sesame: the `sesame` command with a fourth provider, Acme, from outside Sesame's package.
// Adding it is the one line `DescribedProviderPlugin.acme,` below.

import AcmePlugin
import Foundation
import SesameCommandLine
import SesameDesktop
import SesameFacebookPlugin
import SesameGitHubPlugin
import SesameOIDCPlugin

Desktop.bootstrap([
    FacebookPlugin(),
    OIDCPlugin(),
    GitHubPlugin(),
    DescribedProviderPlugin.acme,
])

// A reader that went away (`acme-sesame token acme | true`) is a failed write, not a signal.
signal(SIGPIPE, SIG_IGN)
exit(await SesameCommand.run(Array(CommandLine.arguments.dropFirst())))

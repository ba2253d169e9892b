// sesame: the command-line program. Everything lives in SesameCommandLine, where tests can
// call the parser and the commands directly; this file lists the program's providers, one line
// each, prepares the process (SIGPIPE) and hands over the arguments.

import Foundation
import Sesame
import SesameCommandLine
import SesameDesktop
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin
import SesameGitHubEmulatorDesktop
import SesameGitHubPlugin
import SesameOIDCEmulatorDesktop
import SesameOIDCPlugin
import SesamePassDesktop
import SesamePostgresDesktop
import SesamePresets

Desktop.bootstrap(
    [FacebookPlugin(), OIDCPlugin(), GitHubPlugin()] + OIDCPlugin.presets
        + OAuth2Description.presets.map { DescribedProviderPlugin($0) },
    storage: [PassStorage(), PostgresStorage()],
    emulators: [FacebookEmulatorPlugin(), OIDCEmulatorPlugin(), GitHubEmulatorPlugin()])

// GLib (libsecret) ignores SIGPIPE anyway; ignoring it from the start makes a reader that went away
// (`sesame token facebook | true`) the same quiet failed write whatever the storage.
signal(SIGPIPE, SIG_IGN)
// The command runs on this thread (see MainThreadExecutor), not on Swift's cooperative pool.
exit(SesameCLI.runOnMainThread(Array(CommandLine.arguments.dropFirst())))

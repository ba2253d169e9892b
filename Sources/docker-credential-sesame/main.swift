// docker-credential-sesame: the credential helper of docker, podman, skopeo and buildah, answered
// from Sesame's stored logins. Everything lives in SesameCommandLine (DockerCredentialHelper),
// where tests call it directly; this file lists the providers, stores and emulators, as sesame's
// own main.swift does (a login made against a built-in emulator is answered from that emulator).

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
    emulators: [FacebookEmulatorPlugin(), OIDCEmulatorPlugin(), GitHubEmulatorPlugin()],
    programName: "sesame")  // the program it helps: its messages say 'sesame login', not this helper's name

signal(SIGPIPE, SIG_IGN)
exit(DockerCredentialHelper.runOnMainThread(Array(CommandLine.arguments.dropFirst())))

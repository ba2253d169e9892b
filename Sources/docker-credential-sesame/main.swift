// docker-credential-sesame: the credential helper of docker, podman, skopeo and buildah, answered
// from Sesame's stored logins. Everything lives in SesameCommandLine (DockerCredentialHelper),
// where tests call it directly; this file lists the providers, as sesame's own main.swift does.

import Foundation
import SesameCommandLine
import SesameDesktop
import SesameFacebookPlugin
import SesameGitHubPlugin
import SesameOIDCPlugin
import SesamePassDesktop
import SesamePostgresDesktop

Desktop.bootstrap(
    [FacebookPlugin(), OIDCPlugin(), GitHubPlugin()],
    storage: [PassStorage(), PostgresStorage()])

signal(SIGPIPE, SIG_IGN)
exit(DockerCredentialHelper.runOnMainThread(Array(CommandLine.arguments.dropFirst())))

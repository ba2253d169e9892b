import Foundation
import Sesame
import SesameDesktop

/// The `sesame` command line as a library, for a program that hands in its own providers:
///
/// ```swift
/// Desktop.bootstrap([ExamplePlugin(), AnotherPlugin()])   // the program's providers, one line each
/// exit(await SesameCommand.run(Array(CommandLine.arguments.dropFirst())))
/// ```
///
/// Every command (`login`, `status`, `token`, `logout`, `switch`, `permissions`, `doctor`,
/// `explain-error`, `emulator`, `providers`, `git-credential`, `kubectl-credential`, `kubeconfig`,
/// `credential-helpers`) works for every plug-in given to
/// `Desktop.bootstrap(_:storage:emulators:programName:)`, and every message, usage line, help
/// text, completion script and manual page says the program's name (`Desktop.programName`).
public enum SesameCommand {
    /// Parses and runs `arguments` (without the program's name), printing to the standard
    /// streams; returns the exit status from the documented table (`sesame help`).
    public static func run(_ arguments: [String]) async -> Int32 {
        StandardStreams.holdStandardDescriptors()
        return SesameCLI.checkingOutput(await SesameCLI.main(arguments))
    }

    /// Answers the credential-helper protocol of docker, podman, skopeo and buildah (`get`,
    /// `list`, `version`; `store` and `erase` are refused) from the stored logins that the config
    /// file's `registries` object maps to each host; returns the exit status.
    ///
    /// The main of an executable named `docker-credential-NAME`, which docker runs for a
    /// `credHelpers` entry `NAME` (`NAME credential-helpers` prints that entry). NAME is the
    /// program's name: the executable's `Desktop.bootstrap` gives `programName: "NAME"`, so its
    /// messages say `NAME login`, as `docker-credential-sesame`'s say `sesame login`.
    public static func runDockerCredentialHelper(_ arguments: [String]) async -> Int32 {
        StandardStreams.holdStandardDescriptors()
        return SesameCLI.checkingOutput(
            await DockerCredentialHelper.main(arguments), program: DockerCredentialHelper.name)
    }
}

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
/// `Desktop.bootstrap(_:storage:emulators:)`.
public enum SesameCommand {
    /// Parses and runs `arguments` (without the program's name), printing to the standard
    /// streams; returns the exit status from the documented table (`sesame help`).
    public static func run(_ arguments: [String]) async -> Int32 {
        StandardStreams.holdStandardDescriptors()
        return SesameCLI.checkingOutput(await SesameCLI.main(arguments))
    }
}

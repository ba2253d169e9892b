import Foundation
import Sesame
import SesameDesktop

/// `docker-credential-sesame get|list|store|erase|version`: the credential-helper protocol of
/// docker, podman, skopeo and buildah (docker/docker-credential-helpers), answered from the
/// stored logins the config file's `registries` object maps to each registry host
/// (``SesameDesktop/RegistryMapping``).
///
/// As the protocol asks, answers and errors go to standard output and a failure exits
/// non-zero: `get` prints `{"ServerURL","Username","Secret"}` for a mapped host, and the
/// protocol's "credentials not found in native keychain" with 1 for any other; `list` prints
/// the mapped hosts and their user names. `store` and `erase` are refused (logins come from
/// `sesame login`), and change nothing.
package enum DockerCredentialHelper {
    /// The helper's name, for messages and the PATH: `docker-credential-` and ``Desktop/programName``,
    /// as docker runs the helper that a `credHelpers` entry names (`"ghcr.io": "sesame"` runs
    /// `docker-credential-sesame`). Its executable hands `Desktop.bootstrap` the program's name,
    /// not its own.
    package static var name: String { "docker-credential-\(Desktop.programName)" }
    /// What the protocol's clients take for "no credentials for this server".
    package static let notFound = "credentials not found in native keychain"

    /// Runs the helper on the calling thread with the process's streams; returns the exit status.
    package static func runOnMainThread(_ arguments: [String]) -> Int32 {
        StandardStreams.holdStandardDescriptors()
        SesameCLI.sayStateFileWarnings()
        return SesameCLI.checkingOutput(MainThreadExecutor.run { await main(arguments) }, program: name)
    }

    /// Runs one request; returns the exit status.
    package static func main(
        _ arguments: [String], io: CommandIO = .standard,
        environment: [String: String] = ProcessEnvironment.current(),
        keyring: @escaping DesktopStorage.KeyringFactory = DesktopStorage.secretService
    ) async -> Int32 {
        let context = CommandContext(
            io: io, environment: environment, terminal: .current(environment: environment), keyring: keyring)
        do {
            return try await run(arguments, context: context)
        } catch {
            let failure = CommandFailure.from(error, provider: "PROVIDER")
            // The protocol's clients show what the helper printed on standard output.
            io.write("\(name): \(Terminal.printable(failure.message))\n")
            return failure.status
        }
    }

    /// What the helper takes before its action: only `--min-valid`.
    static let spec = CommandSpec(name: name, summary: "", options: [TokenOptions.minValidOption])

    private static func run(_ arguments: [String], context: CommandContext) async throws -> Int32 {
        let parsed: ParsedArguments
        do {
            parsed = try ArgumentParser.parse(arguments, for: spec)
        } catch {
            throw CommandFailure(error.message, status: ExitStatus.usage)
        }
        let minValid: Duration?
        do {
            minValid = try TokenOptions.minValid(parsed, command: name)
        } catch {
            throw CommandFailure(error.message, status: ExitStatus.usage)
        }
        guard parsed.positionals.count == 1, let verb = parsed.positionals.first else {
            throw CommandFailure(
                "give one of get, list, store, erase or version, with the request on standard input (docker, "
                    + "podman and skopeo run it so from 'credHelpers' in their auth file).", status: ExitStatus.usage)
        }
        switch verb {
        case "get":
            return try await get(context: context, minValid: minValid)
        case "list":
            _ = try await readInput(context)
            let configuration = try DesktopConfiguration.resolve(environment: context.environment)
            let hosts = try RegistryMapping.all(in: configuration)
            let object = Dictionary(uniqueKeysWithValues: hosts.map { ($0.host.text, JSONValue.string($0.username)) })
            context.io.write(JSONValue.object(object).jsonText + "\n")
            return ExitStatus.success
        case "store", "erase":
            // Read to the end, so the client's write does not fail on a closed pipe; kept nowhere.
            _ = try? await readInput(context)
            throw CommandFailure(
                "does not \(verb == "store" ? "store passwords" : "erase logins"): it answers from Sesame's stored "
                    + "logins, which '\(Desktop.programName) login' makes and '\(Desktop.programName) logout' removes; nothing was changed.",
                status: ExitStatus.failure)
        case "version":
            context.io.write("\(name) (\(Desktop.programName) \(SesameCLI.version))\n")
            return ExitStatus.success
        default:
            throw CommandFailure(
                "unknown credential action '\(verb.sanitizedForTerminal)'; the actions are get, list, store, erase "
                    + "and version.", status: ExitStatus.usage)
        }
    }

    /// `get`: the token of the login mapped to the server's host.
    private static func get(context: CommandContext, minValid: Duration?) async throws -> Int32 {
        let input = try await readInput(context)
        guard let text = String(data: input, encoding: .utf8) else {
            throw CommandFailure("the server URL on standard input is not UTF-8 text.", status: ExitStatus.dataError)
        }
        let serverURL = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let host: RegistryHost
        do {
            host = try RegistryHost(serverURL: serverURL)
        } catch {
            throw CommandFailure(
                "refused the request: \(error); give a registry's host, as in 'registry.example.com' or 'https://registry.example.com'.",
                status: ExitStatus.dataError)
        }
        let configuration = try DesktopConfiguration.resolve(environment: context.environment)
        guard let mapping = try RegistryMapping.mapping(for: host, in: configuration) else {
            context.io.write(notFound + "\n")
            return ExitStatus.failure
        }
        let command = ProviderCommand(
            provider: mapping.provider, action: .token(TokenOptions(minValid: minValid)), account: mapping.account)
        let token: AccessToken
        do {
            token = try await AccountCommands(command: command, context: context).validToken()
        } catch {
            let failure = CommandFailure.from(error, provider: mapping.provider)
            throw CommandFailure(
                "no token for \(host) (mapped to \(mapping.provider.sanitizedForTerminal) in the config file's "
                    + "\"registries\"): \(failure.message)", status: failure.status)
        }
        // The token goes to the program that asked, on standard output, and nowhere else.
        let answer = JSONValue.object([
            "ServerURL": .string(serverURL), "Username": .string(mapping.username),
            "Secret": .string(token.tokenString),
        ])
        context.io.write(answer.jsonText + "\n")
        return ExitStatus.success
    }

    /// The most a request may hold: a server URL, or (for `store`) one small JSON object.
    package static let maximumInputSize = 64 * 1024

    private static func readInput(_ context: CommandContext) async throws -> Data {
        let input = await context.io.readStandardInput(maximumInputSize)
        guard input.count <= maximumInputSize else {
            throw CommandFailure(
                "refused the request: standard input holds more than \(maximumInputSize / 1024) KiB; the protocol "
                    + "sends a server URL.", status: ExitStatus.dataError)
        }
        return input
    }
}

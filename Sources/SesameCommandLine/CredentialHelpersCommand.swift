import Foundation
import Sesame
import SesameDesktop

/// `sesame credential-helpers [--json]`: what other tools are wired to take their tokens from
/// Sesame, and the lines that wire them: git, kubectl and container registries.
package struct CredentialHelpersCommand: Sendable, Equatable {
    /// `--json`.
    package var json = false

    static let definition = CommandDefinition(
        name: "credential-helpers",
        spec: CommandSpec(
            name: "credential-helpers",
            summary: "Show how git, kubectl and container tools get their tokens from Sesame.",
            synopses: ["[--json]"],
            discussion: """
                Lists the container registries the config file's "registries" object maps to a login, \
                whether \(DockerCredentialHelper.name) is on PATH, and the lines that wire each tool.
                """,
            options: [OptionSpec("json", "Print one JSON object.")])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "credential-helpers")
        return .credentialHelpers(CredentialHelpersCommand(json: parsed.flags.contains("json")))
    }

    func run(context: CommandContext) throws -> Int32 {
        let configuration = try DesktopConfiguration.resolve(environment: context.environment)
        let registries = try RegistryMapping.all(in: configuration)
        let known = Set(try Desktop.names(configuration: configuration).map(\.name))
        let helper = Self.onPath(DockerCredentialHelper.name, environment: context.environment)
        let program = KubeconfigCommand.programPath
        let example = Desktop.providers.first?.name ?? "PROVIDER"
        let gitHelper = "!\(program) git-credential"
        // docker runs docker-credential-NAME for a host whose entry is NAME.
        let helperSuffix = JSONValue.string(Desktop.programName)
        let authFile = JSONValue.object([
            "credHelpers": .object(Dictionary(uniqueKeysWithValues: registries.map { ($0.host.text, helperSuffix) }))
        ])
        if json {
            let entries: [JSONValue] = registries.map { mapping in
                var entry: [String: JSONValue] = [
                    "host": .string(mapping.host.text), "provider": .string(mapping.provider),
                    "username": .string(mapping.username), "knownProvider": .bool(known.contains(mapping.provider)),
                ]
                entry["account"] = mapping.account.map { .string($0) } ?? .null
                return .object(entry)
            }
            let document = JSONValue.object([
                "git": .object(["helper": .string(gitHelper)]),
                "kubectl": .object([
                    "command": .string(program), "args": .array([.string("kubectl-credential"), .string("PROVIDER")]),
                ]),
                "registries": .array(entries),
                "dockerCredentialHelper": helper.map { .string($0) } ?? .null,
                "authFile": authFile,
                "configFile": .string(configuration.configFileDescription),
            ])
            context.io.write(document.jsonText + "\n")
            return ExitStatus.success
        }
        var text = """
            git       git config --global credential.https://HOST.helper '\(gitHelper)'
            kubectl   \(Desktop.programName) kubeconfig PROVIDER  (prints the users: entry; e.g. '\(Desktop.programName) kubeconfig \(example)')
            registries in \(configuration.configFileDescription) ("registries"):

            """
        if registries.isEmpty {
            text += "  none; add \"registries\": {\"HOST\": \"PROVIDER\"} to map a registry to a login\n"
        }
        for mapping in registries {
            let account = mapping.account.map { "account '\($0.sanitizedForTerminal)'" } ?? "the active account"
            let warning =
                known.contains(mapping.provider) ? "" : "  (unknown provider: see '\(Desktop.programName) providers')"
            text +=
                "  \(mapping.host.text) -> \(mapping.provider.sanitizedForTerminal), \(account), user name "
                + "\(mapping.username.sanitizedForTerminal)\(warning)\n"
        }
        text +=
            "\(DockerCredentialHelper.name): "
            + (helper ?? "not on PATH (scripts/install puts it beside \(Desktop.programName))") + "\n"
        if !registries.isEmpty {
            text += "auth file (~/.docker/config.json, or containers' auth.json): \(authFile.jsonText)\n"
        }
        context.io.write(text)
        return ExitStatus.success
    }

    /// The full path of `program` in `PATH`, if it is there.
    static func onPath(_ program: String, environment: [String: String]) -> String? {
        for directory in (environment["PATH"] ?? "").split(separator: ":") where !directory.isEmpty {
            let path = "\(directory)/\(program)"
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }
}

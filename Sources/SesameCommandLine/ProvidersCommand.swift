import Foundation
import SesameDesktop

/// `sesame providers`.
enum ProvidersCommand {
    static let definition = CommandDefinition(
        name: "providers",
        spec: CommandSpec(name: "providers", summary: "List the providers and the settings each reads.", synopses: [""])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "providers")
        return .providers
    }

    static func run(io: CommandIO) -> Int32 {
        for plugin in Desktop.providers {
            var text = "\(plugin.name)\n  \(plugin.summary)\n"
            for setting in plugin.settings(instance: plugin.name) {
                let places =
                    [
                        setting.isFlag ? "--\(setting.name) (login)" : nil, setting.environment,
                        setting.configKey.map { "\(plugin.name).\($0) in the config file" },
                    ].compactMap { $0 }
                text += "  \(setting.name): \(setting.summary) \(places.joined(separator: ", "))\n"
            }
            io.write(text)
        }
        return ExitStatus.success
    }
}

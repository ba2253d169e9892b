import Foundation
import Sesame
import SesameCurl
import SesameDesktop

/// `sesame providers`.
enum ProvidersCommand {
    static let definition = CommandDefinition(
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

/// `sesame doctor`.
package struct DoctorCommand: Sendable, Equatable {
    package var storage: StorageMode?

    static let definition = CommandDefinition(
        spec: CommandSpec(
            name: "doctor",
            summary: "Check the D-Bus session, the keyring, the storage policy and the providers' addresses.",
            synopses: ["[--storage MODE]"],
            discussion: "Each line says what was checked; a line that is not fine says what to do. Exits 69 when "
                + "something needed is missing.",
            options: [storageOption])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "doctor")
        return .doctor(DoctorCommand(storage: try storageMode(parsed, command: "doctor")))
    }

    func run(context: CommandContext) async -> Int32 {
        var lines: [DoctorLine] = []
        let environment = context.environment
        // D-Bus session bus.
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        let secretService: Bool?
        if bus.isEmpty {
            lines.append(
                DoctorLine(
                    .problem, "No D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set), so there is no keyring.",
                    fix: "log in to a desktop session, or run under 'dbus-run-session', or use --storage file"))
            secretService = nil
        } else {
            let address = bus.split(separator: ",").first.map(String.init) ?? bus
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            secretService = await DBusProbe.nameHasOwner("org.freedesktop.secrets", environment: environment)
            switch secretService {
            case true?:
                lines.append(DoctorLine(.ok, "Secret Service (org.freedesktop.secrets) is present."))
                switch await DBusProbe.defaultCollectionLocked(environment: environment) {
                case false?: lines.append(DoctorLine(.ok, "The default keyring collection is unlocked."))
                case true?:
                    lines.append(
                        DoctorLine(
                            .warning, "The default keyring collection is locked.",
                            fix: "unlock it (log in to the desktop, or open Passwords and Keys); Sesame will ask"))
                case nil:
                    lines.append(
                        DoctorLine(
                            .warning, "There is no default keyring collection (or it could not be read).",
                            fix: "create a default keyring in Passwords and Keys (seahorse)"))
                }
            case false?:
                lines.append(
                    DoctorLine(
                        .problem, "No Secret Service on the session bus.",
                        fix: "install and start gnome-keyring (or KeePassXC with Secret Service), or use --storage file"
                    ))
            case nil:
                lines.append(
                    DoctorLine(
                        .warning, "Could not ask the bus about the Secret Service (dbus-send is missing).",
                        fix: "install the dbus package"))
            }
        }
        // Storage policy.
        var status = ExitStatus.success
        do {
            let configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: environment)
            if configuration.storage.value == .file || configuration.storage.value == .memory {
                // The keyring is not in use, so its absence is worth knowing but not a failure.
                lines = lines.map { line in
                    var line = line
                    if line.level == .problem { line.level = .warning }
                    return line
                }
            }
            if let file = configuration.configFile { lines.append(DoctorLine(.ok, "Config file: \(file.path).")) }
            do {
                let selection = try await DesktopStorage.select(
                    configuration.storage, keyring: context.keyring, environment: environment)
                lines.append(DoctorLine(.ok, "Storage: \(selection.backend), because of the \(selection.reason)."))
            } catch {
                lines.append(
                    DoctorLine(
                        .problem,
                        "Storage: \(configuration.storage.value) (from \(configuration.storage.source)) "
                            + "cannot be used: \(error)"))
                status = ExitStatus.unavailable
            }
        } catch {
            lines.append(DoctorLine(.problem, "Configuration: \(error)"))
            status = ExitStatus.unavailable
        }
        lines += await providerLines(context: context)
        let terminal = context.terminal
        for line in lines {
            let mark: String
            switch line.level {
            case .ok: mark = terminal.green("✓")
            case .info: mark = "•"
            case .warning: mark = terminal.yellow("!")
            case .problem:
                mark = terminal.red("✗")
                if status == ExitStatus.success { status = ExitStatus.unavailable }
            }
            let fix = line.fix.map { line.level == .info ? "; \($0)." : " To fix: \($0)." } ?? ""
            context.io.write("\(mark) \(line.text)\(fix)\n")
        }
        return status
    }
}

extension DoctorCommand {
    /// Each provider's (and each configured instance's) doctor lines.
    private func providerLines(context: CommandContext) async -> [DoctorLine] {
        let configuration: DesktopConfiguration
        let names: [(name: String, plugin: any ProviderPlugin)]
        do {
            configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: context.environment)
            names = try Desktop.names(configuration: configuration)
        } catch {
            return [DoctorLine(.problem, "Configuration: \(error)")]
        }
        var lines: [DoctorLine] = []
        for (name, plugin) in names {
            lines += await plugin.doctor(
                ProviderConnectionRequest(
                    instance: name, configuration: configuration, environment: context.environment,
                    terminal: context.terminal, transport: DoctorProbe.transport, emulators: nil, purpose: .doctor))
        }
        return lines
    }
}

/// Asks the session bus with `dbus-send`: `NameHasOwner` tells whether a Secret Service is
/// running without starting one, and the collection's `Locked` property without unlocking it.
enum DBusProbe {
    /// Runs `dbus-send` on a thread of its own (it may wait for the reply timeout) and returns
    /// its reply, or nil when it failed.
    private static func dbusSend(_ arguments: [String], environment: [String: String]) async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let output = Pipe()
                let process = ChildProcess(
                    executableURL: URL(fileURLWithPath: "/usr/bin/env"),
                    arguments: ["dbus-send", "--session", "--print-reply", "--reply-timeout=2000"] + arguments,
                    environment: environment, standardInput: .null, standardOutput: .pipe(output),
                    standardError: .null)
                guard (try? process.run()) != nil else { return continuation.resume(returning: nil) }
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(
                    returning: process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil)
            }
        }
    }

    static func nameHasOwner(_ name: String, environment: [String: String]) async -> Bool? {
        guard
            let reply = await dbusSend(
                [
                    "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                    "string:\(name)",
                ], environment: environment)
        else { return nil }
        return reply.contains("boolean true")
    }

    static func defaultCollectionLocked(environment: [String: String]) async -> Bool? {
        guard
            let alias = await dbusSend(
                [
                    "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.ReadAlias", "string:default",
                ], environment: environment),
            let path = alias.split(separator: "\"").dropFirst().first.map(String.init), path != "/"
        else { return nil }
        guard
            let reply = await dbusSend(
                [
                    "--dest=org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties.Get",
                    "string:org.freedesktop.Secret.Collection", "string:Locked",
                ], environment: environment)
        else { return nil }
        return reply.contains("boolean true")
    }
}

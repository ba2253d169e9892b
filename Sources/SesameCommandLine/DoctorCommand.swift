import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameKeyring

/// `sesame doctor`.
package struct DoctorCommand: Sendable, Equatable {
    package var storage: StorageMode?

    static let definition = CommandDefinition(
        name: "doctor",
        spec: CommandSpec(
            name: "doctor",
            summary: "Check the D-Bus session, the keyring, the storage policy and the providers' addresses.",
            synopses: ["[--storage MODE]"],
            discussion: "Each line says what was checked; a line that is not fine says what to do. Exits 69 when "
                + "something needed is missing. No check waits longer than 3 s and the whole command ends within "
                + "10 s, so a bus or keyring that never answers is reported, not waited for.",
            options: [storageOption])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "doctor")
        return .doctor(DoctorCommand(storage: try storageMode(parsed, command: "doctor")))
    }

    func run(context: CommandContext) async -> Int32 {
        // The three parts run at once, each probe bounded by DoctorLimits.perProbe and each part by
        // DoctorLimits.overall, so a silent bus or a dead network never makes doctor hang.
        let environment = context.environment
        let storage = self.storage
        async let bus = withTimeLimit(DoctorLimits.overall) { await Self.busLines(environment: environment) }
        async let policy = withTimeLimit(DoctorLimits.overall) {
            await Self.storageLines(storage: storage, context: context)
        }
        async let providers = withTimeLimit(DoctorLimits.overall) {
            await Self.providerLines(storage: storage, context: context)
        }
        let limit = "\(DoctorLimits.overall.components.seconds) s"
        var lines =
            await bus
            ?? [DoctorLine(.problem, "The D-Bus checks did not finish within \(limit).", fix: "use --storage file")]
        let (storageLines, keyringInUse, storageStatus) =
            await policy
            ?? (
                [DoctorLine(.problem, "The storage check did not finish within \(limit).")], true,
                ExitStatus.unavailable
            )
        if !keyringInUse {
            // The keyring is not in use, so its absence is worth knowing but not a failure.
            lines = lines.map { line in
                var line = line
                if line.level == .problem { line.level = .warning }
                return line
            }
        }
        lines = Self.placeLines(environment: environment) + lines
        lines += storageLines
        lines += await providers ?? [DoctorLine(.problem, "The providers' checks did not finish within \(limit).")]
        var status = storageStatus
        let terminal = context.terminal.standardOutput
        for line in lines {
            let mark: String
            switch line.level {
            case .ok: mark = terminal.green("✓")
            case .info: mark = "•"
            case .warning: mark = terminal.yellow("!")
            case .problem:
                mark = terminal.red("✗")
                // The first problem says the status: a wrong setting 78, a missing service 69.
                if status == ExitStatus.success { status = line.status?.rawValue ?? ExitStatus.unavailable }
            }
            let fix = line.fix.map { line.level == .info ? "; \($0)." : " To fix: \($0)." } ?? ""
            context.io.write("\(mark) \(line.text)\(fix)\n")
        }
        return status
    }
}

extension DoctorCommand {
    /// The session bus and the Secret Service on it, each question bounded.
    static func busLines(
        environment: [String: String], backends: [any StorageBackend] = Desktop.storageBackends
    ) async -> [DoctorLine] {
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        guard !bus.isEmpty else {
            return [
                DoctorLine(
                    .problem, "No D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set), so there is no keyring.",
                    fix: "log in to a desktop session, or run under 'dbus-run-session'; or "
                        + storeAdvice(backends: backends))
            ]
        }
        let address = bus.split(separator: ",").first.map(String.init) ?? bus
        let limit = "\(DoctorLimits.perProbe.components.seconds) s"
        let silent = DoctorLine(
            .problem, "The D-Bus session bus at \(address) accepts connections but did not answer within \(limit).",
            fix: "restart the desktop session (or the bus), or use --storage file")
        var lines: [DoctorLine] = []
        switch await DBusProbe.nameHasOwner("org.freedesktop.secrets", environment: environment) {
        case .answer(true):
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            // Who provides it, and advice in that service's terms (SesameKeyring), bounded.
            let findings = await withTimeLimit(DoctorLimits.perProbe) { () -> Result<[DoctorLine], any Error> in
                do {
                    let info = try await SecretServiceInfo.probe(busAddress: bus)
                    return .success(
                        info.findings.map { finding in
                            let level: DoctorLine.Level =
                                switch finding.level {
                                case .ok: .ok
                                case .warning: .warning
                                case .problem: .problem
                                }
                            // The library offers the `file` storage policy; here it is a flag.
                            var fix = finding.fix
                            if finding.suggestsFileStore { fix = fix.map { "\($0) (--storage file)" } }
                            return DoctorLine(level, finding.text, fix: fix)
                        })
                } catch {
                    return .failure(error)
                }
            }
            switch findings {
            case .success(let found)?: lines += found
            case .failure(let error)?:
                lines.append(
                    DoctorLine(.warning, "The Secret Service could not be asked about itself: \(error.sentence)"))
            case nil:
                lines.append(
                    DoctorLine(
                        .problem, "The Secret Service did not answer within \(limit).",
                        fix: "restart the Secret Service in use (gnome-keyring, KeePassXC), or use --storage file"))
            }
        case .answer(false):
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            lines.append(
                DoctorLine(
                    .problem, "No Secret Service on the session bus.",
                    fix: "install and start gnome-keyring (or KeePassXC with Secret Service), or use --storage file"))
        case .noAnswer:
            lines.append(silent)
        case .failed:
            lines.append(DoctorLine(.ok, "D-Bus session bus: \(address)."))
            lines.append(
                DoctorLine(
                    .warning, "Could not ask the bus about the Secret Service (dbus-send is missing or failed).",
                    fix: "install the dbus package"))
        }
        return lines
    }

    /// The configuration and the storage it selects: the lines, whether the keyring is in use, and
    /// the status so far.
    static func storageLines(
        storage: StorageMode?, context: CommandContext
    ) async -> ([DoctorLine], keyringInUse: Bool, status: Int32) {
        let configuration: DesktopConfiguration
        do {
            configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: context.environment)
        } catch {
            // A bad setting is 78 here as in every other command.
            let status = (error as? DesktopError)?.status.rawValue ?? ExitStatus.unavailable
            return ([DoctorLine(.problem, "Configuration: \(error.sentence)")], true, status)
        }
        var keyringInUse = [.keyring, .keyringOrFile, .auto].contains(configuration.storage.value)
        var lines: [DoctorLine] = []
        if let file = configuration.configFile { lines.append(DoctorLine(.ok, "Config file: \(file.path).")) }
        let keyring = context.keyring
        let environment = context.environment
        let selected = await withTimeLimit(DoctorLimits.perProbe) {
            () -> Result<(lines: [DoctorLine], kind: String), any Error> in
            do {
                let selection = try await DesktopStorage.select(
                    configuration.storage, keyring: keyring, environment: environment)
                let line = DoctorLine(.ok, "Storage: \(selection.backend), because of the \(selection.reason).")
                return .success(([line] + (await DesktopStorage.doctorLines(for: selection)), selection.kind))
            } catch {
                return .failure(error)
            }
        }
        let cannot = "Storage: \(configuration.storage.value) (from \(configuration.storage.source)) cannot be used"
        switch selected {
        case .success(var found)?:
            // Logins in the file, the active account and the emulators' state are all written to
            // the state directory: one that cannot be written is no working store.
            let state = configuration.stateDirectory.path
            let unwritable =
                FileManager.default.fileExists(atPath: state) && !FileManager.default.isWritableFile(atPath: state)
            if unwritable, found.kind == "file", !found.lines.isEmpty { found.lines[0].level = .problem }
            lines += found.lines
            keyringInUse = found.kind == "keyring"
            if unwritable {
                lines.append(
                    DoctorLine(
                        .problem,
                        "The state directory \(state) cannot be written, so no login, active account or emulator "
                            + "state can be kept there",
                        fix: "make it writable, or set XDG_STATE_HOME to a directory that is", status: .cannotCreate))
            }
            lines += Desktop.storageBackends.flatMap { $0.doctorLines(environment: environment) }
            return (lines, keyringInUse, unwritable ? ExitStatus.cannotCreate : ExitStatus.success)
        case .failure(let error)?:
            lines.append(DoctorLine(.problem, "\(cannot): \(error.sentence)"))
            lines += Desktop.storageBackends.flatMap { $0.doctorLines(environment: environment) }
        case nil:
            lines.append(
                DoctorLine(
                    .problem,
                    "\(cannot): the keyring did not answer within \(DoctorLimits.perProbe.components.seconds) s.",
                    fix: "use --storage file, or restart the keyring"))
        }
        return (lines, keyringInUse, ExitStatus.unavailable)
    }
}

extension DoctorCommand {
    /// Each provider's (and each configured instance's) doctor lines, checked at once.
    static func providerLines(storage: StorageMode?, context: CommandContext) async -> [DoctorLine] {
        let configuration: DesktopConfiguration
        let names: [(name: String, plugin: any ProviderPlugin)]
        do {
            configuration = try DesktopConfiguration.resolve(
                overrides: .init(storage: storage), environment: context.environment)
            names = try Desktop.names(configuration: configuration)
        } catch {
            return [.problem("Configuration", error)]
        }
        // The stored logins, for the plug-ins to judge (the storage lines report a store that fails).
        let stored = await withTimeLimit(DoctorLimits.perProbe) { () -> [StoredCredential]? in
            guard
                let selection = try? await DesktopStorage.select(
                    configuration.storage, keyring: context.keyring, environment: context.environment)
            else { return nil }
            return try? await selection.store.list()
        }
        return await withTaskGroup(of: (Int, [DoctorLine]).self) { group in
            for (index, entry) in names.enumerated() {
                group.addTask {
                    let network: NetworkSettings
                    do {
                        network = try NetworkSettings.resolve(
                            instance: entry.name, plugin: entry.plugin, configuration: configuration,
                            environment: context.environment)
                    } catch {
                        return (index, [.problem(entry.name, error)])
                    }
                    var request = ProviderConnectionRequest(
                        instance: entry.name, configuration: configuration, environment: context.environment,
                        terminal: context.terminal,
                        transport: DoctorProbe.transport(network: network, environment: context.environment),
                        emulators: nil, purpose: .doctor)
                    request.storedLogins = (stored ?? nil)?.filter { $0.key.provider.rawValue == entry.name }
                    let lines = Self.networkLines(entry.name, network) + (await entry.plugin.doctor(request))
                    return (index, lines)
                }
            }
            var results: [(Int, [DoctorLine])] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }
}

extension DoctorCommand {
    /// What `instance`'s requests trust and go through, when a setting changed it: one line.
    static func networkLines(_ instance: String, _ network: NetworkSettings) -> [DoctorLine] {
        var parts: [String] = []
        if let caBundle = network.caBundle { parts.append("trusts the CAs in \(caBundle.value) (\(caBundle.source))") }
        if let directory = network.caDirectory { parts.append("and in \(directory.value) (\(directory.source))") }
        if let proxy = network.proxy {
            parts.append(
                proxy.value == "none"
                    ? "goes direct, whatever the proxy variables say (\(proxy.source))"
                    : "goes through the proxy \(network.transportConfiguration().proxy) (\(proxy.source))")
        }
        return parts.isEmpty ? [] : [DoctorLine(.info, "\(instance): " + parts.joined(separator: "; ") + ".")]
    }
}

extension DoctorCommand {
    /// What kind of machine this is, when it is one without a desktop (an SSH session, a
    /// container, WSL), and what works there: one line each.
    static func placeLines(
        environment: [String: String], backends: [any StorageBackend] = Desktop.storageBackends,
        fileExists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) },
        procVersion: () -> String = { (try? String(contentsOfFile: "/proc/version", encoding: .utf8)) ?? "" }
    ) -> [DoctorLine] {
        var lines: [DoctorLine] = []
        let noBus = (environment["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty
        let storeAdvice = storeAdvice(backends: backends)
        if !(environment["SSH_CONNECTION"] ?? "").isEmpty || !(environment["SSH_TTY"] ?? "").isEmpty {
            // pass asks for the passphrase through gpg-agent's pinentry, on this terminal.
            let pinentry = backends.contains { $0.name == "pass" } ? "; with pass, set GPG_TTY=$(tty)" : ""
            lines.append(
                DoctorLine(
                    .info, "An SSH session: no browser here, so log in with the device flow (or paste the redirect)",
                    fix: storeAdvice + pinentry))
        }
        if fileExists("/.dockerenv") || fileExists("/run/.containerenv") {
            lines.append(
                DoctorLine(
                    .info,
                    "A container\(noBus ? " with no session bus" : ""): there is no desktop keyring unless one is "
                        + "started", fix: "mount one; or \(storeAdvice)"))
        }
        if !(environment["WSL_DISTRO_NAME"] ?? "").isEmpty || procVersion().lowercased().contains("microsoft") {
            lines.append(
                DoctorLine(
                    .info, "WSL: Linux's keyring is usually absent and the Windows browser opens for logins",
                    fix: "start gnome-keyring under dbus-run-session; or \(storeAdvice)"))
        }
        return lines
    }

    /// Where logins can go without a keyring: the stores this program registered
    /// (``StorageBackend/setupAdvice``, pass's `pass init KEYID`), then the file every program has.
    static func storeAdvice(backends: [any StorageBackend]) -> String {
        (backends.compactMap(\.setupAdvice) + ["opt into --storage file"]).joined(separator: "; or ")
    }
}

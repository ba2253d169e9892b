import Foundation
import Sesame

/// One setting a provider reads: from a flag (when it may be given on the command line), an
/// environment variable, or a key of its object in the config file, the first that has it
/// winning.
public struct ProviderSetting: Sendable {
    /// What values are allowed.
    public enum Kind: Sendable, Hashable {
        /// Any non-empty text without control characters.
        case text
        /// An `http` or `https` address with a host.
        case url
        /// A list: comma-separated in a flag or variable, a JSON array (or comma-separated text)
        /// in the config file.
        case list
        /// Digits only (Facebook app ids).
        case digits
        /// A flag that takes no value.
        case flag
        /// One of these words.
        case choice([String])
        /// An API version written `v` digits `.` digits (`v27.0`).
        case version
    }

    /// The flag without dashes (`app-id`), also the setting's identifier.
    public var name: String
    /// The placeholder of its value in help (`ID`).
    public var valueName: String
    /// What it is, for help and `sesame providers`.
    public var summary: String
    /// The environment variable, if it can be set there.
    public var environment: String?
    /// The key in the provider's object of the config file, if it can be set there.
    public var configKey: String?
    /// Whether it may be given as a flag of `sesame login` (never for secrets: argv is visible
    /// to every user in `ps`).
    public var isFlag: Bool
    /// A secret: never a flag, never printed.
    public var isSecret: Bool
    /// What values are allowed.
    public var kind: Kind

    /// Creates a setting.
    public init(
        _ name: String, value: String = "VALUE", kind: Kind = .text, flag: Bool = true, secret: Bool = false,
        environment: String? = nil, configKey: String? = nil, _ summary: String
    ) {
        self.name = name
        self.valueName = value
        self.summary = summary
        self.environment = environment
        self.configKey = configKey
        self.isFlag = flag && !secret
        self.isSecret = secret
        self.kind = kind
    }

    /// Why `value` is not allowed, or `nil` when it is.
    public func problem(with value: String) -> String? {
        if value.isEmpty { return "it is empty" }
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "it contains control characters"
        }
        switch kind {
        case .text, .list, .flag:
            return nil
        case .digits:
            return value.allSatisfy(\.isASCII) && value.allSatisfy(\.isNumber) ? nil : "it must be digits only"
        case .url:
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host?.isEmpty == false
            else { return "it must be an http(s) address such as https://example.com" }
            return nil
        case .choice(let words):
            return words.contains(value) ? nil : "it must be one of \(words.joined(separator: ", "))"
        case .version:
            let parts = value.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
            let ok =
                value.hasPrefix("v") && parts.count == 2
                && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
            return ok ? nil : "it must be written like v27.0"
        }
    }
}

extension ProviderSetting {
    /// Checks a provider's object in the config file: each key must be the config key of one of
    /// `settings` (or an old spelling in `aliases`, old → new), and each value of the type and
    /// form that setting allows. Nothing is dropped: a key Sesame does not know would otherwise
    /// leave the setting it was meant for at its default (the emulator, say) without a word.
    ///
    /// - Parameters:
    ///   - section: the provider's object.
    ///   - path: its path in the file, for messages (`facebook`, `oidc.work`).
    ///   - settings: the provider's settings, whose config keys the object may have.
    ///   - configuration: the configuration the object comes from, for the file's name.
    ///   - aliases: old spellings of keys that are still read, old → new.
    /// - Throws: ``DesktopError`` (78) naming the file, the key's path and what is allowed.
    public static func checkSection(
        _ section: [String: JSONValue], path: String, settings: [ProviderSetting],
        configuration: DesktopConfiguration, aliases: [String: String] = [:]
    ) throws {
        // Every instance may name its own CA file and proxy (NetworkSettings).
        let settings = settings + NetworkSettings.settings(variable: { _ in nil })
        let byKey = Dictionary(
            settings.compactMap { setting in setting.configKey.map { ($0, setting) } }, uniquingKeysWith: { a, _ in a })
        let file = configuration.configFileDescription
        for key in section.keys.sorted() {
            guard let setting = byKey[aliases[key] ?? key] else {
                throw DesktopError(
                    "\(file) has an unknown key \"\(path).\(key.sanitizedForTerminal)\"; the keys \(path) may have are "
                        + byKey.keys.sorted().joined(separator: ", ") + " (see '\(Desktop.programName) providers').",
                    status: .config)
            }
            _ = try setting.configValue(section[key]!, key: key, source: "\(file) (\(path).\(key))")
        }
    }

    /// The text of `raw`, this setting's value under `key` in the config file (from `source`,
    /// for messages), checked as ``problem(with:)`` checks a value.
    ///
    /// - Throws: ``DesktopError`` (78) for a value of the wrong type or form.
    func configValue(_ raw: JSONValue, key: String, source: String) throws -> String {
        let text: String
        switch raw {
        case .string(let string):
            text = string
        case .array(let items) where kind == .list:
            let texts = items.compactMap(\.stringValue)
            guard texts.count == items.count else {
                throw DesktopError("\(source) must be a list of strings.", status: .config)
            }
            text = texts.joined(separator: ",")
        default:
            throw DesktopError(
                "\(source) is \(raw.typeDescription), but it must be "
                    + (kind == .list ? "a list of strings" : "a string")
                    + " (write it in quotes, as in \"\(key)\": \"...\").", status: .config)
        }
        try check(text, source: source)
        return text
    }

    /// Throws when `value`, from `source`, is not allowed.
    func check(_ value: String, source: String) throws {
        guard let problem = problem(with: value) else { return }
        throw DesktopError(
            "\(source) is \(isSecret ? "set" : "'\(value.sanitizedForTerminal)'"), which is not a valid value for "
                + "\(name): \(problem).", status: .config)
    }
}

/// Why a provider is being connected, so it starts no more than the command needs.
public enum ConnectionPurpose: Sendable, Hashable {
    /// `sesame login`: the built-in emulator, when used, is announced.
    case login
    /// Any other command that uses a login (`token`, `logout`, `switch`, `permissions`).
    case use
    /// `sesame status`.
    case status
    /// `sesame doctor`: nothing is started.
    case doctor
}

/// What ``ProviderPlugin/connect(_:)`` is handed.
public struct ProviderConnectionRequest: Sendable {
    /// The name the provider was asked for by (a plug-in's name or an instance's).
    public var instance: String
    /// Values of the provider's flags from the command line, by setting name.
    public var flags: [String: String]
    /// The resolved configuration (storage, config file).
    public var configuration: DesktopConfiguration
    /// The environment.
    public var environment: [String: String]
    /// The terminal.
    public var terminal: Terminal
    /// What sends requests.
    public var transport: any HTTPTransport
    /// The built-in emulators the program allows (the `sesame` command and the examples allow
    /// them; a library app gets a configuration error instead unless it asks for them).
    public var emulators: BuiltInEmulators?
    /// Why the provider is connected.
    public var purpose: ConnectionPurpose
    /// Reads a secret the person gives on standard input (a prompt without echo on a terminal),
    /// for settings a flag asks to read that way; `nil` when the program has no standard input to
    /// offer. It throws, saying so, when standard input holds more than a secret could be.
    public var readSecret: (@Sendable (_ prompt: String) async throws -> String)?
    /// For `sesame doctor`: the logins stored under this instance's provider id, so that a plug-in
    /// can say what is wrong with one (a login its code no longer uses as it is); `nil` when the
    /// store was not read.
    public var storedLogins: [StoredCredential]?

    /// Creates a request.
    public init(
        instance: String, flags: [String: String] = [:], configuration: DesktopConfiguration,
        environment: [String: String], terminal: Terminal, transport: any HTTPTransport,
        emulators: BuiltInEmulators?, purpose: ConnectionPurpose,
        readSecret: (@Sendable (_ prompt: String) async throws -> String)? = nil
    ) {
        self.readSecret = readSecret
        self.instance = instance
        self.flags = flags
        self.configuration = configuration
        self.environment = environment
        self.terminal = terminal
        self.transport = transport
        self.emulators = emulators
        self.purpose = purpose
    }

    /// How renewals of this command's logins are kept apart from other processes' renewals of the
    /// same login, for the configured storage (``DesktopStorage/refreshLocking(for:environment:)``):
    /// what a plug-in gives each session it makes.
    public var refreshLocking: RefreshLocking {
        DesktopStorage.refreshLocking(for: configuration.storage.value, environment: environment)
    }

    /// The rate-limit budget `appID` of `provider` shares with the other processes using the
    /// configured storage (a fleet's, for `--storage postgres`), or `nil` for this process's own:
    /// what a plug-in gives the API clients it makes.
    public func rateLimitBudget(provider: ProviderID, appID: String) -> (any RateLimitBudget)? {
        configuration.storage.value.backend?.rateLimitBudget(
            provider: provider, appID: appID, environment: environment)
    }

    /// Hosts the person allows plain `http` to, although they are not loopback addresses:
    /// `SESAME_ALLOW_INSECURE_HTTP`, host names separated by commas. Every provider passes them to
    /// its endpoint check; by default there are none (RFC 9700: https, or http to loopback only).
    public var allowedInsecureHosts: Set<String> {
        Set(
            (environment["SESAME_ALLOW_INSECURE_HTTP"] ?? "").split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
    }

    /// Resolves `setting`: the flag, then the environment, then the config file's `section`
    /// (named `sectionPath` in messages), then `fallback`.
    ///
    /// - Throws: ``DesktopError`` (78) naming where a bad value came from and what is allowed.
    public func value(
        of setting: ProviderSetting, section: [String: JSONValue], sectionPath: String,
        fallback: Sourced<String>? = nil
    ) throws -> Sourced<String>? {
        func checked(_ value: String, source: String) throws -> Sourced<String> {
            try setting.check(value, source: source)
            return Sourced(value, source: source)
        }
        if setting.isFlag, let value = flags[setting.name] { return try checked(value, source: "--\(setting.name)") }
        if let variable = setting.environment, let value = environment[variable], !value.isEmpty {
            return try checked(value, source: variable)
        }
        if let key = setting.configKey, let raw = section[key] {
            let source = "\(configuration.configFileDescription) (\(sectionPath).\(key))"
            return Sourced(try setting.configValue(raw, key: key, source: source), source: source)
        }
        return fallback
    }

    /// The client secret `--client-secret-stdin` reads from standard input (a prompt without echo
    /// on a terminal), checked as `setting` checks a value; without the flag, `fallback`.
    ///
    /// - Throws: ``DesktopError``: 64 when this program cannot read standard input, 65 when it gave
    ///   no usable secret.
    package func clientSecret(
        orElse fallback: Sourced<String>?, checkedBy setting: ProviderSetting? = nil
    ) async throws -> Sourced<String>? {
        guard flags["client-secret-stdin"] != nil else { return fallback }
        guard let readSecret else {
            throw DesktopError("This program cannot read a client secret from standard input.", status: .usage)
        }
        let text = try await readSecret("Client secret for '\(instance)': ").trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard !text.isEmpty, setting?.problem(with: text) == nil else {
            throw DesktopError(
                "Standard input gave no usable client secret; pipe it in, as in "
                    + "'\(Desktop.programName) login \(instance) --client-secret-stdin < secret.txt'.",
                status: .dataError)
        }
        return Sourced(text, source: "standard input")
    }
}

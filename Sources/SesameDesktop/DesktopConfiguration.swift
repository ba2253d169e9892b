import Foundation
import Sesame
import SesameKeyring

/// Where a desktop app keeps its logins: the keyring module's policies (`auto`, the default;
/// `keyring`; `keyring-or-file`; `file`; `memory`), and the name of any ``StorageBackend`` the
/// program registered with ``Desktop/bootstrap(_:storage:emulators:programName:)`` (`pass`, `postgres`).
public struct StorageMode: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The mode's name as written in configuration and on the command line.
    public let rawValue: String

    /// The desktop keyring; fails when there is none (`StoragePolicy.keyring`).
    public static let keyring = StorageMode(name: "keyring")
    /// The keyring, or the 0600 file with a warning when there is none (`StoragePolicy.keyringOrFile`).
    public static let keyringOrFile = StorageMode(name: "keyring-or-file")
    /// The 0600 file, chosen explicitly (`StoragePolicy.file`).
    public static let file = StorageMode(name: "file")
    /// Memory only (`StoragePolicy.memory`).
    public static let memory = StorageMode(name: "memory")
    /// The keyring, else the first registered ``StorageBackend`` that is ready here, else a
    /// refusal naming the choices: never a silent plain file.
    public static let auto = StorageMode(name: "auto")

    /// The modes this module provides itself.
    public static let builtIn: [StorageMode] = [.keyring, .keyringOrFile, .file, .memory, .auto]

    /// Every mode this program knows: the built-in ones, then the registered backends' names.
    public static var allCases: [StorageMode] {
        builtIn + Desktop.storageBackends.map { StorageMode(name: $0.name) }
    }

    /// The mode a desktop program uses unless told otherwise.
    public static let `default`: StorageMode = .auto

    /// The mode named `rawValue`, or `nil` when this program knows no such mode.
    public init?(rawValue: String) {
        guard Self.allCases.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }

    private init(name: String) { rawValue = name }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The mode's name as written in configuration and on the command line.
    public var description: String { rawValue }

    /// The keyring module's policy for this mode, or `nil` for a registered backend.
    public var policy: StoragePolicy? { Self.builtIn.contains(self) ? StoragePolicy(rawValue: rawValue) : nil }

    /// The registered backend this mode names, or `nil` for a built-in mode.
    public var backend: (any StorageBackend)? { Desktop.storageBackends.first { $0.name == rawValue } }

    /// One line about what the mode does, for help output.
    public var summary: String {
        if self == .auto { return "the keyring, else the first registered store that is ready; never a plain file" }
        return backend?.summary ?? policy?.summary ?? rawValue
    }
}

/// One setting and where it came from, so `sesame doctor` can say why.
public struct Sourced<Value: Sendable & Hashable>: Sendable, Hashable {
    /// The value.
    public var value: Value
    /// Where it came from: `--app-id`, `SESAME_FACEBOOK_APP_ID`, the config file's path, or `default`.
    public var source: String

    /// Creates a value with its source.
    public init(_ value: Value, source: String) {
        self.value = value
        self.source = source
    }
}

/// The settings every provider shares, and the config file each provider reads its own object
/// of: `$XDG_CONFIG_HOME/sesame/config.json`.
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | storage | `--storage` | `SESAME_STORAGE` | `storage` |
/// | browser (``LocalBrowser``) | `--no-browser` | `SESAME_BROWSER` | `browser` |
/// | CA certificates, proxy (``NetworkSettings``) | | `SESAME_CA_BUNDLE`, `SESAME_PROXY` | `ca_bundle`, `proxy` (also in each provider's object) |
/// | a provider's settings | its login flags | its variables | its object: `facebook`, `oidc`... |
/// | container registries' logins | | | `registries` (see ``RegistryMapping``) |
///
/// Each provider's settings are declared by its ``ProviderPlugin`` (`sesame providers` lists
/// them). The file is checked when it is read: it must be a JSON object whose keys are
/// `storage`, `registries`, `browser`, `ca_bundle`, `proxy` and the providers' names, and each value has the type its setting allows; a
/// wrong one is a ``DesktopError`` (78) naming the file, the key and what is allowed.
public struct DesktopConfiguration: Sendable, Hashable {
    /// Where logins are kept.
    public var storage: Sourced<StorageMode>
    /// Whether a login can open a browser on this machine, and why.
    public var browser: LocalBrowser
    /// The config file that was read, if there was one.
    public var configFile: URL?
    /// Where the config file is looked for (whether or not it exists).
    public var configFileLocation: URL
    /// The config file's object, by key.
    public var file: [String: JSONValue]
    /// Where Sesame keeps per-user state (`$XDG_STATE_HOME/sesame`).
    public var stateDirectory: URL

    /// Values given on the command line, which win over everything else.
    public struct Overrides: Sendable, Hashable {
        /// `--storage`.
        public var storage: StorageMode?
        /// `--no-browser`: no browser on this machine, whatever else says so.
        public var noBrowser: Bool

        /// Creates overrides.
        public init(storage: StorageMode? = nil, noBrowser: Bool = false) {
            self.storage = storage
            self.noBrowser = noBrowser
        }
    }

    /// Creates a configuration directly (tests, apps that have their own settings).
    ///
    /// A `nil` `stateDirectory` is `$XDG_STATE_HOME/sesame` (or `~/.local/state/sesame`); a `nil`
    /// `browser` is what the process's environment says (``LocalBrowser/detected(environment:)``).
    public init(
        storage: Sourced<StorageMode> = Sourced(.auto, source: "default"), file: [String: JSONValue] = [:],
        configFile: URL? = nil, configFileLocation: URL? = nil, stateDirectory: URL? = nil,
        browser: LocalBrowser? = nil
    ) {
        self.stateDirectory =
            stateDirectory ?? XDG.stateDirectory(environment: ProcessInfo.processInfo.environment)
        self.storage = storage
        self.browser = browser ?? .detected(environment: ProcessInfo.processInfo.environment)
        self.file = file
        self.configFile = configFile
        self.configFileLocation = configFileLocation ?? configFile ?? URL(fileURLWithPath: "/dev/null")
    }

    /// The config file's path, for messages.
    public var configFileDescription: String { configFileLocation.path }

    private static func defaultConfigFilePath(environment: [String: String]) -> String {
        XDG.filePath("sesame/config.json", in: "XDG_CONFIG_HOME", fallback: ".config", environment: environment)
    }

    /// The object the config file keeps under `key` (a provider's name); empty when absent.
    ///
    /// - Throws: ``DesktopError`` (78) when it is there but not an object.
    public func section(_ key: String) throws -> [String: JSONValue] {
        guard let value = file[key] else { return [:] }
        guard let object = value.objectValue else {
            throw DesktopError(
                "\(configFileDescription) has \"\(key)\" as \(value.typeDescription), but it must be an object, as in "
                    + "\"\(key)\": {...}.", status: .config)
        }
        return object
    }

    /// Resolves the configuration: `overrides`, then `environment`, then the config file.
    ///
    /// - Parameters:
    ///   - overrides: values from the command line.
    ///   - environment: the environment to read.
    ///   - knownSections: the keys the file may have besides `storage` and `browser` (the providers' names);
    ///     by default those of ``Desktop/providers``, and any when the program handed in none (a
    ///     library app that did not call ``Desktop/bootstrap(_:storage:emulators:programName:)`` shares the file with `sesame`).
    /// - Throws: ``DesktopError`` (78) for a config file that cannot be read, is not a JSON
    ///   object or has an unknown key, an unknown storage mode, or a `browser` that is not a string.
    public static func resolve(
        overrides: Overrides = Overrides(), environment: [String: String] = ProcessInfo.processInfo.environment,
        knownSections: [String]? = nil
    ) throws -> DesktopConfiguration {
        // A path, not the URL's `path`, and stat(2), not FileManager: both cost every command's
        // start (see XDG.stateFilePath).
        let filePath = defaultConfigFilePath(environment: environment)
        let fileURL = URL(fileURLWithPath: filePath)
        var file: [String: JSONValue] = [:]
        var configFile: URL?
        var info = stat()
        if stat(filePath, &info) == 0 {
            guard info.st_mode & S_IFMT != S_IFDIR else {
                throw DesktopError(
                    "The config file \(filePath) is a directory; remove it or make it a JSON file.", status: .config)
            }
            guard let data = PrivateFiles.contents(atPath: filePath) else {
                throw DesktopError(
                    "The config file \(filePath) cannot be read; check its permissions.", status: .config)
            }
            guard let object = JSONValue(parsing: data)?.objectValue else {
                if let error = JSONValue.syntaxError(in: data) {
                    let place = "line \(error.line), column \(error.column)"
                    let what =
                        error.atEnd ? "it ends too early, at \(place) (was it cut short?)" : "the error is at \(place)"
                    throw DesktopError(
                        "The config file \(filePath) is not valid JSON: \(what); fix it there (`python3 -m json.tool` "
                            + "shows it too) or remove the file.",
                        status: .config)
                }
                throw DesktopError(
                    "The config file \(filePath) is not a JSON object; fix it or remove it (see `\(Desktop.programName) doctor`).",
                    status: .config)
            }
            let sections = knownSections ?? Desktop.providers.map(\.name)
            let known = ["storage", "registries", "browser"] + NetworkSettings.configKeys + sections
            if !sections.isEmpty, let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                throw DesktopError(
                    "The config file \(filePath) has an unknown key \"\(unknown.sanitizedForTerminal)\"; the keys "
                        + "it may have are \(known.joined(separator: ", ")).", status: .config)
            }
            file = object
            configFile = fileURL
        }
        var storage = Sourced(StorageMode.auto, source: "default")
        if let mode = overrides.storage {
            storage = Sourced(mode, source: "--storage")
        } else if let text = environment["SESAME_STORAGE"], !text.isEmpty {
            storage = Sourced(try mode(text, source: "SESAME_STORAGE"), source: "SESAME_STORAGE")
        } else if let value = file["storage"] {
            let source = "\(filePath) (storage)"
            guard let text = value.stringValue else {
                throw DesktopError(
                    "\(source) is \(value.typeDescription), but it must be one of "
                        + StorageMode.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ") + ".",
                    status: .config)
            }
            storage = Sourced(try mode(text, source: source), source: source)
        }
        let browser: LocalBrowser
        if overrides.noBrowser {
            browser = LocalBrowser(.none, source: "--no-browser")
        } else if let text = environment["SESAME_BROWSER"] {
            browser = LocalBrowser.named(text, source: "SESAME_BROWSER")
        } else if let value = file["browser"] {
            let source = "\(filePath) (browser)"
            guard let text = value.stringValue else {
                throw DesktopError(
                    "\(source) is \(value.typeDescription), but it must be a command that opens an address, or "
                        + "\"none\".", status: .config)
            }
            browser = LocalBrowser.named(text, source: source)
        } else {
            browser = .detected(environment: environment)
        }
        let configuration = DesktopConfiguration(
            storage: storage, file: file, configFile: configFile, configFileLocation: fileURL,
            stateDirectory: XDG.stateDirectory(environment: environment), browser: browser)
        // Every provider's part is checked whatever the command, so that `status` and `doctor`
        // refuse a bad setting as `login` does, rather than leaving the provider out.
        if knownSections == nil, !file.isEmpty {
            for plugin in Desktop.providers where file[plugin.name] != nil {
                try plugin.checkConfiguration(configuration)
            }
            if file["registries"] != nil { _ = try RegistryMapping.all(in: configuration) }
        }
        return configuration
    }

    private static func mode(_ text: String, source: String) throws -> StorageMode {
        guard let mode = StorageMode(rawValue: text) else {
            throw DesktopError(
                "\(source) is '\(text.sanitizedForTerminal)', which is not a storage mode; use one of "
                    + StorageMode.allCases.map(\.rawValue).joined(separator: ", ") + ".", status: .config)
        }
        return mode
    }
}

/// A failure to set up the desktop defaults: one sentence that says what to do, and the
/// sysexits status a command line should end with.
public struct DesktopError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// A sysexits(3) status.
    public struct Status: RawRepresentable, Sendable, Hashable {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        /// EX_UNAVAILABLE: a service is missing (no keyring, nothing answering).
        public static let unavailable = Status(rawValue: 69)
        /// EX_CONFIG: the configuration is wrong.
        public static let config = Status(rawValue: 78)
        /// EX_CANTCREAT: a state file cannot be written.
        public static let cannotCreate = Status(rawValue: 73)
        /// EX_USAGE: an option that does not fit.
        public static let usage = Status(rawValue: 64)
        /// EX_DATAERR: what was given (on standard input, say) is not usable.
        public static let dataError = Status(rawValue: 65)
    }

    /// What went wrong and what to do.
    public var message: String
    /// The exit status it calls for.
    public var status: Status
    /// Whether the message offers the file store (the `file` storage policy) as a way out, so
    /// that a program with its own switch for it can name that too: the `sesame` command adds
    /// its `--storage file`. The message itself names no command-line flag.
    package var suggestsFileStore = false

    /// Creates an error.
    public init(_ message: String, status: Status) {
        self.message = message
        self.status = status
    }

    public var description: String { message }

    /// The ``message``: what `localizedDescription` returns.
    public var errorDescription: String? { message }
}

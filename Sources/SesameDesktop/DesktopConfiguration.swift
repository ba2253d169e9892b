import Foundation
import Sesame
import SesameKeyring

/// Where a desktop app keeps its logins: the keyring module's `StoragePolicy` (`keyring`, the
/// default; `keyring-or-file`; `file`; `memory`), under the name this module has always used.
public typealias StorageMode = StoragePolicy

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

/// The settings a desktop app runs with, resolved from command-line flags, then the environment,
/// then `$XDG_CONFIG_HOME/sesame/config.json`, the first that has a setting winning.
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | Facebook app id | `--app-id` | `SESAME_FACEBOOK_APP_ID` | `facebook.app_id` |
/// | client token | | `SESAME_FACEBOOK_CLIENT_TOKEN` | `facebook.client_token` |
/// | Graph API origin | | `SESAME_FACEBOOK_GRAPH_URL` | `facebook.graph_url` |
/// | login dialog origin | | `SESAME_FACEBOOK_DIALOG_URL` | `facebook.dialog_url` |
/// | Graph API version | | `SESAME_FACEBOOK_GRAPH_VERSION` | `facebook.graph_version` |
/// | storage | `--storage` | `SESAME_STORAGE` | `storage` |
///
/// With no app id anywhere, the app runs against the built-in emulator (``Desktop``).
public struct DesktopConfiguration: Sendable, Hashable {
    /// The Facebook app id, when one is configured.
    public var facebookAppID: Sourced<String>?
    /// The app's client token (for device login).
    public var facebookClientToken: Sourced<String>?
    /// Where the Graph API answers, when not Facebook's.
    public var facebookGraphURL: Sourced<URL>?
    /// Where the login dialog answers, when not Facebook's.
    public var facebookDialogURL: Sourced<URL>?
    /// The pinned Graph API version.
    public var facebookGraphVersion: Sourced<String>?
    /// Where logins are kept.
    public var storage: Sourced<StorageMode>
    /// The config file that was read, if there was one.
    public var configFile: URL?

    /// Values given on the command line, which win over everything else.
    public struct Overrides: Sendable, Hashable {
        /// `--app-id`.
        public var facebookAppID: String?
        /// `--storage`.
        public var storage: StorageMode?

        /// Creates overrides.
        public init(facebookAppID: String? = nil, storage: StorageMode? = nil) {
            self.facebookAppID = facebookAppID
            self.storage = storage
        }
    }

    /// Creates a configuration directly (tests, apps that have their own settings).
    public init(
        facebookAppID: Sourced<String>? = nil, facebookClientToken: Sourced<String>? = nil,
        facebookGraphURL: Sourced<URL>? = nil, facebookDialogURL: Sourced<URL>? = nil,
        facebookGraphVersion: Sourced<String>? = nil,
        storage: Sourced<StorageMode> = Sourced(.keyring, source: "default"),
        configFile: URL? = nil
    ) {
        self.facebookAppID = facebookAppID
        self.facebookClientToken = facebookClientToken
        self.facebookGraphURL = facebookGraphURL
        self.facebookDialogURL = facebookDialogURL
        self.facebookGraphVersion = facebookGraphVersion
        self.storage = storage
        self.configFile = configFile
    }

    /// `$XDG_CONFIG_HOME/sesame/config.json`, or `~/.config/sesame/config.json`.
    public static func defaultConfigFileURL(environment: [String: String]) -> URL {
        XDG.directory("XDG_CONFIG_HOME", fallback: ".config", environment: environment)
            .appendingPathComponent("sesame/config.json")
    }

    /// Resolves the configuration: `overrides`, then `environment`, then the config file.
    ///
    /// - Throws: ``DesktopError`` for a config file that is not JSON, or a value that is not
    ///   valid (an unknown storage mode, a base URL that is not `http(s)`).
    public static func resolve(
        overrides: Overrides = Overrides(), environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> DesktopConfiguration {
        let fileURL = defaultConfigFileURL(environment: environment)
        var file: [String: JSONValue] = [:]
        var configFile: URL?
        if let data = FileManager.default.contents(atPath: fileURL.path) {
            guard let object = JSONValue(parsing: data)?.objectValue else {
                throw DesktopError(
                    "The config file \(fileURL.path) is not a JSON object; fix it or remove it (see `sesame doctor`).",
                    status: .config)
            }
            file = object
            configFile = fileURL
        }
        let facebook = file["facebook"]?.objectValue ?? [:]
        func string(_ flag: String?, flagName: String, _ variable: String, _ key: String) -> Sourced<String>? {
            if let flag, !flag.isEmpty { return Sourced(flag, source: flagName) }
            if let value = environment[variable], !value.isEmpty { return Sourced(value, source: variable) }
            if let value = facebook[key]?.stringValue, !value.isEmpty {
                return Sourced(value, source: "\(fileURL.path) (facebook.\(key))")
            }
            return nil
        }
        func url(_ variable: String, _ key: String) throws -> Sourced<URL>? {
            guard let text = string(nil, flagName: "", variable, key) else { return nil }
            guard let url = URL(string: text.value), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host != nil
            else {
                throw DesktopError(
                    "\(text.source) is '\(text.value)', which is not an http(s) address; write it as "
                        + "https://graph.facebook.com or http://127.0.0.1:8080.", status: .config)
            }
            return Sourced(url, source: text.source)
        }
        var storage = Sourced(StorageMode.keyring, source: "default")
        if let mode = overrides.storage {
            storage = Sourced(mode, source: "--storage")
        } else if let text = environment["SESAME_STORAGE"], !text.isEmpty {
            storage = Sourced(try mode(text, source: "SESAME_STORAGE"), source: "SESAME_STORAGE")
        } else if let text = file["storage"]?.stringValue {
            storage = Sourced(try mode(text, source: "\(fileURL.path) (storage)"), source: "\(fileURL.path) (storage)")
        }
        return DesktopConfiguration(
            facebookAppID: string(
                overrides.facebookAppID, flagName: "--app-id", "SESAME_FACEBOOK_APP_ID", "app_id"),
            facebookClientToken: string(nil, flagName: "", "SESAME_FACEBOOK_CLIENT_TOKEN", "client_token"),
            facebookGraphURL: try url("SESAME_FACEBOOK_GRAPH_URL", "graph_url"),
            facebookDialogURL: try url("SESAME_FACEBOOK_DIALOG_URL", "dialog_url"),
            facebookGraphVersion: string(nil, flagName: "", "SESAME_FACEBOOK_GRAPH_VERSION", "graph_version"),
            storage: storage, configFile: configFile)
    }

    private static func mode(_ text: String, source: String) throws -> StorageMode {
        guard let mode = StorageMode(rawValue: text) else {
            throw DesktopError(
                "\(source) is '\(text)', which is not a storage mode; use one of "
                    + StorageMode.allCases.map(\.rawValue).joined(separator: ", ") + ".", status: .config)
        }
        return mode
    }
}

/// A failure to set up the desktop defaults: one sentence that says what to do, and the
/// sysexits status a command line should end with.
public struct DesktopError: Error, Sendable, Hashable, CustomStringConvertible {
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
    }

    /// What went wrong and what to do.
    public var message: String
    /// The exit status it calls for.
    public var status: Status

    /// Creates an error.
    public init(_ message: String, status: Status) {
        self.message = message
        self.status = status
    }

    public var description: String { message }
}

/// The XDG base directories.
package enum XDG {
    /// `$variable` when absolute, else `~/fallback`.
    package static func directory(_ variable: String, fallback: String, environment: [String: String]) -> URL {
        if let value = environment[variable], value.hasPrefix("/") {
            return URL(fileURLWithPath: value, isDirectory: true)
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(fallback, isDirectory: true)
    }

    /// `$XDG_STATE_HOME/sesame`.
    package static func stateDirectory(environment: [String: String]) -> URL {
        directory("XDG_STATE_HOME", fallback: ".local/state", environment: environment)
            .appendingPathComponent("sesame", isDirectory: true)
    }
}

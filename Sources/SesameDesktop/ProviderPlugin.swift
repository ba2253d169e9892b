import Foundation
import Sesame

/// A provider as a desktop program sees it: the one thing a provider's desktop adapter
/// implements, once, so that every command (`login`, `status`, `token`, `logout`, `switch`,
/// `permissions`, `doctor`, `explain-error`, `providers`) and the config file work for it.
///
/// The program hands its plug-ins in, one line per provider, with ``Desktop/bootstrap(_:storage:emulators:programName:)`` (as
/// swift-log's `LoggingSystem.bootstrap` takes the handler from the app). A provider is its own
/// module (depending only on the `Sesame` core) and, for the desktop, a plug-in module beside it
/// with a type that conforms to this protocol; a provider in another package plugs in the same
/// way. Only ``name``, ``displayName``, ``summary``, ``loginFlows``, ``errorTaxonomy``,
/// ``settings(instance:)``, ``connect(_:)`` and ``doctor(_:)`` must be written; the rest have
/// defaults.
///
/// A plug-in has no side effects until ``connect(_:)``: listing settings, names and doctor
/// advice reads nothing but the configuration it is handed.
public protocol ProviderPlugin: Sendable {
    /// The name on the command line and in the config file (`facebook`, `oidc`).
    var name: String { get }
    /// A human name ("Facebook").
    var displayName: String { get }
    /// One line for `sesame providers`.
    var summary: String { get }
    /// The login flows this provider can run.
    var loginFlows: Set<LoginFlowKind> { get }
    /// How this provider's raw errors are classified (`sesame explain-error`).
    var errorTaxonomy: any ErrorTaxonomy { get }
    /// The error table behind ``errorTaxonomy``, when it has one, so that an explanation can
    /// name the row that matched.
    var errorTable: ErrorRuleTable? { get }
    /// What `sesame permissions` can do with this provider's logins.
    var permissionSupport: PermissionSupport { get }
    /// Options `sesame permissions NAME request` takes for this provider (Facebook's `--audience`).
    var permissionOptions: [ProviderSetting] { get }
    /// What `sesame login --help` says about this provider: a paragraph, and example command
    /// lines with a comment each.
    var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) { get }
    /// Example command lines of `sesame explain-error` for this provider's errors.
    var explainErrorExamples: [(command: String, comment: String)] { get }
    /// What `sesame explain-error` shows of `error` beyond the core's fields: the facts in this
    /// provider's `ProviderErrorDetails`. None by default.
    func explanationFacts(of error: AuthError) -> ErrorExplanationFacts
    /// How to give `name` to this plug-in when it is not known yet (an OpenID issuer's entry in the
    /// config file), for the message about an unknown provider; `nil` when names cannot be added.
    func newInstanceHint(_ name: String) -> String?

    /// The settings of the instance called `instance` (the plug-in's ``name``, or a name the
    /// config file gives, as OpenID issuers have): flags, variables and config keys.
    func settings(instance: String) -> [ProviderSetting]

    /// Other names this plug-in answers to, from the configuration (OpenID issuers configured by
    /// name). Most providers have none.
    ///
    /// - Throws: ``DesktopError`` when the configuration of those names is wrong.
    func instanceNames(configuration: DesktopConfiguration) throws -> [String]

    /// Whether `instance` could be one of this plug-in's names before the configuration is read
    /// (the command line is parsed without reading files).
    func mayBeInstance(_ instance: String) -> Bool

    /// Resolves the settings and makes the provider ready for one command.
    ///
    /// - Throws: ``DesktopError`` for a setting that is missing or wrong (78), an emulator that
    ///   cannot start; the provider's errors (discovery, say).
    func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider

    /// The provider's lines of `sesame doctor`, each probe bounded in time.
    func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine]

    /// Connects the provider for the git host `host` (lower case, without the default port),
    /// when its logins can answer git's credential questions (`sesame git-credential`); `nil`
    /// (the default) for a provider whose logins are not git credentials. Never starts an
    /// emulator and never asks the person anything.
    ///
    /// - Throws: ``DesktopError`` for a setting that is wrong.
    func connect(
        _ request: ProviderConnectionRequest, credentialHost host: String
    ) async throws -> (any ConnectedProvider)?

    /// The plug-in's own built-in emulator, started when a program allows it
    /// (``BuiltInEmulators/sesame``) and nothing is configured; `nil` (the default) for none.
    var builtInEmulator: BuiltInEmulator? { get }

    /// What `sesame emulator NAME` runs in the foreground; `nil` (the default) for none.
    var foregroundEmulator: (any ForegroundEmulator)? { get }

    /// The rate-limit usage a login last reported (``AccountCheck/usage``), in words for
    /// `sesame status` ("rate limit 4997/5000, resets 04:15"); `--json` keeps the JSON. By
    /// default, its top-level numbers and strings as "name value" pairs.
    func describeUsage(_ usage: JSONValue) -> String?

    /// Checks this provider's part of the config file, every key and value, whatever the
    /// command: by default, the object under ``name`` against the config keys of
    /// ``settings(instance:)`` (``ProviderSetting/checkSection(_:path:settings:configuration:aliases:)``).
    ///
    /// - Parameter configuration: the resolved configuration, with the file's contents.
    /// - Throws: ``DesktopError`` (78) naming the key, for an unknown key or a bad value.
    func checkConfiguration(_ configuration: DesktopConfiguration) throws

    /// The object of the config file that holds `instance`'s settings, and its path for messages:
    /// by default the one under ``name`` (`facebook`); an OpenID issuer's is `oidc.work`. Where
    /// ``NetworkSettings`` finds an instance's `ca_bundle` and `proxy`.
    ///
    /// - Throws: ``DesktopError`` (78) when that part of the file is not an object.
    func configSection(
        instance: String, configuration: DesktopConfiguration
    ) throws -> (path: String, section: [String: JSONValue])

    /// The environment variable of `instance`'s setting `setting` (upper case, `CA_BUNDLE`): by
    /// default `SESAME_<INSTANCE>_<SETTING>` (`SESAME_FACEBOOK_CA_BUNDLE`).
    func environmentVariable(_ setting: String, instance: String) -> String
}

extension ProviderPlugin {
    public var errorTable: ErrorRuleTable? { nil }
    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) { ("", []) }
    public var explainErrorExamples: [(command: String, comment: String)] { [] }
    public func explanationFacts(of error: AuthError) -> ErrorExplanationFacts { ErrorExplanationFacts() }
    public func newInstanceHint(_ name: String) -> String? { nil }
    public var permissionSupport: PermissionSupport { .none }
    public var permissionOptions: [ProviderSetting] { [] }
    public func instanceNames(configuration: DesktopConfiguration) throws -> [String] { [] }
    public func mayBeInstance(_ instance: String) -> Bool { instance == name }
    public func connect(
        _ request: ProviderConnectionRequest, credentialHost host: String
    ) async throws -> (any ConnectedProvider)? { nil }
    public var builtInEmulator: BuiltInEmulator? { nil }
    public var foregroundEmulator: (any ForegroundEmulator)? { nil }
    public func describeUsage(_ usage: JSONValue) -> String? { UsageText.pairs(usage) }
    public func checkConfiguration(_ configuration: DesktopConfiguration) throws {
        try ProviderSetting.checkSection(
            configuration.section(name), path: name, settings: settings(instance: name), configuration: configuration)
    }
    public func configSection(
        instance: String, configuration: DesktopConfiguration
    ) throws -> (path: String, section: [String: JSONValue]) {
        (name, try configuration.section(name))
    }
    public func environmentVariable(_ setting: String, instance: String) -> String {
        "SESAME_\(instance.uppercased().replacingOccurrences(of: "-", with: "_"))_\(setting)"
    }
}

/// What `sesame permissions` can do for a provider.
public struct PermissionSupport: OptionSet, Sendable, Hashable {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// List what was granted and declined.
    public static let list = PermissionSupport(rawValue: 1)
    /// Ask the person for more.
    public static let request = PermissionSupport(rawValue: 2)
    /// Give one up.
    public static let revoke = PermissionSupport(rawValue: 4)
    /// Nothing: the scopes are chosen at login.
    public static let none: PermissionSupport = []
}

/// The provider's own facts about an error, as `sesame explain-error` shows them: what
/// ``ProviderPlugin/explanationFacts(of:)`` reads from the error's `ProviderErrorDetails`.
public struct ErrorExplanationFacts: Sendable {
    /// The provider's error type (Facebook's `OAuthException`), shown after the code.
    public var errorType: String?
    /// The provider's own word on whether the error is transient (Facebook's `is_transient`).
    public var isTransient: Bool?
    /// Further lines of the explanation, label and value (a trace id, the rate-limit usage).
    public var rows: [(label: String, value: String)]

    /// Creates the facts.
    public init(errorType: String? = nil, isTransient: Bool? = nil, rows: [(label: String, value: String)] = []) {
        self.errorType = errorType
        self.isTransient = isTransient
        self.rows = rows
    }
}

/// Helpers for ``ProviderPlugin/describeUsage(_:)``.
public enum UsageText {
    /// The object's numbers and strings as "name value" pairs, in name order (`_` read as a
    /// space); `nil` when there are none.
    public static func pairs(_ usage: JSONValue) -> String? {
        guard let object = usage.objectValue else { return nil }
        let parts = object.keys.sorted().compactMap { key -> String? in
            let name = key.replacingOccurrences(of: "_", with: " ")
            switch object[key] {
            case .number(let value)?: return "\(name) \(number(value))"
            case .string(let text)?: return "\(name) \(text)"
            default: return nil
            }
        }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// `value` without a fraction when it has none.
    public static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    /// The local time of `date`, as "04:15" (today) or "Dec 5 04:15" (another day).
    public static func time(_ date: Date, now: Date = Date()) -> String {
        let calendar = Calendar.current
        let clock = date.formatted(.dateTime.hour(.twoDigits(amPM: .omitted)).minute(.twoDigits))
        if calendar.isDate(date, inSameDayAs: now) { return clock }
        return date.formatted(.dateTime.month(.abbreviated).day()) + " " + clock
    }
}

extension JSONValue {
    /// "a number", "an object"...: for configuration errors.
    package var typeDescription: String {
        switch self {
        case .null: "null"
        case .bool: "true/false"
        case .number: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "an object"
        }
    }
}

extension String {
    /// The text as `Terminal.printable(_:)` prints it: no control characters, so that a value
    /// from outside cannot move the cursor or forge a line.
    package var sanitizedForTerminal: String { Terminal.printable(self) }
}

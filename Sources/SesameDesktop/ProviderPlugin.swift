import Foundation
import Sesame

/// A provider as a desktop program sees it: the one thing a provider's desktop adapter
/// implements, once, so that every command (`login`, `status`, `token`, `logout`, `switch`,
/// `permissions`, `doctor`, `explain-error`, `providers`) and the config file work for it.
///
/// The list of plug-ins is ``Desktop/providers``: one line per provider. Adding a provider is
/// one module (the provider itself, depending only on the `Sesame` core), one file here that
/// conforms to this protocol, and that line.
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
    /// provider's ``ProviderErrorDetails``. None by default.
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
        /// An API version written `v` digits `.` digits (`v19.0`).
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
            return ok ? nil : "it must be written like v19.0"
        }
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
    /// offer.
    public var readSecret: (@Sendable (_ prompt: String) async -> String)?

    /// Creates a request.
    public init(
        instance: String, flags: [String: String] = [:], configuration: DesktopConfiguration,
        environment: [String: String], terminal: Terminal, transport: any HTTPTransport,
        emulators: BuiltInEmulators?, purpose: ConnectionPurpose,
        readSecret: (@Sendable (_ prompt: String) async -> String)? = nil
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

    /// Hosts the person allows plain `http` to, although they are not loopback addresses:
    /// `SESAME_ALLOW_INSECURE_HTTP`, host names separated by commas. Every provider passes them to
    /// its endpoint check; by default there are none (RFC 9700: https, or http to loopback only).
    public var allowedInsecureHosts: Set<String> {
        Set(
            (environment["SESAME_ALLOW_INSECURE_HTTP"] ?? "").split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
    }

    /// A function that resolves a setting with ``value(of:section:sectionPath:fallback:)`` from
    /// the config file's section `name`.
    ///
    /// - Throws: ``DesktopError`` (78) when the section is not an object.
    func settingReader(section name: String) throws -> (ProviderSetting) throws -> Sourced<String>? {
        let section = try configuration.section(name)
        return { setting in try value(of: setting, section: section, sectionPath: name) }
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
            if let problem = setting.problem(with: value) {
                throw DesktopError(
                    "\(source) is \(setting.isSecret ? "set" : "'\(value.sanitizedForTerminal)'"), which is not a "
                        + "valid \(setting.summary.lowercasedFirst.trimmingCharacters(in: ["."])): \(problem).",
                    status: .config)
            }
            return Sourced(value, source: source)
        }
        if setting.isFlag, let value = flags[setting.name] { return try checked(value, source: "--\(setting.name)") }
        if let variable = setting.environment, let value = environment[variable], !value.isEmpty {
            return try checked(value, source: variable)
        }
        if let key = setting.configKey, let raw = section[key] {
            let source = "\(configuration.configFileDescription) (\(sectionPath).\(key))"
            switch raw {
            case .string(let text):
                return try checked(text, source: source)
            case .array(let items) where setting.kind == .list:
                let texts = items.compactMap(\.stringValue)
                guard texts.count == items.count else {
                    throw DesktopError("\(source) must be a list of strings.", status: .config)
                }
                return try checked(texts.joined(separator: ","), source: source)
            default:
                throw DesktopError(
                    "\(source) is \(raw.typeDescription), but it must be "
                        + (setting.kind == .list ? "a list of strings" : "a string")
                        + " (write it in quotes, as in \"\(key)\": \"...\").", status: .config)
            }
        }
        return fallback
    }
}

/// A provider made ready for one command: its app, its sessions, its status checks.
public protocol ConnectedProvider: Sendable {
    /// The provider id logins are stored under.
    var providerID: ProviderID { get }
    /// The app (client) id logins are stored under.
    var appID: String { get }
    /// Who answers, for messages: "Facebook", "the Facebook emulator", "work (https://id.example.com)".
    var label: String { get }
    /// Provider-specific facts for `sesame status` (OpenID: the issuer), no secrets.
    var details: [String: String] { get }
    /// Whether this runs against a built-in emulator.
    var isEmulated: Bool { get }

    /// Runs a login for `account` and saves it in `store`; returns the token and who it is.
    ///
    /// - Throws: the login's ``AuthError``; ``DesktopError`` for options this provider does not
    ///   take.
    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult

    /// The session of `account`, to open from the store without UI.
    func session(account: String, store: any CredentialStore) -> any AccountSession

    /// Checks a stored login with the provider (who it is, whether it still works), for
    /// `sesame status`. Never changes what is stored.
    func check(_ credential: StoredCredential) async -> AccountCheck

    /// Stops what the connection started (a built-in emulator, saving its state).
    func shutdown() async
}

extension ConnectedProvider {
    public var details: [String: String] { [:] }
    public var isEmulated: Bool { false }
    public func shutdown() async {}
}

/// What a login is asked to do, as the command line gives it.
public struct LoginOptions: Sendable, Hashable {
    /// Which way to log in.
    public enum Flow: Sendable, Hashable {
        /// The provider's default (device login where offered).
        case automatic
        /// Device login, asked for explicitly.
        case device
        /// Browser login with a loopback redirect.
        case browser(openBrowser: Bool)
        /// A token the person already has.
        case existingToken(String)
    }

    /// The flow.
    public var flow: Flow
    /// The scopes or permissions to ask for; empty for the provider's default.
    public var scopes: [String]

    /// Creates options.
    public init(flow: Flow = .automatic, scopes: [String] = []) {
        self.flow = flow
        self.scopes = scopes
    }
}

/// What a login obtained.
public struct LoginResult: Sendable {
    /// The token, already saved.
    public var token: AccessToken
    /// The person's name, when the provider said it.
    public var userName: String?

    /// Creates a result.
    public init(token: AccessToken, userName: String?) {
        self.token = token
        self.userName = userName
    }
}

/// The provider's own facts about an error, as `sesame explain-error` shows them: what
/// ``ProviderPlugin/explanationFacts(of:)`` reads from the error's ``ProviderErrorDetails``.
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

/// What checking a stored login with the provider found.
public struct AccountCheck: Sendable, Hashable {
    /// Whether the login still works.
    public enum Validity: String, Sendable, Hashable, Codable {
        /// The provider accepted it just now.
        case valid
        /// It no longer works: a new login is needed.
        case invalid
        /// It could not be checked (no network, a timeout): see ``AccountCheck/problem``.
        case unverified
        /// It was judged from what is stored alone (expiry, a refresh token), without asking the
        /// provider.
        case notChecked = "not_checked"
    }

    /// The verdict.
    public var validity: Validity
    /// The person's name, when known.
    public var userName: String?
    /// What is wrong, in one sentence, when something is.
    public var problem: String?
    /// The last rate-limit usage seen, as the provider reports it.
    public var usage: JSONValue?

    /// Creates a check.
    public init(validity: Validity, userName: String? = nil, problem: String? = nil, usage: JSONValue? = nil) {
        self.validity = validity
        self.userName = userName
        self.problem = problem
        self.usage = usage
    }
}

extension AccountCheck {
    /// The check `body` makes; an ``AuthError`` it throws becomes what `refused` makes of it,
    /// any other error an unverified check that names it.
    static func checking(
        _ body: () async throws -> AccountCheck, refused: (AuthError) -> AccountCheck
    ) async -> AccountCheck {
        do {
            return try await body()
        } catch let error as AuthError {
            return refused(error)
        } catch {
            return AccountCheck(validity: .unverified, problem: "\(error)")
        }
    }
}

/// One account's session as the generic commands use it.
public protocol AccountSession: Sendable {
    /// Where its token is kept.
    var key: CredentialKey { get }
    /// Opens it from the store without UI; `false` when there is no usable stored login.
    ///
    /// - Throws: `CredentialStoreError` when the store cannot be read; the provider's `AuthError`
    ///   when reopening fails.
    func open() async throws -> Bool
    /// A token good to use now, refreshed first when needed.
    ///
    /// - Throws: `AuthError` when there is no usable token or its refresh failed;
    ///   `CredentialStoreError` when the store cannot be read or written.
    func validToken() async throws -> AccessToken
    /// The token's user, when the session is open.
    var userID: String? { get async }
    /// Logs out: revokes at the provider when `revoke` is true (and the provider can), then
    /// deletes the stored login.
    ///
    /// - Returns: a note about the revocation for the person ("its tokens were revoked"), or nil.
    /// - Throws: ``RevocationFailed`` when the login was removed here but revoking failed; the
    ///   store's error when it could not be removed.
    func logOut(revoke: Bool) async throws -> String?
    /// The permissions granted and declined, read from the provider.
    ///
    /// - Throws: `AuthError` from the provider; `PermissionsUnsupported` for a provider without
    ///   permissions.
    func listPermissions() async throws -> PermissionSet
    /// Asks the person for more permissions, with the provider's options.
    ///
    /// - Throws: `AuthError` from the provider or the login; `PermissionsUnsupported` for a
    ///   provider without permissions.
    func requestPermissions(_ names: [String], options: [String: String]) async throws -> PermissionRequestOutcome
    /// Gives up one permission.
    ///
    /// - Throws: `AuthError` from the provider; `PermissionsUnsupported` for a provider without
    ///   permissions.
    func revokePermission(_ name: String) async throws
    /// The last rate-limit usage seen, to keep for `sesame status`.
    var lastUsage: JSONValue? { get }
    /// What to tell the person about `token` on standard error, if anything (a token that
    /// expires soon and cannot be renewed).
    func warning(for token: AccessToken) -> String?
}

extension AccountSession {
    public var lastUsage: JSONValue? { nil }
    public func warning(for token: AccessToken) -> String? { nil }
    public func listPermissions() async throws -> PermissionSet { throw PermissionsUnsupported() }
    public func requestPermissions(
        _ names: [String], options: [String: String]
    ) async throws -> PermissionRequestOutcome { throw PermissionsUnsupported() }
    public func revokePermission(_ name: String) async throws { throw PermissionsUnsupported() }
}

/// A provider whose permissions are chosen at login only.
public struct PermissionsUnsupported: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "This provider's permissions are chosen when logging in." }
}

/// The login was removed here, but revoking it at the provider failed.
public struct RevocationFailed: Error, Sendable, CustomStringConvertible {
    /// Why revoking failed.
    public var underlying: any Error & Sendable
    /// What the person can do instead ("remove it in Facebook's settings").
    public var advice: String

    /// Creates the error.
    public init(underlying: any Error & Sendable, advice: String) {
        self.underlying = underlying
        self.advice = advice
    }

    public var description: String { "revoking failed (\(underlying)); \(advice)" }

    /// Runs a provider's logout: a store error (the login could not be removed) passes through;
    /// any other error, when `revoke` was asked for, means the login is gone here but the
    /// revocation failed.
    ///
    /// - Throws: the `CredentialStoreError` `body` throws; for any other error, `RevocationFailed`
    ///   with `advice` when `revoke` was asked for, the error itself otherwise.
    public static func loggingOut(
        revoke: Bool, advice: String, _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch let error as CredentialStoreError {
            throw error
        } catch  where revoke {
            throw RevocationFailed(underlying: SendableErrorBox(error), advice: advice)
        }
    }
}

/// One line of `sesame doctor`: what was checked, how it is, and what to do when it is wrong.
public struct DoctorLine: Sendable, Equatable {
    /// How it is.
    public enum Level: Sendable, Equatable {
        case ok, warning, problem, info
    }
    /// How it is.
    public var level: Level
    /// What was checked and found.
    public var text: String
    /// What to do, when something is to be done.
    public var fix: String?

    /// Creates a line.
    public init(_ level: Level, _ text: String, fix: String? = nil) {
        self.level = level
        self.text = text
        self.fix = fix
    }
}

extension JSONValue {
    /// "a number", "an object"...: for configuration errors.
    var typeDescription: String {
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
    var lowercasedFirst: String { prefix(1).lowercased() + dropFirst() }

    /// The text as `Terminal.printable(_:)` prints it: no control characters, so that a value
    /// from outside cannot move the cursor or forge a line.
    package var sanitizedForTerminal: String { Terminal.printable(self) }
}

import Foundation
import Sesame
import SesameDesktop

/// What a provider command (`login`, `token`, `logout`, `switch`, `permissions`) asks of a provider.
package struct ProviderCommand: Sendable, Equatable {
    /// `sesame login PROVIDER ...`.
    package struct Login: Sendable, Equatable {
        /// `--app-id`.
        package var appID: String?
        /// `--scopes a,b`.
        package var scopes: [String] = []
        /// `--web` (browser and loopback redirect) rather than device login.
        package var web = false
        /// `--no-browser`: print the address instead of opening a browser.
        package var noBrowser = false
        /// `--with-token`: read a token from standard input.
        package var withToken = false
        /// `--device`, given explicitly.
        package var device = false
        /// `--issuer URL` (OpenID Connect).
        package var issuer: String?
        /// `--client-id ID` (OpenID Connect).
        package var clientID: String?
    }

    /// What `sesame permissions PROVIDER` does.
    package enum PermissionsAction: Sendable, Equatable {
        /// `list` (the default).
        case list
        /// `request NAME... [--audience A]`.
        case request([String], audience: DefaultAudience)
        /// `revoke NAME`.
        case revoke(String)
    }

    /// The action.
    package enum Action: Sendable, Equatable {
        case login(Login)
        case token
        case logout(revoke: Bool)
        case switchAccount(String)
        case permissions(PermissionsAction)
    }

    /// The provider's name (`facebook`).
    package var provider: String
    /// What to do.
    package var action: Action
    /// `--account NAME`; the active account when `nil`.
    package var account: String?
    /// `--storage MODE`.
    package var storage: StorageMode?

    /// The command's name (`login`, `token`...), for messages.
    package var commandName: String {
        switch action {
        case .login: "login"
        case .token: "token"
        case .logout: "logout"
        case .switchAccount: "switch"
        case .permissions: "permissions"
        }
    }
}

/// What a command needs from its surroundings.
package struct CommandContext: Sendable {
    package var io: CommandIO
    package var environment: [String: String]
    package var terminal: Terminal
    /// Opens the keyring store.
    package var keyring: DesktopStorage.KeyringFactory
}

/// A provider as the command line sees it: a name and what each command does with it. Adding
/// a provider to the command line is adding one adapter to ``ProviderTable/all``.
package protocol ProviderAdapter: Sendable {
    /// The name on the command line (`facebook`).
    var name: String { get }
    /// One line for `sesame providers`.
    var summary: String { get }
    /// The environment variables it reads, for `sesame providers`.
    var environmentVariables: [String] { get }
    /// Runs a provider command; returns the exit status.
    func run(_ command: ProviderCommand, context: CommandContext) async throws -> Int32
    /// The provider's part of `sesame status --json` (see ``StatusCommand``).
    func status(storage: StorageMode?, context: CommandContext) async throws -> JSONValue
    /// The provider's lines of `sesame doctor`.
    func doctor(context: CommandContext) async -> [DoctorLine]
}

/// Every provider the command line knows, by name.
package enum ProviderTable {
    package static let all: [any ProviderAdapter] = [FacebookAdapter(), OIDCAdapter(name: "oidc")]

    package static func named(_ name: String) -> (any ProviderAdapter)? { all.first { $0.name == name } }

    package static var names: String { all.map(\.name).joined(separator: ", ") }

    /// Every provider in `environment`: the built-in ones and the OpenID issuers configured by name.
    package static func adapters(environment: [String: String]) -> [any ProviderAdapter] {
        all
            + OIDCSettings.configuredNames(environment: environment).filter { named($0) == nil }.map {
                OIDCAdapter(name: $0)
            }
    }

    /// The provider called `name` in `environment`, or a usage error saying which exist.
    static func resolve(
        _ name: String, environment: [String: String], command: String
    ) throws(UsageError)
        -> any ProviderAdapter
    {
        if let adapter = named(name) { return adapter }
        let configured = OIDCSettings.configuredNames(environment: environment)
        if configured.contains(name) { return OIDCAdapter(name: name) }
        let known = all.map(\.name) + configured
        let near = Suggestion.closest(to: name, in: known).map { " (did you mean '\($0)'?)" } ?? ""
        throw UsageError(
            "unknown provider '\(name)'\(near); known providers: \(known.joined(separator: ", ")). "
                + "An OpenID issuer gets a name in the config file: "
                + #"{"oidc": {"\#(name)": {"issuer": "https://...", "clientID": "..."}}}"#, command: command)
    }

    /// The provider named by the first positional argument, or a usage error. Names of OpenID
    /// issuers from the config file are checked when the command runs (parsing reads no files).
    static func provider(in parsed: ParsedArguments, command: String) throws(UsageError) -> String {
        guard let name = parsed.positionals.first else {
            throw UsageError(
                "name the provider, as in 'sesame \(command) facebook' (known: \(names), or an OpenID issuer's "
                    + "name from the config file)", command: command)
        }
        guard named(name) != nil || OIDCSettings.isValidName(name) else {
            let near = Suggestion.closest(to: name, in: all.map(\.name)).map { " (did you mean '\($0)'?)" } ?? ""
            throw UsageError("unknown provider '\(name)'\(near); known providers: \(names)", command: command)
        }
        return name
    }
}

/// One line of `sesame doctor`: what was checked, how it is, and what to do when it is wrong.
package struct DoctorLine: Sendable, Equatable {
    package enum Level: Sendable, Equatable { case ok, warning, problem, info }
    package var level: Level
    package var text: String
    package var fix: String?

    package init(_ level: Level, _ text: String, fix: String? = nil) {
        self.level = level
        self.text = text
        self.fix = fix
    }
}

/// A command that failed: one sentence saying what to do, and a sysexits status.
package struct CommandFailure: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var status: Int32

    package init(_ message: String, status: Int32 = ExitStatus.failure) {
        self.message = message
        self.status = status
    }

    package var description: String { message }

    /// The message and status for any error a command can meet. Messages never carry secrets
    /// (`AuthError` and the stores keep them out).
    package static func from(_ error: any Error, provider: String) -> CommandFailure {
        switch error {
        case let failure as CommandFailure:
            return failure
        case let error as DesktopError:
            return CommandFailure(error.message, status: error.status.rawValue)
        case let error as AuthError:
            let message = error.shouldNotifyUser ? (error.userMessage ?? error.message) : error.message
            switch error.category {
            case .authenticationReopenSession:
                return CommandFailure(
                    "\(message) Log in again with 'sesame login \(provider)'.", status: ExitStatus.permission)
            case .permissions:
                return CommandFailure(
                    "\(message) Grant it with 'sesame permissions \(provider) request NAME'.",
                    status: ExitStatus.permission)
            case .retry, .throttling, .server:
                return CommandFailure("\(message) Try again in a little while.", status: ExitStatus.temporaryFailure)
            case .userCancelled:
                return CommandFailure(message, status: ExitStatus.failure)
            default:
                if error.underlyingError != nil, error.httpStatus == nil {
                    return CommandFailure(message, status: ExitStatus.unavailable)
                }
                return CommandFailure(message, status: ExitStatus.dataError)
            }
        case let error as CredentialStoreError:
            let status =
                [.unavailable, .locked, .timedOut].contains(error.kind) ? ExitStatus.unavailable : ExitStatus.ioError
            return CommandFailure("\(error)", status: status)
        default:
            return CommandFailure("\(error)", status: ExitStatus.failure)
        }
    }
}

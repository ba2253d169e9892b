import Foundation
import Sesame
import SesameCurl

/// The desktop defaults in one call, and the provider plug-ins the program hands in.
///
/// ```swift
/// Desktop.bootstrap([ExamplePlugin()])                   // the program's providers, one line each
/// let example = try await Desktop.example()               // flags, environment, config file
/// try await example.session().open(scopes: [], allowLoginUI: true)
/// ```
///
/// Each provider's plug-in module adds its own entry point (`Desktop.example` above); this module
/// names no provider.
public enum Desktop {
    /// What the program handed in, and whether it has.
    private struct Registry {
        var providers: [any ProviderPlugin] = []
        var storage: [any StorageBackend] = []
        var emulators: [any EmulatorPlugin] = []
        var programName: String?
        var bootstrapped = false
    }

    private static let registry = Locked(Registry())

    /// The provider plug-ins this program uses, in the order ``bootstrap(_:storage:emulators:programName:)``
    /// was given them: the `sesame` command's `login`, `status`, `token`, `logout`, `switch`,
    /// `permissions`, `doctor`, `explain-error`, `emulator` and `providers`, and the config file's
    /// sections, all come from this list.
    public static var providers: [any ProviderPlugin] { registry.withLock { $0.providers } }

    /// The stores the program registered beyond the keyring, the file and memory, in the order
    /// `auto` tries them when there is no keyring.
    public static var storageBackends: [any StorageBackend] { registry.withLock { $0.storage } }

    /// The emulators the program registered, which ``BuiltInEmulators/sesame`` starts and
    /// `sesame emulator NAME` runs.
    public static var emulators: [any EmulatorPlugin] { registry.withLock { $0.emulators } }

    /// The name people type to run this program, which every message, usage line, help text,
    /// suggestion ("log in with 'NAME login github'"), doctor line, completion script and manual
    /// page of the command line says: the `programName` given to
    /// ``bootstrap(_:storage:emulators:programName:)``, else the last path component of
    /// `CommandLine.arguments[0]` (so an executable target named `acme-auth`, or a link to one, says
    /// `acme-auth` with no setting), else `sesame`.
    ///
    /// What is Sesame's rather than the program's keeps its name: the `SESAME_*` variables, the
    /// `$XDG_CONFIG_HOME/sesame/` and `$XDG_STATE_HOME/sesame/` folders, the keyring's schema and
    /// the emulators' `/__sesame/` admin paths. Helpers that other tools run by a name are named
    /// after the program: `docker-credential-NAME` (docker's `credHelpers` entry is `NAME`), and
    /// git's and kubectl's lines run `NAME git-credential` and `NAME kubectl-credential`.
    public static var programName: String {
        registry.withLock { $0.programName } ?? programName(given: nil, arguments: CommandLine.arguments)
    }

    /// The program's name from `given` (``bootstrap(_:storage:emulators:programName:)``'s) or the
    /// command line's first argument, as ``programName`` says.
    package static func programName(given: String?, arguments: [String]) -> String {
        if let given { return given }
        let invoked = arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? ""
        return isOneWord(invoked) ? invoked : "sesame"
    }

    /// Whether `name` can be said in a message and written in a shell script as it is.
    private static func isOneWord(_ name: String) -> Bool {
        !name.isEmpty && !name.contains { "/'\"\\$`".contains($0) || $0.isWhitespace || $0.isNewline }
    }

    /// Hands in the program's provider plug-ins, its stores and its emulators, once, before
    /// anything else uses them, as swift-log's `LoggingSystem.bootstrap` takes the handler from
    /// the app; one line each:
    ///
    /// ```swift
    /// Desktop.bootstrap(
    ///     [ExamplePlugin(), AnotherPlugin()],
    ///     storage: [PassStorage()],
    ///     emulators: [ExampleEmulatorPlugin()],
    ///     programName: "acme-auth")   // optional: the executable's own name by default
    /// ```
    ///
    /// A library app that uses one provider's `Desktop.<provider>(...)` entry point need not call
    /// it. A second call, and two plug-ins or stores with the same name, are programming errors.
    ///
    /// - Parameters:
    ///   - plugins: the provider plug-ins, in the order commands and help list them.
    ///   - storage: the stores beyond the keyring, the file and memory.
    ///   - emulators: the emulators the program allows, for ``BuiltInEmulators/sesame`` and `emulator NAME`.
    ///   - programName: the command people type, for ``programName``; `nil` takes the
    ///     executable's name from `CommandLine.arguments[0]`. One word: no space, quote, `$` or slash.
    public static func bootstrap(
        _ plugins: [any ProviderPlugin], storage: [any StorageBackend] = [], emulators: [any EmulatorPlugin] = [],
        programName: String? = nil
    ) {
        precondition(
            programName.map(isOneWord) ?? true,
            "a program name is one word, with no space, quote or slash: \(programName ?? "")")
        let names = plugins.map(\.name)
        precondition(Set(names).count == names.count, "two provider plug-ins share a name: \(names)")
        let stores = storage.map(\.name)
        let builtIn = Set(StorageMode.builtIn.map(\.rawValue))
        precondition(
            Set(stores).count == stores.count && builtIn.isDisjoint(with: stores),
            "two stores share a name, or a store takes a built-in mode's name: \(stores)")
        registry.withLock { registry in
            precondition(!registry.bootstrapped, "Desktop.bootstrap can be called only once per process")
            registry = Registry(
                providers: plugins, storage: storage, emulators: emulators, programName: programName, bootstrapped: true
            )
        }
    }

    /// The plug-in that answers to `name`: a plug-in's own name, or an instance name from the
    /// configuration (an OpenID issuer configured as `work`).
    ///
    /// - Throws: ``DesktopError`` when the configuration of named instances is wrong.
    public static func plugin(named name: String, configuration: DesktopConfiguration) throws -> (any ProviderPlugin)? {
        if let plugin = providers.first(where: { $0.name == name }) { return plugin }
        for plugin in providers where try plugin.instanceNames(configuration: configuration).contains(name) {
            return plugin
        }
        return nil
    }

    /// Every provider name in `configuration`: the plug-ins' and their configured instances'.
    public static func names(configuration: DesktopConfiguration) throws -> [(name: String, plugin: any ProviderPlugin)]
    {
        var names: [(String, any ProviderPlugin)] = []
        for plugin in providers {
            names.append((plugin.name, plugin))
            for instance in try plugin.instanceNames(configuration: configuration) where instance != plugin.name {
                names.append((instance, plugin))
            }
        }
        return names
    }

}

/// Saving a login that the person has just approved: what a plug-in's
/// ``ConnectedProvider/logIn(_:account:store:)`` calls once the login succeeded.
public enum DesktopLogin {
    /// Saves `token` for `account` under its provider and app (and `issuer`, for a provider with
    /// many issuers), or says plainly that the approved login was not kept.
    ///
    /// - Parameters:
    ///   - token: the token the login obtained.
    ///   - account: the account name to keep it under.
    ///   - issuer: where the login is valid, for a provider with many issuers; `nil` otherwise.
    ///   - store: the store the command selected.
    ///   - label: who answered, for the message ("the Acme emulator").
    /// - Throws: ``DesktopError`` (73) naming the store's problem when it cannot be saved.
    public static func save(
        _ token: AccessToken, account: String, issuer: String? = nil, store: any CredentialStore, label: String
    ) async throws {
        do {
            try await store.save(
                StoredCredential(
                    key: CredentialKey(provider: token.provider, issuer: issuer, appID: token.appID, account: account),
                    token: token))
        } catch let error as CredentialStoreError {
            throw DesktopError(
                "You approved the login to \(label), but it could not be saved, so it is not kept: \(error.message)",
                status: .cannotCreate)
        }
    }
}

/// Small network checks for `sesame doctor`, each bounded to 3 seconds.
public enum DoctorProbe {
    /// The limits of every doctor request: 3 seconds.
    package static let configuration = CurlTransport.Configuration(connectTimeout: .seconds(3), timeout: .seconds(3))

    /// The transport of one provider instance's checks: its CA certificates and proxy, the
    /// 3-second limits, and, when a certificate is refused, a diagnosis of who presented it.
    package static func transport(network: NetworkSettings, environment: [String: String]) -> any HTTPTransport {
        DiagnosingTransport(
            curl: CurlTransport(configuration: network.transportConfiguration(configuration)), network: network,
            environment: environment)
    }

    /// Whether `url` answers HTTP at all (any status counts: it is there), as a doctor line
    /// naming `label`. A plug-in's ``ProviderPlugin/doctor(_:)`` passes its request's transport,
    /// which gives up after 3 seconds. When the server's certificate is refused, the line names
    /// the chain's subject and issuer, says whether a TLS-inspecting proxy seems to be in the way,
    /// and which setting makes Sesame trust its CA.
    public static func answers(label: String, url: URL, transport: any HTTPTransport) async -> DoctorLine {
        do {
            let response = try await transport.send(HTTPRequest(method: .get, url: url))
            return DoctorLine(.ok, "\(label) at \(url.absoluteString) answers (HTTP \(response.status)).")
        } catch {
            if let line = await certificateLine(label: label, url: url, error: error, transport: transport) {
                return line
            }
            return DoctorLine(
                .problem, "\(label) at \(url.absoluteString) does not answer (\(error.sentence)).",
                fix: "check the network, a proxy (HTTPS_PROXY, or the proxy setting), or the configured address")
        }
    }
}

extension DoctorProbe {
    /// The doctor line for a call to `url` that failed with `error` because the server's
    /// certificate was refused (a `TransportError` of kind `certificateRejected`, or an
    /// `AuthError` wrapping one): the chain's subject and issuer when `transport` is doctor's,
    /// whether a TLS-inspecting proxy seems to be in the way, and the setting that fixes it.
    /// `nil` for any other error.
    public static func certificateLine(
        label: String, url: URL, error: any Error, transport: any HTTPTransport
    ) async -> DoctorLine? {
        let transportError = (error as? TransportError) ?? ((error as? AuthError)?.underlyingError as? TransportError)
        guard let rejected = transportError, rejected.kind == .certificateRejected else { return nil }
        if let diagnosing = transport as? DiagnosingTransport {
            return await diagnosing.diagnose(label: label, url: url, error: rejected)
        }
        return DoctorLine(
            .problem, "\(label) at \(url.absoluteString) does not answer (\(rejected.sentence)).",
            fix: NetworkSettings.certificateFix)
    }
}

/// What every provider's `Desktop.<provider>(...)` entry point resolves first: the terminal, the
/// configuration (flags, environment, config file), the store the storage policy selects, and the
/// accounts file. A plug-in module's entry point, in this package or another, starts with it.
public struct DesktopSetup: Sendable {
    /// The terminal to talk to.
    public let terminal: Terminal
    /// The resolved configuration.
    public let configuration: DesktopConfiguration
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The active account per provider.
    public let accounts: AccountState
    /// The environment read.
    public let environment: [String: String]

    /// Resolves the setup. A `nil` `terminal` is ``Terminal/silent``: the library says nothing
    /// unless the program hands in a terminal (the `sesame` command hands in ``Terminal/current(environment:)``).
    ///
    /// - Throws: ``DesktopError`` for a bad configuration or a missing keyring (unless the file is
    ///   opted in).
    public static func resolve(
        overrides: DesktopConfiguration.Overrides, environment: [String: String], terminal: Terminal?,
        keyring: @escaping DesktopStorage.KeyringFactory
    ) async throws -> DesktopSetup {
        let configuration = try DesktopConfiguration.resolve(overrides: overrides, environment: environment)
        return DesktopSetup(
            terminal: terminal ?? .silent, configuration: configuration,
            storage: try await DesktopStorage.select(configuration.storage, keyring: keyring, environment: environment),
            accounts: AccountState(environment: environment), environment: environment)
    }

    /// Resolves the setup, then connects `instance` for a login (``loginRequest(instance:flags:emulators:)``)
    /// with `connect`: how every provider's `Desktop.<provider>(…)` entry point starts.
    ///
    /// - Throws: what ``resolve(overrides:environment:terminal:keyring:)``,
    ///   ``loginRequest(instance:flags:emulators:)`` and `connect` throw.
    public static func connecting<Connection>(
        instance: String, flags: [String: String?], overrides: DesktopConfiguration.Overrides,
        environment: [String: String], terminal: Terminal?, keyring: @escaping DesktopStorage.KeyringFactory,
        emulators: BuiltInEmulators?, _ connect: (ProviderConnectionRequest) async throws -> Connection
    ) async throws -> (setup: DesktopSetup, connection: Connection) {
        let setup = try await resolve(
            overrides: overrides, environment: environment, terminal: terminal, keyring: keyring)
        return (setup, try await connect(setup.loginRequest(instance: instance, flags: flags, emulators: emulators)))
    }

    /// The setup of an app built from explicit values (`Desktop.facebook(appID:store:stateDirectory:)`
    /// and its siblings): `store` as the app gave it, the accounts file and the refresh locks
    /// (``explicitRefreshLocking``) in `stateDirectory`, and ``Terminal/silent``. Reads no
    /// environment variable and no config file, and writes nothing anywhere yet.
    public static func explicit(store: any CredentialStore, stateDirectory: URL) -> DesktopSetup {
        var accounts = AccountState(environment: ["HOME": stateDirectory.path])
        accounts.url = stateDirectory.appendingPathComponent("accounts.json")
        return DesktopSetup(
            terminal: .silent,
            configuration: DesktopConfiguration(
                storage: Sourced(.memory, source: "the app"), stateDirectory: stateDirectory,
                browser: LocalBrowser(.system, source: "the app")),
            storage: StorageSelection(
                store: store, backend: "the app's store", reason: "given by the app", kind: "app"),
            accounts: accounts, environment: [:])
    }

    /// For an ``explicit(store:stateDirectory:)`` setup: a refresh lock file per login in the state
    /// directory's `locks`.
    public var explicitRefreshLocking: RefreshLocking {
        .directory(configuration.stateDirectory.appendingPathComponent("locks", isDirectory: true))
    }

    /// The request that connects `instance` for a login, with `flags` from the program (`nil`
    /// values left out), a `CurlTransport` with the instance's CA certificates and proxy
    /// (``NetworkSettings``; its own variables and config key only when its plug-in was handed to
    /// ``Desktop/bootstrap(_:storage:emulators:programName:)``), and the built-in emulators the program allows.
    ///
    /// - Throws: ``DesktopError`` (78) for a `ca_bundle` or `proxy` setting that cannot be used.
    public func loginRequest(
        instance: String, flags: [String: String?], emulators: BuiltInEmulators?
    ) throws -> ProviderConnectionRequest {
        let network = try NetworkSettings.resolve(
            instance: instance, plugin: try Desktop.plugin(named: instance, configuration: configuration),
            configuration: configuration, environment: environment)
        return ProviderConnectionRequest(
            instance: instance, flags: flags.compactMapValues { $0 }, configuration: configuration,
            environment: environment, terminal: terminal,
            transport: CurlTransport(configuration: network.transportConfiguration()), emulators: emulators,
            purpose: .login)
    }
}

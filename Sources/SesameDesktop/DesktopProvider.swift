import Foundation
import Sesame

/// What a plug-in's connection takes from the command it serves, apart from the provider itself:
/// how requests go out, the terminal, the built-in emulator that stands in (if any) with its
/// approval step, the environment, how renewals are locked, the rate-limit budget the storage
/// shares, and whether a browser opens here. Every plug-in's connection holds one.
package struct ConnectionContext: Sendable {
    package var transport: any HTTPTransport
    package var terminal: Terminal
    package var emulator: RunningEmulator?
    package var approvalMode: EmulatorApproval.Mode
    package var environment: [String: String]
    package var refreshLocking: RefreshLocking
    package var rateLimitBudget: (any RateLimitBudget)?
    package var browser: LocalBrowser

    /// A context from explicit values, for a library app that reads no environment: silent, no
    /// emulator, the system browser.
    package init(
        transport: any HTTPTransport, refreshLocking: RefreshLocking, terminal: Terminal = .silent,
        browser: LocalBrowser = LocalBrowser(.system, source: "the app")
    ) {
        self.transport = transport
        self.terminal = terminal
        approvalMode = .off
        environment = [:]
        self.refreshLocking = refreshLocking
        self.browser = browser
    }

    /// The context of `request`; against `emulator` when one stands in (requests are routed to it,
    /// and its approval step follows `SESAME_EMULATOR_APPROVE`).
    ///
    /// - Throws: ``DesktopError`` for an approval mode that is not one.
    package init(
        _ request: ProviderConnectionRequest, emulator: RunningEmulator? = nil,
        rateLimitBudget: (any RateLimitBudget)? = nil
    ) throws {
        transport = emulator?.route(request.transport) ?? request.transport
        terminal = request.terminal
        self.emulator = emulator
        approvalMode =
            emulator == nil ? .off : try EmulatorApproval.mode(environment: request.environment, terminal: terminal)
        environment = request.environment
        refreshLocking = request.refreshLocking
        self.rateLimitBudget = rateLimitBudget
        browser = request.configuration.browser
    }

    /// Whether a built-in emulator stands in for the provider.
    package var isEmulated: Bool { emulator != nil }

    /// The emulator's approval step, offered on the terminal.
    package var emulatorApproval: EmulatorApproval? {
        emulator.map { EmulatorApproval(emulator: $0, mode: approvalMode, terminal: terminal, transport: transport) }
    }

    /// Shows a device login's code (and the emulator's approval step) on the terminal.
    package func presenter(providerName: String) -> TerminalLoginPresenter {
        TerminalLoginPresenter(terminal: terminal, providerName: providerName, emulatorApproval: emulatorApproval)
    }

    /// Stops the built-in emulator, saving its state; a failure to save is said on the terminal.
    package func shutdown(emulatorName: String) async {
        await emulator?.stop(named: emulatorName, telling: terminal)
    }
}

/// A provider with the desktop defaults, as a library app holds it: the provider (its app, host
/// or issuer), the store, the accounts, and the built-in emulator when one stands in. What
/// `Desktop.facebook(…)`, `Desktop.github(…)` and `Desktop.oidc(…)` return; a provider's plug-in
/// adds its logins and sessions in an extension.
public struct DesktopProvider<Provider: Sendable>: Sendable {
    /// The provider (the built-in emulator's when none is configured).
    public let provider: Provider
    package let context: ConnectionContext
    /// The name the built-in emulator is called by when its state cannot be saved.
    let emulatorName: String
    /// The resolved configuration.
    public let configuration: DesktopConfiguration
    /// The credential store in use, and why.
    public let storage: StorageSelection
    /// The active account per provider, and the last usage seen.
    public let accounts: AccountState
    /// The account that was active for this provider when ``accounts`` was read.
    public let activeAccount: String

    /// A provider with what `setup` resolved: `Desktop.facebook(…)`, `Desktop.github(…)`, `Desktop.oidc(…)`.
    package init(
        provider: Provider, context: ConnectionContext, emulatorName: String, setup: DesktopSetup,
        activeAccount: String
    ) {
        self.provider = provider
        self.context = context
        self.emulatorName = emulatorName
        self.configuration = setup.configuration
        self.storage = setup.storage
        self.accounts = setup.accounts
        self.activeAccount = activeAccount
    }

    /// A provider from explicit values only (``DesktopSetup/explicit(store:stateDirectory:)``):
    /// `Desktop.facebook(appID:store:stateDirectory:)` and its siblings.
    package init(
        explicit provider: Provider, emulatorName: String, store: any CredentialStore, stateDirectory: URL,
        transport: any HTTPTransport
    ) {
        let setup = DesktopSetup.explicit(store: store, stateDirectory: stateDirectory)
        let context = ConnectionContext(
            transport: transport, refreshLocking: setup.explicitRefreshLocking, browser: setup.configuration.browser)
        self.init(
            provider: provider, context: context, emulatorName: emulatorName, setup: setup, activeAccount: "default")
    }

    /// The HTTP transport (`CurlTransport`, routed to the emulator when one stands in).
    public var transport: any HTTPTransport { context.transport }
    /// The terminal.
    public var terminal: Terminal { context.terminal }
    /// Whether this runs against a built-in emulator.
    public var isEmulated: Bool { context.isEmulated }

    /// The account to use: `account` when given, else the active one.
    public func account(_ account: String? = nil) -> String { account ?? activeAccount }

    /// Stops the built-in emulator (writing its state file). Call before exiting.
    public func shutdown() async { await context.shutdown(emulatorName: emulatorName) }
}

/// The values of a plug-in's settings, as one command resolved them.
package struct SettingValues: Sendable {
    var values: [String: Sourced<String>]

    /// The value of `setting`, and where it came from; `nil` when nothing set it.
    package subscript(_ setting: ProviderSetting) -> Sourced<String>? {
        get { values[setting.name] }
        set { values[setting.name] = newValue }
    }
}

extension ProviderConnectionRequest {
    /// Resolves each of `settings` with ``value(of:section:sectionPath:fallback:)`` from the
    /// config file's section `name`.
    ///
    /// - Throws: ``DesktopError`` (78) when the section is not an object or a value is bad.
    package func settingValues(_ settings: [ProviderSetting], section name: String) throws -> SettingValues {
        let section = try configuration.section(name)
        var values: [String: Sourced<String>] = [:]
        for setting in settings {
            values[setting.name] = try value(of: setting, section: section, sectionPath: name)
        }
        return SettingValues(values: values)
    }
}

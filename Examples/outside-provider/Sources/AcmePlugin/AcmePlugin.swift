import Acme
import Foundation
import Sesame
import SesameDesktop

/// Acme's desktop plug-in: an Acme server's address and client id, device login (or the browser
/// with `--web`), status through `/api/me`, doctor lines, and the built-in Acme emulator when
/// nothing is configured and the program allows it.
///
/// | setting | flag | environment | config file |
/// |---|---|---|---|
/// | server address | `--acme-url` | `SESAME_ACME_URL` | `acme.url` |
/// | client id | `--client-id` | `SESAME_ACME_CLIENT_ID` | `acme.client_id` |
///
/// Logins are stored under provider `acme`, with the client id as the app id.
public struct AcmePlugin: ProviderPlugin {
    /// Creates the plug-in.
    public init() {}

    public var name: String { "acme" }
    public var displayName: String { "Acme" }
    public var summary: String {
        "An Acme OAuth 2.0 server (device login, or the browser with PKCE; no ID token); the built-in Acme "
            + "emulator when nothing is configured."
    }
    public var loginFlows: Set<LoginFlowKind> { [.device, .browser] }
    public var errorTaxonomy: any ErrorTaxonomy { AcmeErrorTaxonomy() }
    public var errorTable: ErrorRuleTable? { AcmeErrorTaxonomy.table }

    public var loginHelp: (discussion: String, examples: [(command: String, comment: String)]) {
        (
            "Acme: device login by default, --web for the browser; with nothing configured, the built-in Acme "
                + "emulator.",
            [
                ("sesame login acme", "Acme: the built-in emulator, or the configured server"),
                (
                    "sesame login acme --web --acme-url https://id.acme.example --client-id my-app",
                    "Acme: a real server, in the browser"
                ),
            ]
        )
    }

    public var explainErrorExamples: [(command: String, comment: String)] {
        [
            (
                "sesame explain-error --provider acme --status 400 --body '{\"error\":\"invalid_grant\"}'",
                "An Acme refresh token that was revoked or already used"
            )
        ]
    }

    // The flag carries the provider's name: flags are shared by name across providers (--client-id
    // is the same setting everywhere; a --url of Acme's own would not be).
    static let serverURL = ProviderSetting(
        "acme-url", value: "URL", kind: .url, environment: "SESAME_ACME_URL", configKey: "url",
        "The Acme server's address: https, or http to a loopback address.")
    static let clientID = ProviderSetting(
        "client-id", value: "ID", environment: "SESAME_ACME_CLIENT_ID", configKey: "client_id",
        "The client id of an app registered with the Acme server.")

    public func settings(instance: String) -> [ProviderSetting] { [Self.serverURL, Self.clientID] }

    /// The resolved settings: each from its flag, then its variable, then the config file.
    struct Settings {
        var serverURL: Sourced<String>?
        var clientID: Sourced<String>?

        init(_ request: ProviderConnectionRequest) throws {
            let section = try request.configuration.section("acme")
            serverURL = try request.value(of: AcmePlugin.serverURL, section: section, sectionPath: "acme")
            clientID = try request.value(of: AcmePlugin.clientID, section: section, sectionPath: "acme")
        }

        /// Nothing says which Acme server to use.
        var isEmpty: Bool { serverURL == nil && clientID == nil }

        /// The provider the settings describe.
        ///
        /// - Throws: ``DesktopError`` (78) for a setting that is missing or not allowed.
        func provider(allowingInsecureHosts: Set<String>) throws -> AcmeProvider {
            guard let serverURL, let url = URL(string: serverURL.value) else {
                throw DesktopError(
                    "No Acme server is configured: set SESAME_ACME_URL (or give --acme-url, or \"url\" in the config "
                        + "file's \"acme\" object) to its address.", status: .config)
            }
            guard let clientID else {
                throw DesktopError(
                    "No Acme client id is configured: set SESAME_ACME_CLIENT_ID (or give --client-id, or "
                        + "\"client_id\" in the config file's \"acme\" object).", status: .config)
            }
            do {
                return try AcmeProvider(
                    configuration: AcmeConfiguration(baseURL: url, clientID: clientID.value),
                    allowingInsecureHosts: allowingInsecureHosts)
            } catch {
                throw DesktopError("\(serverURL.source): \(error.message)", status: .config)
            }
        }
    }

    public func connect(_ request: ProviderConnectionRequest) async throws -> any ConnectedProvider {
        let settings = try Settings(request)
        guard settings.isEmpty, let emulators = request.emulators,
            let emulator = try await emulators.emulator(
                of: self, purpose: request.purpose, environment: request.environment),
            let base = emulator.endpoints["base"]
        else {
            return AcmeConnection(
                provider: try settings.provider(allowingInsecureHosts: request.allowedInsecureHosts),
                transport: request.transport, terminal: request.terminal, environment: request.environment,
                refreshLocking: request.refreshLocking,
                emulator: nil, approvalMode: .off, browser: request.configuration.browser)
        }
        let approvalMode = try EmulatorApproval.mode(environment: request.environment, terminal: request.terminal)
        // An emulator that starts on first use is addressed by a placeholder until then; its
        // transport sends those requests to 127.0.0.1.
        let provider = try AcmeProvider(
            configuration: AcmeConfiguration(baseURL: base, clientID: emulator.appID),
            allowingInsecureHosts: Set([LazyEmulator.placeholderOrigin.host].compactMap { $0 }))
        if request.purpose == .login {
            request.terminal.say(
                request.terminal.dim(
                    "Using the built-in Acme emulator (no Acme server is configured; its state is in "
                        + "\(emulator.stateFile.path)); set SESAME_ACME_URL and SESAME_ACME_CLIENT_ID to use a "
                        + "real Acme server.") + "\n")
        }
        return AcmeConnection(
            provider: provider, transport: emulator.route(request.transport), terminal: request.terminal,
            environment: request.environment, refreshLocking: request.refreshLocking, emulator: emulator,
            approvalMode: approvalMode, browser: request.configuration.browser)
    }

    public func doctor(_ request: ProviderConnectionRequest) async -> [DoctorLine] {
        let provider: AcmeProvider
        do {
            let settings = try Settings(request)
            guard !settings.isEmpty else {
                return [
                    DoctorLine(
                        .info, "Acme: nothing is configured, so the built-in Acme emulator is used",
                        fix: "to use an Acme server, set SESAME_ACME_URL and SESAME_ACME_CLIENT_ID")
                ]
            }
            provider = try settings.provider(allowingInsecureHosts: request.allowedInsecureHosts)
        } catch {
            return [DoctorLine(.problem, "Acme configuration: \(error)")]
        }
        return [
            DoctorLine(.ok, "Acme client id \(Terminal.printable(provider.configuration.clientID))."),
            await DoctorProbe.answers(
                label: "The Acme server", url: provider.configuration.baseURL, transport: request.transport),
        ]
    }
}

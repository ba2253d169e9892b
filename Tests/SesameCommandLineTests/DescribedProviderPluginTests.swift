import Foundation
import Sesame
import SesameDesktop
import SesameTesting
import Testing

/// The desktop plug-in derived from a description (issue 49, item 3); Acme's end-to-end tests
/// (`scripts/test-outside-provider`) run every command through it.
@Suite("A plug-in derived from a description")
struct DescribedProviderPluginTests {
    static let box = OAuth2Description(
        id: "box", displayName: "Box",
        endpoints: OAuth2Endpoints(
            authorization: URL(string: "https://box.example/oauth2/authorize")!,
            token: URL(string: "https://api.box.example/oauth2/token")!))

    static func request(
        _ environment: [String: String], flags: [String: String] = [:], transport: any HTTPTransport
    ) -> ProviderConnectionRequest {
        ProviderConnectionRequest(
            instance: "box", flags: flags, configuration: DesktopConfiguration(file: ["box": .object([:])]),
            environment: environment, terminal: .silent, transport: transport, emulators: nil, purpose: .doctor)
    }

    @Test(
        "settings: --client-id as every provider spells it (and --box-client-id), variables and config keys named after the provider; a secret is never a flag unless the provider makes it public"
    )
    func settings() {
        let plugin = DescribedProviderPlugin(Self.box)
        let settings = plugin.settings(instance: "box")
        let byName = Dictionary(uniqueKeysWithValues: settings.map { ($0.name, $0) })
        #expect(byName["client-id"]?.environment == "SESAME_BOX_CLIENT_ID")
        #expect(byName["client-id"]?.configKey == "client_id")
        #expect(byName["client-id"]?.isFlag == true)
        #expect(byName["box-client-id"]?.isFlag == true)
        #expect(byName["box-client-id"]?.environment == nil)
        #expect(byName["client-secret"]?.isFlag == false)
        #expect(byName["box-client-secret"] == nil, "a secret has no flag, in either spelling")
        #expect(byName["box-token-url"]?.environment == "SESAME_BOX_TOKEN_URL")
        #expect(byName["url"] == nil && byName["box-url"] == nil, "a provider at a fixed address has no server setting")
        var google = Self.box
        google.clientSecretIsPublic = true
        let publicSecret = DescribedProviderPlugin(google).settings(instance: "box")
        #expect(publicSecret.first { $0.name == "client-secret" }?.isFlag == true)
        #expect(publicSecret.first { $0.name == "box-client-secret" }?.isFlag == true)
        let server = DescribedProviderPlugin(Self.box, server: .required).settings(instance: "box")
        #expect(server.first { $0.name == "url" }?.environment == "SESAME_BOX_URL")
        #expect(server.first { $0.name == "box-url" }?.isFlag == true)
        #expect(plugin.loginFlows == [.browser])
    }

    @Test(
        "the client id comes from --client-id, else --box-client-id, else SESAME_BOX_CLIENT_ID",
        arguments: [
            (["client-id": "short"], "short"), (["box-client-id": "long"], "long"),
            (["client-id": "short", "box-client-id": "long"], "short"), ([:], "variable"),
        ])
    func clientIDFlags(_ flags: [String: String], expected: String) async throws {
        let lines = await DescribedProviderPlugin(Self.box).doctor(
            Self.request(
                ["SESAME_BOX_CLIENT_ID": "variable"], flags: flags,
                transport: RecordingTransport(always: HTTPResponse(status: 405))))
        #expect(lines.map(\.text).first == "Box client id \(expected).")
    }

    @Test("a missing client id is a configuration error naming where to set it")
    func missingClientID() async throws {
        let plugin = DescribedProviderPlugin(Self.box)
        let error = await #expect(throws: DesktopError.self) {
            _ = try await plugin.connect(
                Self.request([:], transport: RecordingTransport(always: HTTPResponse(status: 200))))
        }
        #expect(error?.status == .config)
        #expect(error?.message.contains("SESAME_BOX_CLIENT_ID") == true)
    }

    @Test("doctor names the client id and probes the token endpoint, an override in place of the description's")
    func doctor() async throws {
        let transport = RecordingTransport(always: HTTPResponse(status: 405))
        let lines = await DescribedProviderPlugin(Self.box).doctor(
            Self.request(
                ["SESAME_BOX_CLIENT_ID": "app", "SESAME_BOX_TOKEN_URL": "https://other.example/token"],
                transport: transport))
        #expect(lines.map(\.text).first == "Box client id app.")
        #expect(lines.last?.text == "Box's token endpoint at https://other.example/token answers (HTTP 405).")
        #expect(transport.requests.map(\.url.host) == ["other.example"])
    }

    @Test("a server address moves every endpoint onto it, and plain http to another host is refused")
    func server() async throws {
        let plugin = DescribedProviderPlugin(Self.box, server: .required)
        let transport = RecordingTransport(always: HTTPResponse(status: 200))
        let connection = try await plugin.connect(
            Self.request(
                ["SESAME_BOX_CLIENT_ID": "app", "SESAME_BOX_URL": "http://127.0.0.1:9/box"], transport: transport))
        #expect(connection.label == "Box (127.0.0.1)")
        #expect(connection.details == ["server": "http://127.0.0.1:9/box"])
        let error = await #expect(throws: DesktopError.self) {
            _ = try await plugin.connect(
                Self.request(
                    ["SESAME_BOX_CLIENT_ID": "app", "SESAME_BOX_URL": "http://box.test"], transport: transport))
        }
        #expect(error?.message.contains("plain http to box.test") == true)
    }

    @Test(
        "status: a refusal that needs a new login is invalid, unless a refresh token can renew it; others unverified",
        arguments: [
            (ErrorCategory.authenticationReopenSession, nil as String?, AccountCheck.Validity.invalid, "gone"),
            (.authenticationReopenSession, "refresh", .unverified, "Box refused the access token; the next use tries"),
            (.server, nil, .unverified, "gone"),
        ])
    func refused(_ category: ErrorCategory, refreshToken: String?, validity: AccountCheck.Validity, problem: String) {
        let error = AuthError(category: category, message: "The token is gone.", provider: "box")
        let token = AccessToken(tokenString: "t", provider: "box", appID: "app", refreshToken: refreshToken)
        let check = AccountCheck.refusal(error, of: token, by: "Box", usage: .string("u"))
        #expect(check.validity == validity)
        #expect(check.problem?.contains(problem) == true)
        #expect(check.usage == .string("u"))
        #expect(check.tokenRefused == (category == .authenticationReopenSession))
    }
}

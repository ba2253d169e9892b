import Foundation
import Sesame
import SesameCurl
import SesameHTTPServer
import SesameOIDC
import SesameOIDCEmulator
import SesameTesting
import Testing

/// Issue 48 item 7: Sesame's log, through the app's handler, has the events an operator needs
/// and no secret of any kind, by construction.
@Suite("logging: the app's handler gets every event and no secret")
struct LoggingTests {
    /// CurlTransport that keeps every secret a request carried or an answer brought, and that can
    /// make the provider echo a request's secrets back in an error body.
    final class SecretWatchingTransport: HTTPTransport {
        let base = CurlTransport()
        private let state = Locked<(secrets: Set<String>, kinds: Set<String>, echoNextTokenRequest: Bool)>(
            ([], [], false))

        /// Every secret seen, at least ``Redaction/shortestRedactedSecret`` long.
        var secrets: [String] { state.withLock { Array($0.secrets) } }
        /// The names of the secrets seen (`code_verifier`, `device_code`, `Authorization`, …).
        var kinds: Set<String> { state.withLock { $0.kinds } }
        func add(_ named: [(String, String)]) {
            let named = named.filter { $0.1.count >= Redaction.shortestRedactedSecret }
            state.withLock { state in
                state.secrets.formUnion(named.map(\.1))
                state.kinds.formUnion(named.map(\.0))
            }
        }
        /// The next request to the token endpoint gets `invalid_grant`, its body and credentials echoed.
        func echoNextTokenRequest() { state.withLock { $0.echoNextTokenRequest = true } }

        static let secretNames: Set = [
            "code", "code_verifier", "client_secret", "refresh_token", "access_token", "id_token", "device_code",
            "token", "id_token_hint", "state", "nonce",
        ]

        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            let form = String(decoding: request.body ?? Data(), as: UTF8.self)
            let isForm = request.headers["Content-Type"]?.contains("x-www-form-urlencoded") ?? false
            let fields =
                (isForm ? FormEncoding.decode(form) : [])
                + (URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map {
                    ($0.name, $0.value ?? "")
                }
            add(fields.filter { Self.secretNames.contains($0.0) })
            if let authorization = request.headers["Authorization"] {
                let credential = String(authorization.drop { $0 != " " }.dropFirst())
                add([("Authorization", credential)])
                if let basic = Data(base64Encoded: credential) {
                    let pair = String(decoding: basic, as: UTF8.self)
                    add([("client_secret", String(pair.drop { $0 != ":" }.dropFirst()).removingPercentEncoding ?? "")])
                }
            }
            var response = try await base.send(request)
            if let json = response.json?.objectValue {
                add(Self.secretNames.compactMap { name in json[name]?.stringValue.map { (name, $0) } })
            }
            let echo = state.withLock { state -> Bool in
                guard state.echoNextTokenRequest, request.url.path.hasSuffix("/token") else { return false }
                state.echoNextTokenRequest = false
                return true
            }
            if echo {
                let echoed = "refused \(form) with \(request.headers["Authorization"] ?? "")"
                response = HTTPResponse(
                    status: 400, headers: ["Content-Type": "application/json"],
                    body: Data(
                        JSONValue.object([
                            "error": .string("invalid_grant"), "error_description": .string(echoed),
                        ]).jsonText.utf8))
            }
            return response
        }
    }

    @Test(
        "a browser and a device login, renewals, a refused renewal whose error echoes the secrets, userinfo, revocation and store saves, loads and deletes: the log has each event and none of the access, refresh and ID tokens, code, PKCE verifier, device code or client secret"
    )
    func noSecretInTheLog() async throws {
        let log = InMemoryLogHandler()
        let transport = SecretWatchingTransport()
        let clientSecret = "the client secret 7d2f9a"
        transport.add([("the configured client secret", clientSecret)])
        try await SesameLogging.withHandler(log) {
            try await OIDCHarness.with { harness in
                try await harness.emulator.registerClient("confidential-desktop", secret: clientSecret)
                var configuration = OIDCConfiguration(
                    issuer: harness.endpoints.issuer, clientID: "confidential-desktop",
                    clientSecret: ClientSecret(clientSecret))
                configuration.clientAuthMethod = .clientSecretPost
                let provider = try await OIDCProvider.discover(configuration, transport: transport)
                let store = OIDCHarness.persistentStore()
                let browser = EmulatorBrowser(transport: transport, action: "allow")
                let browserLogin = OIDCBrowserLogin(
                    oidc: provider, receiver: LoopbackRedirectReceiver(timeout: .seconds(30)), opener: browser,
                    transport: transport)
                let session = OIDCSession(provider: provider, transport: transport, store: store, loginUI: browserLogin)
                try await session.open(allowLoginUI: true)
                _ = try await session.userInfo()
                try await session.refresh()
                // The provider refuses the next renewal, echoing what it was sent.
                transport.echoNextTokenRequest()
                await #expect(throws: AuthError.self) { try await session.refresh() }

                // A device login replaces the refused login; then it is used, renewed, revoked.
                let deviceLogin = DeviceLoginFlow(
                    dialect: try OIDCDeviceDialect(oidc: provider),
                    presenter: AdminDeviceApprover(admin: harness.endpoints.adminURL, transport: transport),
                    transport: transport, clock: ManualClock(autoAdvance: true))
                let second = OIDCSession(provider: provider, transport: transport, store: store, loginUI: deviceLogin)
                try await second.open(allowLoginUI: true)
                try await second.refresh()
                try await second.logout(revoke: true)
            }
        }

        let events = log.events
        let lines = events.map(\.line)
        let secrets = transport.secrets
        let kinds: Set = [
            "access_token", "refresh_token", "id_token", "code", "code_verifier", "device_code", "client_secret",
            "Authorization",
        ]
        #expect(
            kinds.isSubset(of: transport.kinds),
            "secrets that never went through: \(kinds.subtracting(transport.kinds))")
        for secret in secrets {
            // Named by their messages and value names only: a failure prints no secret.
            let leaks = events.filter { $0.line.contains(secret) }.map { "\($0.message) \($0.metadata.keys.sorted())" }
            #expect(leaks.isEmpty, "a secret of \(secret.count) characters is in \(leaks.count) event(s): \(leaks)")
        }
        func logged(_ message: String, _ values: [String: String] = [:]) -> Bool {
            events.contains { event in
                event.message.description == message
                    && values.allSatisfy { event.metadata[$0.key]?.description == $0.value }
            }
        }
        #expect(logged("HTTP exchange", ["method": "POST", "status": "200"]))
        #expect(events.contains { $0.message.description == "HTTP exchange" && $0.source == "SesameCurl" })
        #expect(events.contains { $0.message.description == "token renewed and saved" && $0.source == "Sesame" })
        #expect(
            lines.contains { $0.contains("path=/callback?") && $0.contains("code=<redacted>") },
            "the loopback redirect is logged with its query values redacted")
        #expect(logged("credential store operation", ["operation": "save", "store": "FileCredentialStore"]))
        #expect(logged("credential store operation", ["operation": "load", "found": "yes"]))
        #expect(logged("credential store operation", ["operation": "delete", "done": "yes"]))
        #expect(logged("token due; renewing"))
        #expect(logged("renewal claimed; stored login read again", ["found": "yes"]))
        #expect(logged("token renewed and saved"))
        #expect(logged("renewal refused; the login is kept, marked as needing a new login"))
        #expect(events.allSatisfy { $0.level <= .info }, "Sesame logs at info or below")
    }
}

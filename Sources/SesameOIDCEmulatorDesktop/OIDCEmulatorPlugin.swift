import Foundation
import Sesame
import SesameDesktop
import SesameEmulator
import SesameOIDCEmulator

/// Sesame's OpenID emulator as a program registers it
/// (`Desktop.bootstrap(..., emulators: [OIDCEmulatorPlugin()])`): `sesame emulator oidc`.
public struct OIDCEmulatorPlugin: EmulatorPlugin {
    /// Creates the registration.
    public init() {}

    public var provider: String { "oidc" }

    /// `sesame emulator oidc`: a local OpenID provider in the foreground.
    public var foreground: (any ForegroundEmulator)? { OIDCForegroundEmulator() }
}

/// The OpenID emulator as `sesame emulator oidc` runs it.
struct OIDCForegroundEmulator: ForegroundEmulator {
    var summary: String {
        "a local OpenID provider: discovery, JWKS, consent page, device login, refresh with rotation, userinfo, "
            + "RFC 7009 revocation."
    }

    var discussion: String {
        """
        It keeps its state in memory only and prints its issuer and public client id for '\(Desktop.programName) login
        oidc --issuer URL --client-id ID'. Its device page approves a code in the browser; POST
        {"user_code": "..."} to ISSUER/__sesame/device approves one without it; {"enabled": false} to
        ISSUER/__sesame/device-login turns device login off (a browser-only issuer).
        """
    }

    var options: [EmulatorOption] {
        [
            EmulatorOption(
                "quirks", value: "PROVIDER",
                "Answer as this provider documents it: "
                    + OIDCQuirks.allCases.map(\.rawValue).joined(separator: ", ") + ".")
        ]
    }

    var examples: [(command: String, comment: String)] {
        [
            ("\(Desktop.programName) emulator oidc --port 8765", "A local OpenID provider at http://127.0.0.1:8765"),
            ("\(Desktop.programName) emulator oidc --quirks microsoft", "One that answers as Microsoft Entra ID does"),
        ]
    }

    func serve(_ request: EmulatorServeRequest) async throws -> Int32 {
        let waiter = SignalWaiter(request.signals)
        defer { waiter.cancel() }
        var quirks: OIDCQuirks?
        if let name = request.value("quirks") {
            guard let named = OIDCQuirks(rawValue: name) else {
                throw DesktopError(
                    "--quirks \(name.sanitizedForTerminal) is not a provider the emulator knows; give one of "
                        + OIDCQuirks.allCases.map(\.rawValue).joined(separator: ", ") + ".", status: .usage)
            }
            quirks = named
        }
        // Two seconds between device polls: a person trying it by hand should not wait five.
        let emulator =
            try quirks.map { try OIDCEmulator(quirks: $0, devicePollInterval: 2) }
            ?? OIDCEmulator(devicePollInterval: 2)
        let endpoints = try await emulator.start(port: request.port)
        if let quirks {
            request.write(Self.banner(quirks, root: endpoints.issuer))
            let signal = await waiter.wait()
            await emulator.stop()
            return signal
        }
        request.write(
            """
            Sesame OIDC emulator (a local OpenID provider, not a real one) on \(endpoints.issuer)
              Issuer:       \(endpoints.issuer)
              Discovery:    \(endpoints.issuer)/.well-known/openid-configuration
              Client id:    \(OIDCEmulator.defaultClientID) (public: PKCE, no secret)
              People:       Alice Example (248289761001), Bob Example (248289761002)
              Admin API:    \(endpoints.adminURL.absoluteString) (POST /device {"user_code": "..."} approves)
              State:        in memory only
            Try: \(Desktop.programName) login oidc --issuer \(endpoints.issuer) --client-id \(OIDCEmulator.defaultClientID)
            Press Ctrl-C to stop.

            """)
        let signal = await waiter.wait()
        await emulator.stop()
        return signal
    }

    /// What `--quirks` prints: where the provider's endpoints are and how to log in to it.
    static func banner(_ quirks: OIDCQuirks, root: String) -> String {
        let secret = quirks.defaultClientSecret.map { " (secret, not secret: \($0))" } ?? " (public: PKCE, no secret)"
        let issuer: String
        switch quirks {
        case .google, .gitlab: issuer = "Issuer:       \(root) (discovery at /.well-known/openid-configuration)"
        case .microsoft:
            issuer =
                "Authority:    \(root)/{tenant}/v2.0 (tenant common, organizations, consumers, "
                + OIDCQuirks.microsoftWorkTenant + ")"
        case .dropbox: issuer = "Endpoints:    \(root)/oauth2/authorize, /oauth2/token, /2/users/get_current_account"
        case .slack: issuer = "Endpoints:    \(root)/oauth/v2/authorize, /api/oauth.v2.access, /api/auth.test"
        }
        return """
            Sesame OIDC emulator answering as \(quirks.rawValue) does (a local look-alike, not the real one) on \(root)
              \(issuer)
              Client id:    \(OIDCEmulator.defaultClientID)\(secret)
              Admin API:    \(root)/__sesame
              State:        in memory only
            Press Ctrl-C to stop.

            """
    }
}

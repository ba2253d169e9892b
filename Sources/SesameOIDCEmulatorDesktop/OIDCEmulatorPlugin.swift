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
        It keeps its state in memory only and prints its issuer and public client id for 'sesame login
        oidc --issuer URL --client-id ID'. Its device page approves a code in the browser; POST
        {"user_code": "..."} to ISSUER/__sesame/device approves one without it; {"enabled": false} to
        ISSUER/__sesame/device-login turns device login off (a browser-only issuer).
        """
    }

    var examples: [(command: String, comment: String)] {
        [("sesame emulator oidc --port 8765", "A local OpenID provider at http://127.0.0.1:8765")]
    }

    func serve(_ request: EmulatorServeRequest) async throws -> Int32 {
        let waiter = SignalWaiter(request.signals)
        defer { waiter.cancel() }
        // Two seconds between device polls: a person trying it by hand should not wait five.
        let emulator = try OIDCEmulator(devicePollInterval: 2)
        let endpoints = try await emulator.start(port: request.port)
        request.write(
            """
            Sesame OIDC emulator (a local OpenID provider, not a real one) on \(endpoints.issuer)
              Issuer:       \(endpoints.issuer)
              Discovery:    \(endpoints.issuer)/.well-known/openid-configuration
              Client id:    \(OIDCEmulator.defaultClientID) (public: PKCE, no secret)
              People:       Alice Example (248289761001), Bob Example (248289761002)
              Admin API:    \(endpoints.adminURL.absoluteString) (POST /device {"user_code": "..."} approves)
              State:        in memory only
            Try: sesame login oidc --issuer \(endpoints.issuer) --client-id \(OIDCEmulator.defaultClientID)
            Press Ctrl-C to stop.

            """)
        let signal = await waiter.wait()
        await emulator.stop()
        return signal
    }
}

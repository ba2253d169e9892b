import Foundation
import Sesame
import SesameDesktop
import SesameOIDC

/// The issuer and client of the last login under each name: `$XDG_STATE_HOME/sesame/oidc-issuers.json`,
/// replaced atomically. No secrets.
struct OIDCRememberedIssuers: Sendable {
    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("oidc-issuers.json"))
    }

    func read() -> [String: JSONValue] { file.read() }

    func remember(instance: String, issuer: String, clientID: String) throws {
        try file.modify { all in
            all[instance] = .object(["issuer": .string(issuer), "clientID": .string(clientID)])
        }
    }
}

/// The issuers' endpoints as last discovered, with when: `oidc-discovery.json` in the state
/// directory, keyed by issuer. Endpoints come back only when they are younger than ``maxAge``
/// and name the issuer they are kept under; `OIDCProvider.discover` then checks them as it
/// checks a discovery document (https, or http to loopback or an allowed host).
struct OIDCDiscoveryCache: Sendable {
    /// How long kept endpoints are used without asking the issuer again.
    static let maxAge: TimeInterval = 24 * 3600

    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("oidc-discovery.json"))
    }

    /// The endpoints kept for `issuer`, when discovered no more than ``maxAge`` before `now`.
    func endpoints(for issuer: String, provider: ProviderID, now: Date) -> OIDCEndpoints? {
        guard let entry = file.read()[issuer], let fetched = entry["fetched_at"]?.doubleValue else { return nil }
        let age = now.timeIntervalSince1970 - fetched
        guard age >= 0, age <= Self.maxAge,
            let endpoints = try? OIDCEndpoints(discoveryDocument: entry["document"], provider: provider),
            endpoints.issuer == issuer
        else { return nil }
        return endpoints
    }

    /// Keeps `endpoints`, discovered at `date`, under their issuer. The time is kept in whole
    /// seconds rounded down, so that a use in the same second never finds it in the future.
    func remember(_ endpoints: OIDCEndpoints, at date: Date) throws {
        try file.modify { all in
            all[endpoints.issuer] = .object([
                "fetched_at": .number(date.timeIntervalSince1970.rounded(.down)),
                "document": endpoints.discoveryDocument,
            ])
        }
    }
}

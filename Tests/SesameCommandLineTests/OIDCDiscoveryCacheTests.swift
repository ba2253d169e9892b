import Foundation
import Sesame
import SesameOIDC
import Testing

@testable import SesameOIDCPlugin

/// `oidc-discovery.json`: what lets a command that uses an OpenID login skip discovery.
@Suite("kept OpenID endpoints")
struct OIDCDiscoveryCacheTests {
    static let issuer = "https://id.example.com"
    static let endpoints = OIDCEndpoints(
        issuer: issuer, authorizationEndpoint: URL(string: "https://id.example.com/authorize")!,
        tokenEndpoint: URL(string: "https://id.example.com/token")!)

    /// A fleet machine that used a login once asked a stopped issuer for discovery again when its
    /// next use came less than half a second after the endpoints were kept: the time was kept
    /// rounded to the nearest second, up to half a second in the future, and refused as such.
    @Test(
        "endpoints kept a moment ago are used at once, at whatever fraction of a second they were kept",
        arguments: [0.0, 0.3, 0.5, 0.7, 0.999])
    func keptAMomentAgo(_ fraction: Double) throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-discovery-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = OIDCDiscoveryCache(stateDirectory: directory)
        let kept = Date(timeIntervalSince1970: 1_765_000_000 + fraction)
        try cache.remember(Self.endpoints, at: kept)
        for later in [0, 0.0005, 1.0, OIDCDiscoveryCache.maxAge - 1] {
            let found = cache.endpoints(for: Self.issuer, provider: .oidc, now: kept + later)
            #expect(found == Self.endpoints, "not found \(later) s after it was kept")
        }
        #expect(cache.endpoints(for: Self.issuer, provider: .oidc, now: kept + OIDCDiscoveryCache.maxAge + 1) == nil)
        #expect(cache.endpoints(for: "https://other.example.com", provider: .oidc, now: kept) == nil)
    }
}

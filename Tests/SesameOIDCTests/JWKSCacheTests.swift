import Foundation
import Sesame
import SesameOIDC
import SesameOIDCEmulator
import Testing

@Suite("JWKS cache: unknown key ids cannot make it hammer the issuer")
struct JWKSCacheTests {
    /// A token that names `kid` and is signed by nobody.
    static func forged(kid: String) -> String {
        func part(_ json: String) -> String { Base64URL.encode(Data(json.utf8)) }
        return part(#"{"alg":"RS256","typ":"JWT","kid":"\#(kid)"}"#) + "." + part(#"{"sub":"x"}"#) + ".AAAA"
    }

    /// (seconds since the start, kid, fetches expected after the check)
    static let steps: [(TimeInterval, String, Int)] = [
        (0, "forged-a", 2),  // the first fetch, then one more for the unknown kid
        (1, "forged-a", 2),  // the same kid inside its 60 s: no fetch
        (5, "forged-b", 2),  // another kid inside the 10 s spacing: no fetch
        (11, "forged-b", 3),  // another kid after the spacing: one fetch
        (30, "forged-a", 3),  // the first kid again, 30 s after its fetch: none
        (61, "forged-a", 4),  // and after 60 s: one
    ]

    @Test("an unknown kid fetches the set again at most once per kid per 60 s, and once per 10 s overall")
    func refetchWindows() async throws {
        try await OIDCHarness.with { harness in
            let start = Date()
            let elapsed = Locked<TimeInterval>(0)
            let now: @Sendable () -> Date = { start.addingTimeInterval(elapsed.withLock { $0 }) }
            let cache = JWKSCache(
                url: try #require(harness.provider.endpoints.jwksURI), transport: harness.transport,
                taxonomy: harness.provider.taxonomy, now: now)
            let validator = IDTokenValidator(
                issuer: harness.provider.endpoints.issuer, clientID: OIDCEmulator.defaultClientID, keys: cache, now: now
            )
            for (seconds, kid, fetches) in Self.steps {
                elapsed.withLock { $0 = seconds }
                let error = await #expect(throws: IDTokenError.self) {
                    _ = try await validator.validate(Self.forged(kid: kid), nonce: nil)
                }
                #expect(error?.check == .unknownKey, "at \(seconds) s")
                #expect(await cache.fetchCount == fetches, "at \(seconds) s with \(kid)")
            }
            #expect(harness.emulator.requestCount(path: "/jwks") == 4)
        }
    }

    @Test("a refused refetch says why in the error")
    func refusedRefetchExplains() async throws {
        try await OIDCHarness.with { harness in
            let cache = JWKSCache(
                url: try #require(harness.provider.endpoints.jwksURI), transport: harness.transport,
                taxonomy: harness.provider.taxonomy)
            let validator = IDTokenValidator(
                issuer: harness.provider.endpoints.issuer, clientID: OIDCEmulator.defaultClientID, keys: cache)
            for attempt in 0..<20 {
                let error = await #expect(throws: IDTokenError.self) {
                    _ = try await validator.validate(Self.forged(kid: "forged-\(attempt)"), nonce: nil)
                }
                if attempt > 0 { #expect(error?.detail.contains("not fetched again") == true) }
            }
            // Twenty made-up kids within a moment: the first fetch and one refetch, no more.
            #expect(await cache.fetchCount == 2)
        }
    }
}

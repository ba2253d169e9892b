import Foundation
import Sesame
import SesameOIDCEmulator
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sesame token` processes waiting behind one that renews a login at an issuer that hangs: they
/// wait about one request timeout in all, not one each in turn, and report the renewal's failure.
@Suite("renewal waiters behind a hung OpenID issuer", .serialized)
struct RenewalWaitProcessTests {
    typealias Travel = TimeTravelProcessTests

    @Test(
        "6 processes behind a stopped issuer: done within about one --timeout, all report its failure, the login intact, renewed once it answers"
    )
    func hungIssuer() async throws {
        try await withEmulatorChild(["oidc"]) { banner, emulator in
            let issuer = try #require(
                banner.firstMatch(of: #/Issuer:\s+(http://127\.0\.0\.1:\d+)\n/#).map { String($0.1) })
            let provider = Travel.RotatingProvider(
                kind: .oidc, base: issuer, accessTokenLifetime: 3600,
                refreshTokenLifetime: OIDCEmulator.defaultRefreshTokenLifetime, environment: [:],
                loginArguments: ["--issuer", issuer, "--client-id", OIDCEmulator.defaultClientID])
            let cli = try CLIHarness()
            try await Travel.logIn(cli, to: provider)
            let login = try await Travel.storedLogin(cli)
            try await Travel.advance(
                cli, provider, by: try #require(login.token.expirationDate).timeIntervalSinceNow + 2)
            let aged = try await Travel.storedLogin(cli)
            // The request the first process gives up on is answered once the issuer resumes: it is told
            // to fail that one, since a refresh token rotated there would be lost with the answer
            // nobody reads, and the login with it (reuse detection revokes the family).
            _ = try await Travel.admin(
                provider, .post, "scenarios", ["scenario": .string("server-error"), "count": .number(1)])
            let tokenRequests = try await Travel.stats(provider).requests["/token"] ?? 0
            let timeout = 3.0
            let count = 6

            emulator.terminate(signal: SIGSTOP)
            let outcome: (results: [ProcessResult], wallTime: Duration)
            do {
                outcome = try await Travel.runAtOnce(
                    count, cli, ["token", "oidc", "--timeout", "\(Int(timeout))"], environment: provider.environment)
            } catch {
                emulator.terminate(signal: SIGCONT)
                throw error
            }
            emulator.terminate(signal: SIGCONT)
            let (results, wallTime) = outcome
            print("renewal waiters: \(count) processes behind a stopped issuer in \(wallTime)")

            #expect(results.allSatisfy { $0.status == 75 }, "exit statuses: \(results.map(\.status))")
            #expect(results.allSatisfy { $0.standardOutput.isEmpty })
            // One process met the timeout; the others were told of it instead of meeting it again.
            let shared = results.filter { $0.standardError.contains("Another process's renewal of this login met") }
            #expect(shared.count == count - 1, "\(results.map(\.standardError))")
            let holder = try #require(results.first { !shared.map(\.standardError).contains($0.standardError) })
            let sentence = try #require(holder.standardError.split(separator: ".").first.map(String.init))
            #expect(results.allSatisfy { $0.standardError.contains(sentence) }, "\(results.map(\.standardError))")
            // In turn, each would have waited a timeout of its own: six of them.
            #expect(wallTime < .seconds(timeout * 3), "\(wallTime)")

            // Nothing lost: the login is stored as it was, not marked.
            let after = try await Travel.storedLogin(cli)
            #expect(after.token == aged.token && !after.needsLogin)

            // The issuer answers again: it met one request of the six processes, and the next use renews.
            try await Self.waitFor(provider, tokenRequests: tokenRequests + 1)
            let before = try await Travel.stats(provider)
            let later = try await cli.run("sesame", ["token", "oidc"], environment: provider.environment)
            #expect(later.status == 0, "\(later.standardError)")
            let renewed = try await Travel.storedLogin(cli)
            #expect(renewed.token.tokenString != aged.token.tokenString)
            #expect(later.standardOutput == renewed.token.tokenString + "\n")
            let end = try await Travel.stats(provider)
            #expect(end.grants - before.grants == 1, "\(end)")
            #expect(end.requests["/token"] == tokenRequests + 2, "\(end.requests)")
        }
    }

    /// Waits (ten seconds at most) until the emulator has answered `count` token requests in all.
    static func waitFor(_ provider: Travel.RotatingProvider, tokenRequests count: Int) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while try await Travel.stats(provider).requests["/token"] ?? 0 < count {
            try #require(clock.now < deadline, "the resumed issuer did not answer the abandoned request")
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

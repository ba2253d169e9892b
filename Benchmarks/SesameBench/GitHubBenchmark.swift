import Foundation
import Sesame
import SesameCurl
import SesameEmulator
import SesameGitHub
import SesameGitHubEmulator

/// `sesame-bench github [--json]`: how fast GitHubErrorTaxonomy classifies typical and large
/// answers, and how long paging a 1000-repository list takes over CurlTransport against the
/// local GitHub emulator (10 pages of 100, each followed by its `Link` header).
let githubBenchmark = Benchmark(
    name: "github",
    summary: "GitHubErrorTaxonomy.classify, and Link-header paging against the GitHub emulator"
) { arguments in
    let taxonomy = GitHubErrorTaxonomy(now: { Date(timeIntervalSince1970: 1_999_999_000) })
    let cases: [(name: String, status: Int, headers: HTTPHeaders, body: Data, iterations: Int)] = [
        ("401 Bad credentials", 401, [:], Data(#"{"message":"Bad credentials","status":"401"}"#.utf8), 20_000),
        (
            "403 primary limit", 403, ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "2000000000"],
            Data(#"{"message":"API rate limit exceeded for user ID 1."}"#.utf8), 20_000
        ),
        (
            "403 SSO", 403, ["X-GitHub-SSO": "required; url=https://github.com/orgs/o/sso?authorization_request=A"],
            Data(#"{"message":"Resource protected by organization SAML enforcement."}"#.utf8), 20_000
        ),
        (
            "404 missing scope", 404, ["X-Accepted-OAuth-Scopes": "repo", "X-OAuth-Scopes": "gist, read:org"],
            Data(#"{"message":"Not Found"}"#.utf8), 20_000
        ),
        (
            "422 with 10 errors", 422, [:],
            Data(
                JSONValue.object([
                    "message": .string("Validation Failed"),
                    "errors": .array(
                        Array(
                            repeating: .object([
                                "resource": .string("Issue"), "field": .string("title"),
                                "code": .string("missing_field"),
                            ]), count: 10)),
                ]).jsonText.utf8), 20_000
        ),
        ("HTML 502 page", 502, [:], Data("<html><body>Unicorn!</body></html>".utf8), 20_000),
        (
            "5 MB message", 500, [:], Data(("{\"message\":\"" + String(repeating: "x", count: 5_000_000) + "\"}").utf8),
            5
        ),
    ]
    var results: [[String: JSONValue]] = []
    for item in cases {
        var last: AuthError?
        let elapsed = ContinuousClock().measure {
            for _ in 0..<item.iterations {
                last = taxonomy.classify(status: item.status, headers: item.headers, body: item.body)
            }
        }
        let perCall = elapsed.inSeconds / Double(item.iterations)
        results.append([
            "case": .string(item.name), "secondsPerCall": .number(perCall), "rule": .string(last?.ruleID ?? "-"),
        ])
        if !arguments.contains("--json") {
            print(
                "\(item.name.padding(toLength: 22, withPad: " ", startingAt: 0)) "
                    + "\(String(format: "%10.1f µs", perCall * 1e6))  → \(last?.ruleID ?? "-")")
        }
    }

    let emulator = GitHubEmulator(rateLimit: 1_000_000, repositoryCount: 1000)
    let endpoints = try await emulator.start()
    defer { Task { await emulator.stop() } }
    let github = GitHubProvider(
        host: GitHubHost(hostname: endpoints.hostname, oauthBaseURL: endpoints.baseURL, apiBaseURL: endpoints.apiURL),
        clientID: GitHubEmulator.defaultClientID)
    let client = GitHubClient(
        github: github, transport: CurlTransport(), token: try await emulator.issuePersonalToken(), policy: nil)
    var rounds: [Double] = []
    for _ in 0..<5 {
        var count = 0
        let elapsed = try await ContinuousClock().measure {
            for try await _ in client.items("user/repos", query: [("per_page", "100")]) { count += 1 }
        }
        guard count == 1000 else { throw BenchmarkError("paging found \(count) repositories, not 1000") }
        rounds.append(elapsed.inSeconds)
    }
    let best = rounds.min() ?? 0
    results.append(["case": .string("page 1000 repos (10 pages)"), "seconds": .number(best)])
    if arguments.contains("--json") {
        print(JSONValue.array(results.map { .object($0) }).jsonText)
    } else {
        print(
            "page 1000 repos (10 pages) \(String(format: "%8.1f ms", best * 1e3)) (best of 5, CurlTransport, loopback)")
    }
}

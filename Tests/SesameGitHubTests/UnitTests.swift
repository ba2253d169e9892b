import Foundation
import Sesame
import SesameGitHub
import Testing

@Suite("GitHub's error table, hosts, links and rate limits")
struct GitHubUnitTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var status: Int
        var headers: [(String, String)]
        var body: String
        var rule: String
        var category: ErrorCategory
        var testDescription: String { "\(status) → \(rule)" }
    }

    static let cases: [Case] = [
        Case(
            status: 401, headers: [], body: #"{"message":"Bad credentials"}"#, rule: "bad-credentials",
            category: .authenticationReopenSession),
        Case(
            status: 401, headers: [], body: "<html>nope</html>", rule: "bad-credentials",
            category: .authenticationReopenSession),
        Case(
            status: 403,
            headers: [("X-GitHub-SSO", "required; url=https://github.com/orgs/o/sso?authorization_request=A")],
            body: #"{"message":"Resource protected by organization SAML enforcement."}"#, rule: "sso-required",
            category: .permissions),
        Case(
            status: 403, headers: [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "2000000000")],
            body: #"{"message":"API rate limit exceeded"}"#, rule: "primary-rate-limit", category: .throttling),
        Case(
            status: 429, headers: [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "2000000000")],
            body: "", rule: "primary-rate-limit", category: .throttling),
        Case(
            status: 403, headers: [("retry-after", "60")], body: "{}", rule: "secondary-rate-limit",
            category: .throttling),
        Case(
            status: 403, headers: [("x-ratelimit-remaining", "4000")],
            body: #"{"message":"You have exceeded a secondary rate limit."}"#, rule: "secondary-rate-limit",
            category: .throttling),
        Case(status: 429, headers: [], body: "", rule: "too-many-requests", category: .throttling),
        Case(
            status: 403, headers: [], body: #"{"message":"Resource not accessible by integration"}"#,
            rule: "missing-scope", category: .permissions),
        Case(
            status: 404, headers: [("X-Accepted-OAuth-Scopes", "repo"), ("X-OAuth-Scopes", "gist")],
            body: #"{"message":"Not Found"}"#, rule: "missing-scope", category: .permissions),
        Case(
            status: 404, headers: [("X-Accepted-OAuth-Scopes", "public_repo"), ("X-OAuth-Scopes", "repo")],
            body: #"{"message":"Not Found"}"#, rule: "not-found", category: .invalid),
        Case(status: 404, headers: [], body: #"{"message":"Not Found"}"#, rule: "not-found", category: .invalid),
        Case(
            status: 403, headers: [], body: #"{"message":"Must have admin rights"}"#, rule: "forbidden",
            category: .invalid),
        Case(
            status: 422, headers: [], body: #"{"message":"Validation Failed","errors":["bad"]}"#,
            rule: "validation-failed", category: .badRequest),
        Case(status: 500, headers: [], body: "", rule: "server-error", category: .server),
        Case(status: 503, headers: [], body: "<html>unicorn</html>", rule: "server-error", category: .server),
        Case(
            status: 400, headers: [], body: #"{"message":"Problems parsing JSON"}"#, rule: "bad-request",
            category: .badRequest),
        Case(
            status: 200, headers: [], body: #"{"error":"device_flow_disabled"}"#, rule: "device-flow-disabled",
            category: .invalid),
        Case(status: 418, headers: [], body: "\u{0}\u{1}garbage", rule: "other", category: .providerOther),
    ]

    @Test("each kind of GitHub answer is classified by its row", arguments: cases)
    func row(_ example: Case) {
        let taxonomy = GitHubErrorTaxonomy(now: { Date(timeIntervalSince1970: 1_999_999_900) })
        let error = taxonomy.classify(
            status: example.status, headers: HTTPHeaders(example.headers), body: Data(example.body.utf8))
        #expect(error.ruleID == example.rule)
        #expect(error.category == example.category)
        #expect(error.provider == .github)
        if example.rule == "primary-rate-limit" { #expect(error.retryAfter == .seconds(100)) }
        if example.rule == "secondary-rate-limit" {
            #expect(error.retryAfter == .seconds(60))  // retry-after: 60, or a minute without one
        }
    }

    @Test("every row of GitHubErrors.json is reachable and the table ends with a catch-all")
    func table() {
        let rules = GitHubErrorTaxonomy.table.rules
        #expect(rules.last?.match == ErrorRuleMatch())
        #expect(Set(rules.map(\.id)).count == rules.count)
        let tested = Set(Self.cases.map(\.rule))
        for required in [
            "bad-credentials", "sso-required", "primary-rate-limit", "secondary-rate-limit", "missing-scope",
            "validation-failed", "server-error",
        ] {
            #expect(tested.contains(required), "\(required) has an example")
        }
    }

    @Test(
        "device-flow errors are classified by their OAuth code",
        arguments: [
            ("access_denied", "access-denied", ErrorCategory.userCancelled),
            ("expired_token", "device-code-expired", .retry),
            ("device_flow_disabled", "device-flow-disabled", .invalid),
            ("incorrect_client_credentials", "client-misconfigured", .invalid),
            ("incorrect_device_code", "incorrect-device-code", .invalid),
            ("unsupported_grant_type", "client-misconfigured", .invalid),
            ("bad_refresh_token", "bad-refresh-token", .authenticationReopenSession),
            ("something_new", "other", .providerOther),
        ])
    func loginErrors(code: String, rule: String, category: ErrorCategory) {
        let error = GitHubErrorTaxonomy().classifyLoginError(OAuthErrorResponse(error: code))
        #expect(error.ruleID == rule)
        #expect(error.category == category)
    }

    @Test("--hostname names github.com or an Enterprise Server; anything else is refused with what to give")
    func hosts() throws {
        #expect(try GitHubHost(hostname: "github.com") == .github)
        #expect(try GitHubHost(hostname: "API.GitHub.com") == .github)
        #expect(try GitHubHost(hostname: "github.com:443") == .github)
        let enterprise = try GitHubHost(hostname: "GitHub.Example.com")
        #expect(enterprise.hostname == "github.example.com")
        #expect(enterprise.apiURL("user").absoluteString == "https://github.example.com/api/v3/user")
        #expect(enterprise.deviceCodeURL.absoluteString == "https://github.example.com/login/device/code")
        #expect(GitHubHost.github.apiURL("/user/repos").absoluteString == "https://api.github.com/user/repos")
        #expect(GitHubHost.github.accessTokenURL.absoluteString == "https://github.com/login/oauth/access_token")
        for bad in ["", "https://github.com", "github.com/foo", "git hub.com", "-x.com"] {
            let error = try #require(throws: AuthError.self) { try GitHubHost(hostname: bad) }
            #expect(error.message.contains("no https://"))
        }
        #expect(enterprise.isAPIURL(URL(string: "https://github.example.com/api/v3/user/repos?page=2")!))
        #expect(!enterprise.isAPIURL(URL(string: "https://github.example.com/login/oauth")!))
        #expect(!enterprise.isAPIURL(URL(string: "http://github.example.com/api/v3/user")!))
    }

    @Test("a client id is checked, and a wrong one refused saying where to find it")
    func clientIDs() throws {
        #expect(try GitHubProvider.checkedClientID(" Iv1.0123456789abcdef ") == "Iv1.0123456789abcdef")
        #expect(try GitHubProvider.checkedClientID("Ov23liAbCdEfGh012345") == "Ov23liAbCdEfGh012345")
        for bad in ["", "Iv1 0123", "https://github.com", String(repeating: "a", count: 101)] {
            let error = try #require(throws: AuthError.self) { try GitHubProvider.checkedClientID(bad) }
            #expect(error.message.contains("Client ID"))
        }
    }

    @Test("logins on different hosts are stored apart")
    func hostsApart() throws {
        let dotCom = GitHubProvider(clientID: "a")
        let enterprise = GitHubProvider(host: try GitHubHost(hostname: "ghe.example.com"), clientID: "a")
        #expect(dotCom.credentialAppID == "github.com")
        #expect(enterprise.credentialAppID == "ghe.example.com")
        #expect(dotCom.id == enterprise.id)
    }

    @Test("Link headers are read by relation")
    func links() {
        let links = GitHubLinks.parse(
            #"<https://api.github.com/user/repos?page=2>; rel="next", <https://api.github.com/user/repos?page=5>; rel="last""#
        )
        #expect(links["next"]?.absoluteString == "https://api.github.com/user/repos?page=2")
        #expect(links["last"]?.absoluteString == "https://api.github.com/user/repos?page=5")
        #expect(GitHubLinks.parse("").isEmpty)
        #expect(GitHubLinks.parse("garbage; rel=next").isEmpty)
    }

    @Test("the governor waits nothing with plenty left, spreads the rest near the end, and waits for the reset at zero")
    func governor() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let governor = GitHubRateLimitGovernor(reserve: 0.1, maxDelay: .seconds(30), now: { now })
        func record(remaining: Int, resetIn: Int) {
            governor.record([
                "x-ratelimit-limit": "5000", "x-ratelimit-remaining": String(remaining),
                "x-ratelimit-reset": String(1_000_000 + resetIn),
            ])
        }
        #expect(governor.delay() == .zero)
        record(remaining: 4000, resetIn: 600)
        #expect(governor.delay() == .zero)
        record(remaining: 99, resetIn: 600)
        #expect(governor.delay() == .seconds(6))
        record(remaining: 0, resetIn: 600)
        #expect(governor.delay() == .seconds(600))
        record(remaining: 0, resetIn: -5)
        #expect(governor.delay() == .zero)
    }

    @Test(
        "a reset time at either end of Int's range waits at most maxWait, and none when past",
        arguments: [(Int.max, true), (Int.max / 1000, true), (Int.min, false), (-1, false)])
    func governorExtremeReset(reset: Int, inFuture: Bool) {
        let governor = GitHubRateLimitGovernor(
            maxDelay: .seconds(30), maxWait: .seconds(900), now: { Date(timeIntervalSince1970: 1_000_000) })
        governor.record([
            "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(reset),
        ])
        governor.record([
            "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "10", "x-ratelimit-reset": String(reset),
            "x-ratelimit-resource": "search",
        ])
        #expect(governor.delay() == (inFuture ? .seconds(900) : .zero))
        #expect(governor.delay(resource: "search") == (inFuture ? .seconds(30) : .zero))
    }

    @Test(
        "a primary rate limit whose reset is absurdly far off is classified with the default wait",
        arguments: ["9223372036854775807", "99999999999999"])
    func primaryRateLimitExtremeReset(reset: String) {
        let taxonomy = GitHubErrorTaxonomy(now: { Date(timeIntervalSince1970: 1_700_000_000) })
        let error = taxonomy.classify(
            status: 403, headers: ["x-ratelimit-remaining": "0", "x-ratelimit-reset": reset],
            body: Data(#"{"message":"API rate limit exceeded"}"#.utf8))
        #expect(error.category == .throttling)
        #expect(error.retryAfter == GitHubErrorTaxonomy.secondaryLimitDefaultWait)
        #expect(error.message.components(separatedBy: "is used up").count == 2, "said once: \(error.message)")
    }

    @Test(
        "a primary rate limit that has already reset waits one second, even at Int.min",
        arguments: ["1699999000", "-9223372036854775808"])
    func primaryRateLimitPastReset(reset: String) {
        let taxonomy = GitHubErrorTaxonomy(now: { Date(timeIntervalSince1970: 1_700_000_000) })
        let error = taxonomy.classify(
            status: 403, headers: ["x-ratelimit-remaining": "0", "x-ratelimit-reset": reset],
            body: Data(#"{"message":"API rate limit exceeded"}"#.utf8))
        #expect(error.retryAfter == .seconds(1))
        #expect(!error.message.contains("resets in"), "a past reset is not 'in 1 s': \(error.message)")
        #expect(error.message.contains("has passed"), "\(error.message)")
        #expect(error.message.components(separatedBy: "is used up").count == 2, "said once: \(error.message)")
    }

    @Test("a primary rate limit that resets soon waits until then")
    func primaryRateLimitSoon() {
        let taxonomy = GitHubErrorTaxonomy(now: { Date(timeIntervalSince1970: 1_700_000_000) })
        let error = taxonomy.classify(
            status: 403, headers: ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000090"],
            body: Data(#"{"message":"API rate limit exceeded"}"#.utf8))
        #expect(error.retryAfter == .seconds(90))
        #expect(error.message.contains("It resets in 90 s"), "\(error.message)")
        #expect(error.message.components(separatedBy: "is used up").count == 2, "said once: \(error.message)")
    }

    @Test("the SSO header's URL is read, and only an https one")
    func ssoHeader() {
        #expect(
            GitHubErrorTaxonomy.ssoURL("required; url=https://github.com/orgs/x/sso?authorization_request=abc")
                == "https://github.com/orgs/x/sso?authorization_request=abc")
        #expect(GitHubErrorTaxonomy.ssoURL("required; url=javascript:alert(1)") == nil)
        #expect(GitHubErrorTaxonomy.ssoURL("partial-results; organizations=21955855") == nil)
    }

    @Test("a client's token never shows in a dump of it")
    func clientRedacted() {
        let client = GitHubClient(github: GitHubProvider(clientID: "x"), transport: NoNetwork(), token: "gho_dumpMe42")
        var text = ""
        dump(client, to: &text)
        #expect(!text.isEmpty)
        #expect(!text.contains("gho_dumpMe42"))
        #expect(!String(reflecting: client).contains("gho_dumpMe42"))
    }

    @Test("a client secret never shows in the provider's description")
    func secretRedacted() {
        let provider = GitHubProvider(clientID: "Iv1.x", clientSecret: ClientSecret("s3cr3t-value"))
        #expect(!String(reflecting: provider).contains("s3cr3t-value"))
        #expect(!"\(provider)".contains("s3cr3t-value"))
    }
}

/// A transport for values that are never sent.
private struct NoNetwork: HTTPTransport {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        throw TransportError(kind: .invalidRequest, message: "no network in this test")
    }
}

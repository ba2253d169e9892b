import Foundation
import Sesame
import SesameFacebook
import SesameGitHub
import SesameOIDC

/// `JSONValue(parsing:)`: any bytes are parsed or refused, and what is parsed reads back the
/// same from its own JSON text.
enum JSONFuzz {
    static let target = FuzzTarget(name: "json", summary: "JSONValue(parsing:), and its text read back") { data in
        guard let value = JSONValue(parsing: data) else { return }
        let text = value.jsonText
        require(JSONValue(parsing: Data(text.utf8)) == value, "the JSON text of a parsed value reads back differently")
        _ = value.lenientInt
    }
}

/// Touches every text an `AuthError` offers, as an app showing it would.
func show(_ error: AuthError) {
    _ = error.description
    _ = error.userMessage
    _ = error.userTitle
    _ = error.body?.jsonText
    _ = error.retryAfter
    _ = error.recoveryTactic.description
}

/// Facebook's Graph error classification: `FacebookErrorTaxonomy` on an answer (status, headers,
/// body), the usage headers through `GraphUsageGovernor`, and the body as a login error.
enum GraphErrorFuzz {
    static let target = FuzzTarget(
        name: "graph-errors", summary: "FacebookErrorTaxonomy.classify, GraphErrorBody, GraphUsage headers"
    ) { data in
        let input = ResponseInput(data)
        let headers = HTTPHeaders(input.headers)
        let taxonomy = FacebookErrorTaxonomy()
        show(taxonomy.classify(status: input.status, headers: headers, body: input.body))
        _ = GraphErrorBody(input.body)
        if let oauth = OAuthErrorResponse(json: JSONValue(parsing: input.body)) {
            show(taxonomy.classifyLoginError(oauth))
        }
        let governor = GraphUsageGovernor()
        governor.record(headers)
        _ = governor.delay
        if let usage = governor.lastUsage { _ = GraphUsage(json: usage.json) }
        // Usage as the JSON it is kept in (GraphUsage.json), read back from any body.
        if let json = JSONValue(parsing: input.body) { _ = GraphUsage(json: json)?.estimatedTimeToRegainAccess }
        // Usage numbers straight from the input's first bytes.
        var numbers = RawNumbers(data)
        let (calls, regain, retry) = (numbers.double(), numbers.double(), numbers.int())
        let usage =
            #"{"1":[{"type":"ads","call_count":\#(calls),"estimated_time_to_regain_access":\#(regain)}]}"#
        let usageHeaders: HTTPHeaders = [
            "X-Business-Use-Case-Usage": usage, "X-App-Usage": #"{"call_count":\#(calls)}"#, "Retry-After": "\(retry)",
        ]
        show(taxonomy.classify(status: 400, headers: usageHeaders, body: Data(#"{"error":{"code":80000}}"#.utf8)))
        governor.record(usageHeaders)
        _ = governor.delay
        let kept =
            #"{"business_use_cases":[{"id":"1","call_count":\#(calls),"estimated_time_to_regain_access":\#(regain)}]}"#
        if let json = JSONValue(parsing: Data(kept.utf8)) { _ = GraphUsage(json: json)?.estimatedTimeToRegainAccess }
    }
}

/// OAuth 2.0 error classification: the OpenID Connect and GitHub taxonomies on an answer, the
/// body as a token or login error, `WWW-Authenticate` challenges, and GitHub's rate-limit headers.
enum OAuthErrorFuzz {
    static let target = FuzzTarget(
        name: "oauth-errors",
        summary: "OIDCErrorTaxonomy and GitHubErrorTaxonomy.classify, OAuth error bodies, rate-limit headers"
    ) { data in
        let input = ResponseInput(data)
        let headers = HTTPHeaders(input.headers)
        let json = JSONValue(parsing: input.body)
        let oidc = OIDCErrorTaxonomy.openID()
        let github = GitHubErrorTaxonomy()
        show(oidc.classify(status: input.status, headers: headers, body: input.body))
        show(github.classify(status: input.status, headers: headers, body: input.body))
        _ = GitHubErrorTaxonomy.errorIdentifier(status: input.status, headers: headers, json: json)
        if let oauth = OAuthErrorResponse(json: json) {
            show(oidc.classifyLoginError(oauth))
            show(github.classifyLoginError(oauth))
            _ = oauth.summary
        }
        _ = OAuthTokenResponse(json: json)
        for value in headers.values(for: "WWW-Authenticate") { _ = BearerChallenge(header: value) }
        for value in headers.values(for: "X-GitHub-SSO") { _ = GitHubErrorTaxonomy.ssoURL(value) }
        let governor = GitHubRateLimitGovernor()
        governor.record(headers)
        _ = governor.delay(resource: headers["x-ratelimit-resource"] ?? "core")
        _ = governor.lastLimit(resource: headers["x-ratelimit-resource"] ?? "core")?.description
        // Rate-limit numbers straight from the input's first bytes.
        var numbers = RawNumbers(data)
        let rate: HTTPHeaders = [
            "x-ratelimit-limit": "\(numbers.int())", "x-ratelimit-remaining": "\(numbers.int())",
            "x-ratelimit-reset": "\(numbers.int())", "Retry-After": "\(numbers.int())",
        ]
        let limited = Data(#"{"message":"API rate limit exceeded"}"#.utf8)
        show(github.classify(status: 403, headers: rate, body: limited))
        show(oidc.classify(status: 429, headers: rate, body: limited))
        let rateGovernor = GitHubRateLimitGovernor()
        rateGovernor.record(rate)
        _ = rateGovernor.delay()
        _ = rateGovernor.lastLimit()?.description
    }
}

/// JWT and JWKS parsing: the first line is a compact token, the rest a JWKS document; every key
/// of the set is read and checked against the token's signature.
enum JWTFuzz {
    static let target = FuzzTarget(
        name: "jwt", summary: "JSONWebToken(compact:), JWKS keys, signature checks"
    ) { data in
        let text = String(decoding: data, as: UTF8.self)
        let newline = text.firstIndex(of: "\n") ?? text.endIndex
        let compact = String(text[..<newline])
        let jwks = Data(text[newline...].utf8)
        let token = try? JSONWebToken(compact: compact)
        if let token {
            _ = token.description
            require(!compact.isEmpty && !token.description.contains(compact), "a JWT's description shows the token")
        }
        for entry in JSONValue(parsing: jwks)?["keys"]?.arrayValue ?? [] {
            guard let key = JWKSCache.key(from: entry) else { continue }
            guard let token, let name = token.algorithm, let algorithm = SignatureAlgorithm(rawValue: name) else {
                continue
            }
            _ = key.verify(token.signature, of: token.signingInput, algorithm: algorithm)
        }
    }
}

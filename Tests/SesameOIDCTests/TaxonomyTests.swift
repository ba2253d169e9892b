import Foundation
import Sesame
import SesameOIDC
import Testing

@Suite("The OAuth error table")
struct OIDCTaxonomyTests {
    struct Row: Sendable, CustomStringConvertible {
        var status: Int
        var body: String
        var headers: [(String, String)] = []
        var rule: String
        var category: ErrorCategory
        var retryAfter: Duration? = nil
        var description: String { "\(status) \(body.prefix(40)) → \(rule)" }
    }

    static func oauth(_ code: String) -> String { #"{"error":"\#(code)","error_description":"d"}"# }

    static let rows: [Row] = [
        Row(status: 400, body: oauth("invalid_grant"), rule: "invalid-grant", category: .authenticationReopenSession),
        Row(status: 400, body: oauth("access_denied"), rule: "access-denied", category: .userCancelled),
        Row(status: 400, body: oauth("invalid_scope"), rule: "scope", category: .permissions),
        Row(
            status: 403, body: "",
            headers: [("WWW-Authenticate", #"Bearer error="insufficient_scope", scope="email""#)],
            rule: "scope", category: .permissions),
        Row(
            status: 401, body: "",
            headers: [("WWW-Authenticate", #"Bearer realm="x", error="invalid_token", error_description="expired""#)],
            rule: "invalid-token", category: .authenticationReopenSession),
        // Several challenges in one field (RFC 9110 §11.6.1): the Bearer one is found after Basic.
        Row(
            status: 401, body: "",
            headers: [("WWW-Authenticate", #"Basic realm="api", charset="UTF-8", Bearer error="invalid_token""#)],
            rule: "invalid-token", category: .authenticationReopenSession),
        Row(status: 400, body: oauth("slow_down"), rule: "slow-down", category: .throttling),
        Row(status: 400, body: oauth("authorization_pending"), rule: "authorization-pending", category: .retry),
        Row(status: 400, body: oauth("expired_token"), rule: "expired-token", category: .retry),
        Row(
            status: 503, body: oauth("temporarily_unavailable"), headers: [("Retry-After", "12")],
            rule: "temporarily-unavailable", category: .retry, retryAfter: .seconds(12)),
        Row(status: 500, body: oauth("server_error"), rule: "server-error", category: .server),
        Row(status: 502, body: "<html>Bad gateway</html>", rule: "server-5xx", category: .server),
        Row(status: 500, body: #"{"error":"#, rule: "server-5xx", category: .server),
        Row(status: 401, body: oauth("invalid_client"), rule: "client-refused", category: .invalid),
        Row(status: 400, body: oauth("unauthorized_client"), rule: "client-misconfigured", category: .invalid),
        Row(status: 400, body: oauth("invalid_request"), rule: "invalid-request", category: .badRequest),
        Row(
            status: 429, body: "", headers: [("Retry-After", "30")], rule: "too-many-requests", category: .throttling,
            retryAfter: .seconds(30)),
        Row(status: 401, body: "", rule: "unauthorized", category: .authenticationReopenSession),
        Row(status: 403, body: "{}", rule: "forbidden", category: .permissions),
        Row(status: 404, body: "not found", rule: "bad-request", category: .badRequest),
        Row(status: 400, body: oauth("some_future_error"), rule: "bad-request", category: .badRequest),
        Row(status: 302, body: "", rule: "other", category: .providerOther),
    ]

    @Test("each row of the OpenID table (the base rows) classifies its error", arguments: rows)
    func row(_ row: Row) {
        let error = OIDCErrorTaxonomy.openID().classify(
            status: row.status, headers: HTTPHeaders(row.headers), body: Data(row.body.utf8))
        #expect(error.ruleID == row.rule)
        #expect(error.category == row.category)
        #expect(error.httpStatus == row.status)
        #expect(error.retryAfter == row.retryAfter)
        #expect(error.provider == .oidc)
    }

    @Test("every rule in the table is reached by a row of this test")
    func everyRuleCovered() {
        let covered = Set(Self.rows.map(\.rule))
        #expect(Set(OIDCErrorTaxonomy.openIDTable.rules.map(\.id)).subtracting(covered).isEmpty)
    }

    @Test("invalid_grant keeps the stored credential: it does not close and clear the session")
    func invalidGrantKeepsCredential() {
        let error = OIDCErrorTaxonomy.openID().classify(
            status: 400, headers: [:], body: Data(Self.oauth("invalid_grant").utf8))
        #expect(!error.closesSession)
        #expect(error.recoveryTactic == .reauthenticate)
    }

    @Test("a Retry-After date is read as the wait until then")
    func retryAfterDate() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let taxonomy = OIDCErrorTaxonomy.openID(now: { now })
        let error = taxonomy.classify(
            status: 429, headers: ["Retry-After": "Tue, 14 Nov 2023 22:15:20 GMT"], body: Data())
        #expect(error.retryAfter == .seconds(120))
    }

    @Test("a login redirect's access_denied is userCancelled, other errors are failed logins")
    func loginErrors() {
        let taxonomy = OIDCErrorTaxonomy.openID()
        #expect(taxonomy.classifyLoginError(OAuthErrorResponse(error: "access_denied")).category == .userCancelled)
        let other = taxonomy.classifyLoginError(OAuthErrorResponse(error: "server_error"))
        #expect(other.category == .server)
        #expect(other.loginFailedReason == .providerError)
    }
}

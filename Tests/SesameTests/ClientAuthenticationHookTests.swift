import Foundation
import Sesame
import Testing

/// The one client-authentication hook every token-endpoint request goes through (issue 49, item 1).
@Suite("Client authentication hook")
struct ClientAuthenticationHookTests {
    static let token = URL(string: "https://auth.example.com/token")!
    static let secret = ClientSecret("s3cret+/:")

    struct Case: Sendable, CustomTestStringConvertible {
        var authentication: ClientAuthentication
        var form: [String]
        var authorization: String?
        var testDescription: String { authentication.description }
    }

    static let cases: [Case] = [
        Case(authentication: .none, form: ["grant_type=refresh_token", "client_id=app id"], authorization: nil),
        Case(
            authentication: .clientSecretPost(secret),
            form: ["grant_type=refresh_token", "client_id=app id", "client_secret=s3cret+/:"], authorization: nil),
        // RFC 6749 §2.3.1: both halves form-encoded before Base64.
        Case(
            authentication: .clientSecretBasic(secret), form: ["grant_type=refresh_token"],
            authorization: "Basic " + Data("app%20id:s3cret%2B%2F%3A".utf8).base64EncodedString()),
    ]

    @Test("each method adds what it needs, and replaces any client credential the form carried", arguments: cases)
    func methods(_ example: Case) throws {
        let request = try example.authentication.formRequest(
            Self.token, [("grant_type", "refresh_token"), ("client_id", "stale"), ("client_secret", "stale")],
            clientID: "app id")
        let form = FormEncoding.decode(request.body ?? Data()).map { "\($0.0)=\($0.1)" }
        #expect(form == example.form)
        #expect(request.headers["Authorization"] == example.authorization)
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
    }

    @Test("a method from outside the core sees the client id and the token endpoint as audience")
    func customMethod() throws {
        let assertion = ClientAuthentication(method: ClientAuthenticationMethod(rawValue: "private_key_jwt")) {
            request in
            request.form.append(("client_id", request.clientID))
            request.form.append(("client_assertion", "signed-for-" + request.tokenEndpoint.absoluteString))
        }
        let revoke = URL(string: "https://auth.example.com/revoke")!
        let request = try assertion.formRequest(revoke, [("token", "t")], clientID: "app", tokenEndpoint: Self.token)
        let form = FormEncoding.decode(request.body ?? Data())
        #expect(request.url == revoke)
        #expect(form.contains { $0 == ("client_assertion", "signed-for-https://auth.example.com/token") })
        #expect(assertion.method.rawValue == "private_key_jwt")
    }

    @Test("the description names the method, never the secret")
    func redacted() {
        for authentication in [ClientAuthentication.clientSecretBasic(Self.secret), .clientSecretPost(Self.secret)] {
            for text in [String(describing: authentication), String(reflecting: authentication)] {
                #expect(!text.contains(Self.secret.value))
            }
        }
    }

    @Test("a description's method applies only when the client has a secret")
    func fromDescription() {
        let description = OAuth2Description(
            id: "example", endpoints: OAuth2Endpoints(token: Self.token), clientAuthenticationMethod: .clientSecretPost)
        #expect(description.clientAuthentication(secret: nil).method == .none)
        #expect(description.clientAuthentication(secret: Self.secret).method == .clientSecretPost)
    }

    @Test(
        "an error code is read where the provider puts it",
        arguments: [
            (OAuth2ErrorFormat.rfc6749, #"{"error": "invalid_grant"}"#, "invalid_grant"),
            (
                OAuth2ErrorFormat(codePath: ["error", ".tag"]), #"{"error": {".tag": "expired_access_token"}}"#,
                "expired_access_token"
            ),
            (OAuth2ErrorFormat(codePath: ["error", ".tag"]), #"{"error": "invalid_grant"}"#, "invalid_grant"),
        ])
    func errorCode(_ format: OAuth2ErrorFormat, body: String, code: String) {
        #expect(format.code(in: JSONValue(parsing: Data(body.utf8))) == code)
    }

    @Test("a flag in a successful answer can make it a failure (Slack's ok: false)")
    func successFlag() {
        let slack = OAuth2ErrorFormat(codePath: ["error"], successFlag: ["ok"])
        #expect(slack.isFailure(JSONValue(parsing: Data(#"{"ok": false, "error": "invalid_auth"}"#.utf8))))
        #expect(!slack.isFailure(JSONValue(parsing: Data(#"{"ok": true}"#.utf8))))
        #expect(!OAuth2ErrorFormat.rfc6749.isFailure(JSONValue(parsing: Data(#"{"ok": false}"#.utf8))))
    }
}

import Foundation
import Sesame
import SesameFacebook
import Testing

@Suite("Facebook's notions on the core's values")
struct FacebookCoreExtensionsTests {
    @Test("a token stored before provider extras existed keeps its Facebook data-access expiry")
    func oldRecordDataAccess() throws {
        let old = """
            {"appID":"1234","dataAccessExpirationDate":926692800.5,"permissions":{"declined":[],"granted":[]},\
            "provider":"facebook","refreshDate":821692800.125,"tokenString":"EAAB-old-secret"}
            """
        let token = try JSONDecoder().decode(AccessToken.self, from: Data(old.utf8))
        #expect(token.dataAccessExpirationDate == Date(timeIntervalSince1970: 1_905_000_000.5))
        #expect(token.isDataAccessExpired(at: Date(timeIntervalSince1970: 1_905_000_001)))
        #expect(!token.isDataAccessExpired(at: Date(timeIntervalSince1970: 1_904_999_999)))
    }

    @Test("the data-access expiry is kept in the token's extras and survives encoding")
    func dataAccessRoundTrip() throws {
        var token = AccessToken(tokenString: "t", provider: .facebook, appID: "1")
        #expect(token.dataAccessExpirationDate == nil)
        #expect(!token.isDataAccessExpired())
        token.dataAccessExpirationDate = Date(timeIntervalSince1970: 1_905_000_000.5)
        #expect(token.providerExtras["data_access_expires_at"] == .number(1_905_000_000.5))
        let decoded = try JSONDecoder().decode(AccessToken.self, from: JSONEncoder().encode(token))
        #expect(decoded.dataAccessExpirationDate == token.dataAccessExpirationDate)
        token.dataAccessExpirationDate = nil
        #expect(token.providerExtras.isEmpty)
    }

    @Test("the default audience travels in the login request's options")
    func audienceOption() {
        var request = LoginRequest(provider: .facebook, appID: "1")
        #expect(request.defaultAudience == DefaultAudience.none)
        request.defaultAudience = .onlyMe
        #expect(request.options == LoginRequest.Options(defaultAudience: .onlyMe))
        #expect(request.options.defaultAudience.facebookValue == "only_me")
    }

    @Test("a Facebook login redirect's reason and code are read from the OAuth error's parameters")
    func redirectReasonAndCode() throws {
        let url = URL(
            string: "http://127.0.0.1:5000/callback?error=access_denied&error_code=200&error_reason=user_denied&state=s"
        )!
        guard case .error(let error) = try OAuth.parseRedirect(url, expectedState: "s") else {
            Issue.record("expected an error outcome")
            return
        }
        #expect(error.errorReason == "user_denied")
        #expect(error.errorCode == 200)
        #expect(error == .facebook(error: "access_denied", errorReason: "user_denied", errorCode: 200))
    }

    @Test("publish is a Facebook permission kind")
    func publishKind() {
        #expect(Permission.publish("publish_actions").kind == .publish)
        #expect(Permission.Kind.publish.rawValue == "publish")
    }
}

import Foundation
import Testing

@testable import Sesame

@Suite("Login values")
struct LoginValueTests {
    @Test("a device authorization's description hides the device code")
    func redactsDeviceCode() {
        let authorization = DeviceAuthorization(
            deviceCode: "secret-device-code", userCode: "ABCD-EFGH",
            verificationURL: URL(string: "https://x.test/device")!, expiresIn: .seconds(420))
        let text = String(describing: authorization)
        #expect(!text.contains("secret-device-code"))
        #expect(text.contains("ABCD-EFGH"))
    }

    @Test("a token answer's scope decides what was granted and declined")
    func tokenFromAnswer() throws {
        let answer = try #require(
            OAuthTokenResponse(
                json: JSONValue(parsing: Data(#"{"access_token":"t","expires_in":60,"scope":"email"}"#.utf8))))
        let request = LoginRequest(provider: "x", appID: "a", permissions: [.read("email"), .read("user_posts")])
        let now = Date(timeIntervalSince1970: 1000)
        let token = AccessToken(answer, for: request, now: now)
        #expect(token.permissions.granted == ["email"])
        #expect(token.permissions.declined == ["user_posts"])
        #expect(token.expirationDate == Date(timeIntervalSince1970: 1060))
    }

    @Test("a token answer without scope grants what was asked, plus what a re-request already had")
    func tokenWithoutScope() throws {
        let answer = try #require(OAuthTokenResponse(json: JSONValue(parsing: Data(#"{"access_token":"t"}"#.utf8))))
        let current = AccessToken(
            tokenString: "old", provider: "x", appID: "a", userID: "42", permissions: PermissionSet(granted: ["email"]))
        let request = LoginRequest(
            provider: "x", appID: "a", permissions: [Permission("publish_actions", kind: .init(rawValue: "publish"))],
            isRerequest: true,
            currentToken: current)
        let token = AccessToken(answer, for: request)
        #expect(token.permissions.granted == ["email", "publish_actions"])
        #expect(token.userID == "42")
        #expect(token.expirationDate == nil)
    }

    @Test("the RFC 8628 start answer is read, with Google's verification_url and a default interval")
    func readsDeviceAuthorization() throws {
        let json = JSONValue(
            parsing: Data(
                #"{"device_code":"d","user_code":"U","verification_url":"https://g.test/device","expires_in":"1800"}"#
                    .utf8))
        let authorization = try RFC8628DeviceDialect.readAuthorization(
            json, deviceCodeField: "device_code", provider: nil)
        #expect(authorization.verificationURL.absoluteString == "https://g.test/device")
        #expect(authorization.expiresIn == .seconds(1800))
        #expect(authorization.interval == .seconds(5))
        #expect(throws: AuthError.self) {
            try RFC8628DeviceDialect.readAuthorization(
                JSONValue(parsing: Data(#"{"user_code":"U"}"#.utf8)), deviceCodeField: "device_code", provider: nil)
        }
    }
}

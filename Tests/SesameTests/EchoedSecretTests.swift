import Foundation
import Sesame
import SesameTesting
import Testing

/// A provider that puts the tokens Sesame just sent into its answer (issue 40, item 2).
@Suite("secrets a provider echoes back never reach a message")
struct EchoedSecretTests {
    enum Echo: String, CaseIterable, Sendable {
        case refreshTokenInMessage = "the refresh token in error_description"
        case accessTokenInMessage = "the access token in error_description"
        case refreshTokenInBody = "the refresh token in the body"
        case refusedWithRotation = "a refused answer that rotated the refresh token"
    }

    static let key = CredentialKey(provider: "example", appID: "app-1", account: "default")

    @Test("a renewal error never repeats the access or refresh token sent", arguments: Echo.allCases)
    func echoed(_ echo: Echo) async throws {
        let access = "access-secret-0123456789"
        let refresh = "refresh-secret-0123456789"
        let rotated = "rotated-secret-0123456789"
        let now = Date()
        let token = AccessToken(
            tokenString: access, provider: "example", appID: "app-1", userID: "u",
            expirationDate: now.addingTimeInterval(-10), refreshDate: now.addingTimeInterval(-3600),
            refreshToken: refresh, refreshTokenExpirationDate: now.addingTimeInterval(86_400))
        let store = InMemoryCredentialStore()
        try await store.save(StoredCredential(key: Self.key, token: token, savedAt: now))
        let renewer = TokenRenewer.refreshToken { sent in
            let echoed =
                "\(sent.refreshToken ?? "") \(sent.tokenString)" + (echo == .refusedWithRotation ? " \(rotated)" : "")
            let error = AuthError(
                category: echo == .refusedWithRotation ? .server : .invalid,
                message: "invalid_request: \(echo == .accessTokenInMessage ? sent.tokenString : echoed)",
                userMessage: "bad token \(echoed)", body: .object(["error_description": .string(echoed)]),
                provider: "example")
            if echo == .refusedWithRotation {
                var kept = sent
                kept.refreshToken = rotated
                throw RenewalKeepingRotation(kept: kept, error: error)
            }
            throw error
        }
        let session = Session(
            provider: "example", appID: "app-1", store: store, refreshLocking: .none, renewer: renewer)
        let error = await #expect(throws: AuthError.self) {
            _ = try await session.open(allowLoginUI: false)
            _ = try await session.validToken()
        }
        let text =
            "\(String(describing: error)) \(error?.message ?? "") \(error?.userMessage ?? "") "
            + "\(error?.body?.jsonText ?? "")"
        for secret in [access, refresh, rotated] {
            #expect(!text.contains(secret), "\(secret) was in: \(text)")
        }
    }
}

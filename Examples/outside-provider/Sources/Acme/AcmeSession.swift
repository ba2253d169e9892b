import Foundation
import Sesame

/// One account's Acme login: the core `Session` (which owns the token's whole lifecycle), the
/// refresh grant as its `TokenRenewer`, and the calls an app makes.
///
/// ```swift
/// let session = AcmeSession(provider: acme, transport: transport, store: store,
///     loginUI: AcmeSession.deviceLogin(provider: acme, transport: transport, presenter: presenter))
/// try await session.open(scopes: ["profile"], allowLoginUI: true)
/// let me = try await session.me()
/// ```
///
/// The login is stored under provider `acme`, the client id as the app id, and `account`. An
/// expired access token whose refresh token works opens the session without UI (it is refreshed
/// first, once for every caller and, with a lock directory, every process); the rotated refresh
/// token is saved before it is used.
public struct AcmeSession: ProviderSession {
    /// The server and app.
    public let provider: AcmeProvider
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// The core session.
    public let session: Session
    /// How the person logs in, when a login is allowed.
    public let loginUI: (any LoginUI)?

    /// Creates a session; nothing is read or written until it is used.
    ///
    /// - Parameters:
    ///   - provider: the server and app.
    ///   - transport: what sends the requests.
    ///   - store: where the login is kept.
    ///   - account: the account name the login is kept under.
    ///   - loginUI: how the person logs in; `nil`: the session opens only from the store.
    ///   - refreshLocking: the cross-process refresh lock; none by default.
    public init(
        provider: AcmeProvider, transport: any HTTPTransport, store: any CredentialStore, account: String = "default",
        loginUI: (any LoginUI)? = nil, refreshLocking: RefreshLocking = .none
    ) {
        self.provider = provider
        self.transport = transport
        self.loginUI = loginUI
        session = Session(
            provider: .acme, appID: provider.configuration.clientID, account: account, store: store,
            refreshLocking: refreshLocking,
            renewer: .refreshToken(maximumLeeway: 60) { [provider, transport] in
                try await provider.refresh($0, transport: transport)
            }, now: provider.now)
    }

    /// A device login (RFC 8628) shown by `presenter`.
    public static func deviceLogin(
        provider: AcmeProvider, transport: any HTTPTransport, presenter: any DeviceCodePresenter
    ) -> AcmeLogin {
        AcmeLogin(
            flow: DeviceLoginFlow(dialect: provider.deviceDialect, presenter: presenter, transport: transport),
            provider: provider, transport: transport)
    }

    /// A browser login with PKCE and a loopback redirect (RFC 8252).
    public static func browserLogin(
        provider: AcmeProvider, transport: any HTTPTransport, receiver: any RedirectReceiver, opener: any BrowserOpener
    ) -> AcmeLogin {
        AcmeLogin(
            flow: BrowserLoginFlow(
                dialect: provider.browserDialect, receiver: receiver, opener: opener, transport: transport),
            provider: provider, transport: transport)
    }

    /// Who the login belongs to. A token the server refuses is refreshed once, when it can be,
    /// and the call made again.
    ///
    /// - Throws: `AuthError` when there is no usable login or the server refuses it.
    public func me() async throws -> AcmeUser {
        let token = try await validToken()
        do {
            return try await provider.me(token: token.tokenString, transport: transport)
        } catch let error as AuthError where error.category == .authenticationReopenSession {
            guard token.refreshToken != nil else { throw error }
            let renewed = try await session.renewRefused(token)
            return try await provider.me(token: renewed.tokenString, transport: transport)
        }
    }

    /// Logs out: with `revoke`, first revokes the refresh and access tokens at the server; then
    /// closes the session and deletes the stored login. A revocation that fails still deletes
    /// the login here, and its error is thrown afterwards.
    ///
    /// - Throws: `CredentialStoreError` when the login cannot be removed; then the revocation's
    ///   `AuthError`.
    public func logOut(revoke: Bool) async throws {
        var failure: (any Error)?
        if revoke, let token = await session.token {
            do {
                if let refresh = token.refreshToken {
                    try await provider.revoke(refresh, hint: "refresh_token", transport: transport)
                }
                try await provider.revoke(token.tokenString, hint: "access_token", transport: transport)
            } catch {
                failure = error
            }
        }
        try await session.closeAndClearTokenInformation()
        if let failure { throw failure }
    }
}

/// A login (browser or device) whose token then learns who it belongs to from `/api/me`: Acme's
/// token answer names nobody, and the core keeps logins apart by user id.
public struct AcmeLogin: LoginUI {
    /// The login itself.
    public var flow: any LoginUI
    /// The server and app.
    public var provider: AcmeProvider
    /// What sends the `/api/me` request.
    public var transport: any HTTPTransport

    /// Creates the login.
    public init(flow: any LoginUI, provider: AcmeProvider, transport: any HTTPTransport) {
        self.flow = flow
        self.provider = provider
        self.transport = transport
    }

    /// - Throws: the flow's `AuthError`; `AuthError` when `/api/me` refuses the new token.
    public func logIn(_ request: LoginRequest) async throws -> AccessToken { try await logInIdentified(request).token }

    /// Runs the login and says who it is: the token (its user id set) and the person.
    ///
    /// - Throws: the flow's `AuthError`; `AuthError` when `/api/me` refuses the new token.
    public func logInIdentified(_ request: LoginRequest) async throws -> (token: AccessToken, user: AcmeUser) {
        var token = try await flow.logIn(request)
        let user = try await provider.me(token: token.tokenString, transport: transport)
        token.userID = user.id
        return (token, user)
    }
}

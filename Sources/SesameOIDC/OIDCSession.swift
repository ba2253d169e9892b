import Foundation
import Sesame

/// One account's session with an OpenID provider: login, refresh with rotation, userinfo,
/// logout with revocation, on top of the core `Session` state machine.
///
/// ```swift
/// let session = OIDCSession(provider: provider, transport: transport, store: store,
///     loginUI: OIDCBrowserLogin(oidc: provider, receiver: LoopbackRedirectReceiver(),
///                               opener: SystemBrowserOpener(), transport: transport))
/// try await session.open(allowLoginUI: true)
/// let claims = try await session.userInfo()
/// ```
///
/// Refresh: the new token, with the rotated refresh token, replaces the stored one in one save
/// before the session uses it. A refresh refused with `invalid_grant` keeps the stored
/// credential, marks it `needsLogin` so that `sesame status` can show it, and closes the
/// session; the next ``open(scopes:allowLoginUI:)`` logs in again.
///
/// The refresh protocol is the core `Session`'s (`Session.freshToken(leeway:refresh:)`); this
/// type supplies only the refresh token grant. It is single-flight twice over: concurrent
/// calls in this process share one refresh, and with ``Configuration/refreshLocking`` set to a
/// lock file the session reads the store again after taking the lock: when another process
/// has already refreshed, its token is used, and the refresh token in memory (used up by that
/// rotation) is never sent.
///
/// Creating a session has no side effects (no lock file unless the ``Configuration`` asks).
public final class OIDCSession: Sendable {
    /// The provider.
    public let provider: OIDCProvider
    /// The state machine and the token.
    public let session: Session
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in.
    public let loginUI: (any LoginUI)?
    /// Refresh and locking settings.
    public let configuration: Configuration

    /// The tunable parts of a session.
    public struct Configuration: Sendable {
        /// How refreshes are kept apart from other processes using the same store:
        /// `RefreshLocking.none` by default; desktop apps pass a lock file per credential
        /// (`RefreshLocking.directory(RefreshLock.defaultDirectory())`).
        public var refreshLocking: RefreshLocking
        /// A token that expires within this long is refreshed before use: one minute by default.
        public var refreshLeeway: Duration

        /// Creates a configuration; see each property for its default.
        public init(refreshLocking: RefreshLocking = .none, refreshLeeway: Duration = .seconds(60)) {
            self.refreshLocking = refreshLocking
            self.refreshLeeway = refreshLeeway
        }
    }

    /// Creates a session. Nothing is written or shown until the session is used.
    ///
    /// - Parameters:
    ///   - provider: the issuer and client.
    ///   - transport: what sends requests (`CurlTransport` on the desktop).
    ///   - store: where the token is kept (the keyring on the desktop).
    ///   - account: the name the token is stored under.
    ///   - loginUI: how the person logs in; without one the session opens only from the store.
    ///   - configuration: refresh and locking settings (``Configuration``).
    public init(
        provider: OIDCProvider, transport: any HTTPTransport, store: any CredentialStore, account: String = "default",
        loginUI: (any LoginUI)? = nil, configuration: Configuration = Configuration()
    ) {
        self.provider = provider
        self.transport = transport
        self.loginUI = loginUI
        self.configuration = configuration
        self.session = Session(
            provider: provider.id, appID: provider.configuration.clientID, account: account, store: store,
            refreshLocking: configuration.refreshLocking, now: provider.now)
    }

    /// Where the token is kept.
    public var key: CredentialKey { session.key }
    /// The current state.
    public var state: SessionState { get async { await session.state } }
    /// The current token, if any.
    public var token: AccessToken? { get async { await session.token } }

    /// Opens the session: from a usable stored token without UI, or by a login when allowed.
    /// A stored credential marked `needsLogin` is not used.
    @discardableResult
    /// - Throws: `AuthError` for a login or refresh that failed; `CredentialStoreError` when the
    ///   store cannot be read or written.
    public func open(scopes: [String] = [], allowLoginUI: Bool) async throws -> SessionState {
        try await session.open(
            permissions: scopes.map { Permission.read($0) }, allowLoginUI: allowLoginUI, loginUI: loginUI)
    }

    /// Closes the session and keeps the token.
    public func close() async { await session.close() }

    /// An access token that is valid for at least its margin (``TokenExpiry/margin(for:maximum:)``:
    /// a quarter of its lifetime, at most ``Configuration/refreshLeeway``), refreshed first when
    /// needed; concurrent callers share one refresh. A token that cannot be refreshed is returned
    /// while it is still valid at all; ``TokenExpiry/warning(for:now:maximum:)`` says what to tell
    /// the person.
    ///
    /// - Throws: `AuthError` when there is no usable token or its refresh failed;
    ///   `CredentialStoreError` when the store cannot be read or written.
    public func validToken() async throws -> AccessToken {
        let current = await session.token
        if let current, current.refreshToken == nil, await session.state.isOpen,
            !current.isExpired(at: provider.now())
        {
            return current
        }
        let maximum = Double(configuration.refreshLeeway.components.seconds)
        let margin = current.map { TokenExpiry.margin(for: $0, maximum: maximum) } ?? 0
        return try await refreshing {
            try await $0.freshToken(leeway: .milliseconds(Int64(margin * 1000))) { [self] in
                try await refreshRequest($0)
            }
        }
    }

    /// Refreshes the token now, unless another process refreshed it while this one waited for
    /// the lock (a token with no expiry date is returned as it is).
    @discardableResult
    /// - Throws: `AuthError` when the issuer refuses the refresh; `CredentialStoreError` when the
    ///   store cannot be read or written.
    public func refresh() async throws -> AccessToken {
        let before = await session.token
        return try await refreshing {
            // Due unless it is no longer the token this call set out to replace.
            try await $0.renewToken(isDue: { $0 == before && $0.expirationDate != nil }) { [self] in
                try await refreshRequest($0)
            }.token
        }
    }

    /// A refused refresh leaves the session closed (the credential stays, marked `needsLogin`).
    private func refreshing(_ body: (Session) async throws -> AccessToken) async throws -> AccessToken {
        do {
            return try await body(session)
        } catch let error as AuthError where error.category == .authenticationReopenSession {
            await session.close()
            throw error
        }
    }

    /// The refresh token grant (RFC 6749 §6).
    private func refreshRequest(_ current: AccessToken) async throws -> AccessToken {
        guard let refreshToken = current.refreshToken else {
            throw AuthError(
                category: .authenticationReopenSession,
                message:
                    "The token of '\(provider.id)' expired and there is no refresh token to renew it. Log in again.",
                recoveryTactic: .reauthenticate, closesSession: false, provider: provider.id)
        }
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if !current.permissions.granted.isEmpty {
            form.append(("scope", current.permissions.granted.sorted().joined(separator: " ")))
        }
        let response = try await send(provider.formRequest(provider.endpoints.tokenEndpoint, form))
        guard response.isSuccess else {
            let error = provider.taxonomy.classify(response)
            if error.category == .authenticationReopenSession { await markNeedsLogin(refreshToken: refreshToken) }
            throw error
        }
        let request = LoginRequest(
            provider: provider.id, appID: provider.configuration.clientID,
            permissions: current.permissions.granted.sorted().map { Permission.read($0) })
        return try await provider.acceptToken(
            response, for: request, nonce: nil, requireIDToken: false, previous: current)
    }

    /// Keeps the stored credential but marks it as needing a login, unless another process has
    /// already replaced it with a newer one.
    private func markNeedsLogin(refreshToken: String) async {
        guard var stored = try? await session.store.load(session.key), stored.token.refreshToken == refreshToken,
            !stored.needsLogin
        else { return }
        stored.needsLogin = true
        try? await session.store.save(stored)
    }

    /// The person's claims from the userinfo endpoint. A refused token is refreshed once and
    /// the call made again.
    ///
    /// - Throws: `AuthError` when there is no usable token or the userinfo endpoint refuses it.
    public func userInfo() async throws -> JSONValue {
        guard let endpoint = provider.endpoints.userinfoEndpoint else {
            throw OIDCConfigurationError.unsupported("userinfo", endpoint: "userinfo_endpoint", provider: provider.id)
        }
        var token = try await validToken()
        for attempt in 0..<2 {
            let response = try await send(
                HTTPRequest(
                    method: .get, url: endpoint,
                    headers: ["Authorization": "Bearer \(token.tokenString)", "Accept": "application/json"]))
            if response.isSuccess {
                guard let json = response.json, json.objectValue != nil else {
                    throw AuthError(
                        category: .server, message: "The userinfo answer of '\(provider.id)' is not a JSON object.",
                        httpStatus: response.status, provider: provider.id)
                }
                if let subject = json["sub"]?.stringValue, let expected = token.userID, subject != expected {
                    throw AuthError(
                        category: .invalid,
                        message: "The userinfo answer of '\(provider.id)' names another subject than the ID token; "
                            + "it was refused (OpenID Connect Core §5.3.2).", provider: provider.id)
                }
                return json
            }
            let error = provider.taxonomy.classify(response)
            guard attempt == 0, error.category == .authenticationReopenSession, token.refreshToken != nil else {
                throw error
            }
            token = try await refresh()
        }
        throw AuthError(category: .providerOther, message: "unreachable", provider: provider.id)
    }

    /// Logs out: with `revoke`, first revokes the refresh and access tokens (RFC 7009) when the
    /// provider has a revocation endpoint; then closes the session and deletes the stored token.
    ///
    /// When revocation fails (no network, say), the token is deleted here all the same and the
    /// error is thrown, so the app can tell the person the grant may still be active.
    ///
    /// - Throws: `AuthError` when the revocation failed (the token is cleared here all the same);
    ///   `CredentialStoreError` when it cannot be removed from the store.
    public func logout(revoke: Bool = true) async throws {
        let token = await session.token
        var failure: (any Error)?
        if revoke, let token, let endpoint = provider.endpoints.revocationEndpoint {
            do {
                if let refresh = token.refreshToken {
                    try await revokeToken(refresh, hint: "refresh_token", endpoint: endpoint)
                }
                try await revokeToken(token.tokenString, hint: "access_token", endpoint: endpoint)
            } catch {
                failure = error
            }
        }
        try await session.closeAndClearTokenInformation()
        if let failure { throw failure }
    }

    private func revokeToken(_ value: String, hint: String, endpoint: URL) async throws {
        let response = try await send(provider.formRequest(endpoint, [("token", value), ("token_type_hint", hint)]))
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        guard response.isSuccess else { throw provider.taxonomy.classify(response) }
    }

    private func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await LoginHTTP.send(request, through: transport, taxonomy: provider.taxonomy)
    }
}

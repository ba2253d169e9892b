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
/// Refresh is single-flight twice over: concurrent calls in this process share one refresh,
/// and a lock file beside the per-user state (`Sesame.RefreshLock`) keeps two processes from
/// refreshing the same token at once. After taking the lock the session reads the store
/// again: when another process has already refreshed, its token is used, and the refresh
/// token in memory (used up by that rotation) is never sent.
public final class OIDCSession: Sendable {
    /// The provider.
    public let provider: OIDCProvider
    /// The state machine and the token.
    public let session: Session
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How the person logs in.
    public let loginUI: (any LoginUI)?
    /// A token that expires within this many seconds is refreshed before use.
    public let refreshLeeway: TimeInterval
    /// The cross-process refresh lock; `nil` disables it (one process only).
    public let refreshLock: RefreshLock?

    /// Creates a session.
    ///
    /// - Parameters:
    ///   - provider: the issuer and client.
    ///   - transport: what sends requests (`CurlTransport` on the desktop).
    ///   - store: where the token is kept (the keyring on the desktop).
    ///   - account: the name the token is stored under.
    ///   - loginUI: how the person logs in; without one the session opens only from the store.
    ///   - refreshLeeway: a token that expires within this many seconds is refreshed before use.
    ///   - refreshLock: the cross-process lock; by default a file in
    ///     `RefreshLock.defaultDirectory(environment:)`; `.some(nil)` turns it off.
    public init(
        provider: OIDCProvider, transport: any HTTPTransport, store: any CredentialStore, account: String = "default",
        loginUI: (any LoginUI)? = nil, refreshLeeway: TimeInterval = 60, refreshLock: RefreshLock?? = nil
    ) {
        self.provider = provider
        self.transport = transport
        self.loginUI = loginUI
        self.refreshLeeway = refreshLeeway
        let session = Session(
            provider: provider.id, appID: provider.configuration.clientID, account: account, store: store,
            now: provider.now)
        self.session = session
        self.refreshLock = refreshLock ?? RefreshLock(key: session.key)
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
    public func open(scopes: [String] = [], allowLoginUI: Bool) async throws -> SessionState {
        try await session.open(
            permissions: scopes.map { Permission.read($0) }, allowLoginUI: allowLoginUI, loginUI: loginUI)
    }

    /// Closes the session and keeps the token.
    public func close() async { await session.close() }

    /// An access token that is valid for at least its margin (``TokenExpiry/margin(for:maximum:)``,
    /// at most ``refreshLeeway`` seconds), refreshed first when needed; concurrent callers share
    /// one refresh. A token that cannot be refreshed is returned while it is still valid at all;
    /// ``TokenExpiry/warning(for:now:maximum:)`` says what to tell the person.
    public func validToken() async throws -> AccessToken {
        let current = await session.token
        if let current, current.refreshToken == nil, await session.state.isOpen,
            !current.isExpired(at: provider.now())
        {
            return current
        }
        return try await refreshing(leeway: current.map { TokenExpiry.margin(for: $0, maximum: refreshLeeway) } ?? 0)
    }

    /// Refreshes the token now (a token with no expiry date is returned as it is).
    @discardableResult
    public func refresh() async throws -> AccessToken {
        try await refreshing(leeway: .infinity)
    }

    private func refreshing(leeway: TimeInterval) async throws -> AccessToken {
        do {
            return try await session.freshToken(leeway: leeway) { [self] current in
                try await self.refreshGrant(current)
            }
        } catch let error as AuthError where error.category == .authenticationReopenSession {
            await session.close()
            throw error
        }
    }

    /// Refreshes `current` under the cross-process lock, unless another process already did.
    private func refreshGrant(_ current: AccessToken) async throws -> AccessToken {
        guard let refreshLock else { return try await refreshStored(current) }
        return try await refreshLock.withLock { try await self.refreshStored(current) }
    }

    /// Reads the store again, then refreshes what needs it and saves the result: run while
    /// holding the lock, so the read and the save see no other process's refresh in between.
    private func refreshStored(_ current: AccessToken) async throws -> AccessToken {
        var base = current
        if let stored = try await session.store.load(session.key), stored.token.userID == current.userID {
            // Another process found the refresh token refused while this one waited: the
            // credential stays for the person to see, and only a new login helps.
            if stored.needsLogin {
                throw AuthError(
                    category: .authenticationReopenSession,
                    message: "Another program found the refresh token of '\(provider.id)' refused; log in again.",
                    recoveryTactic: .reauthenticate, closesSession: false, provider: provider.id)
            }
            // Another process refreshed (and rotated the refresh token) while this one waited.
            if stored.token.tokenString != current.tokenString || stored.token.refreshToken != current.refreshToken {
                let margin = TokenExpiry.margin(for: stored.token, maximum: refreshLeeway)
                if !stored.token.isExpired(at: provider.now(), leeway: margin) { return stored.token }
                base = stored.token
            }
        }
        let refreshed = try await refreshRequest(base)
        // Saved before it is used, and before the lock is released.
        try await session.store.save(StoredCredential(key: session.key, token: refreshed, savedAt: provider.now()))
        return refreshed
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

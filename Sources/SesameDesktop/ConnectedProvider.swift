import Foundation
import Sesame

/// A provider made ready for one command: its app, its sessions, its status checks.
public protocol ConnectedProvider: Sendable {
    /// The provider id logins are stored under.
    var providerID: ProviderID { get }
    /// The app (client) id logins are stored under.
    var appID: String { get }
    /// Where its logins are valid, for a provider with many issuers (OpenID); `nil` (the
    /// default) when the app id says it.
    var issuer: String? { get }
    /// Who answers, for messages: "Facebook", "the Facebook emulator", "work (https://id.example.com)".
    var label: String { get }
    /// Provider-specific facts for `sesame status` (OpenID: the issuer), no secrets.
    var details: [String: String] { get }
    /// Whether this runs against a built-in emulator.
    var isEmulated: Bool { get }

    /// Runs a login for `account` and saves it in `store`; returns the token and who it is.
    ///
    /// - Throws: the login's `AuthError`; ``DesktopError`` for options this provider does not
    ///   take.
    func logIn(_ options: LoginOptions, account: String, store: any CredentialStore) async throws -> LoginResult

    /// The session of `account`, to open from the store without UI.
    func session(account: String, store: any CredentialStore) -> any AccountSession

    /// Checks a stored login with the provider (who it is, whether it still works), for
    /// `sesame status`, after the core judged it usable (``AccountCheck/judging(_:verify:)``).
    /// Never changes what is stored.
    func check(_ credential: StoredCredential) async -> AccountCheck

    /// Stops what the connection started (a built-in emulator, saving its state).
    func shutdown() async
}

extension ConnectedProvider {
    public var issuer: String? { nil }
    /// The key of `account`'s login with this provider.
    public func key(account: String) -> CredentialKey {
        CredentialKey(provider: providerID, issuer: issuer, appID: appID, account: account)
    }
    public var details: [String: String] { [:] }
    public var isEmulated: Bool { false }
    public func shutdown() async {}

    /// Runs the login `options` ask for — `existingToken` with the token's text, `browser`, or
    /// `device` (also the default) — and saves its token for `account` in `store`. A flow the
    /// provider lacks, or cannot run as configured, throws what to do instead.
    ///
    /// - Throws: the login's error, or ``DesktopError`` for a flow that cannot run or a token that
    ///   cannot be saved.
    public func logIn(
        _ options: LoginOptions, account: String, store: any CredentialStore,
        existingToken: (String) throws -> any LoginUI, browser: (_ openBrowser: Bool) throws -> any LoginUI,
        device: () throws -> any LoginUI
    ) async throws -> AccessToken {
        let ui: any LoginUI
        switch options.flow {
        case .existingToken(let text): ui = try existingToken(text)
        case .browser(let openBrowser): ui = try browser(openBrowser)
        case .automatic, .device: ui = try device()
        }
        return try await logIn(with: ui, scopes: options.scopes, account: account, store: store)
    }

    /// Runs `ui` asking for `scopes` and saves the token it obtained for `account` in `store`
    /// (``DesktopLogin/save(_:account:issuer:store:label:)``): the end of every plug-in's
    /// ``logIn(_:account:store:)``.
    ///
    /// - Throws: the login's error, or ``DesktopError`` (73) when the token cannot be saved.
    public func logIn(
        with ui: any LoginUI, scopes: [String], account: String, store: any CredentialStore
    ) async throws -> AccessToken {
        let token = try await ui.logIn(
            LoginRequest(provider: providerID, appID: appID, permissions: scopes.map(Permission.read)))
        try await DesktopLogin.save(token, account: account, issuer: issuer, store: store, label: label)
        return token
    }
}

/// What a login is asked to do, as the command line gives it.
public struct LoginOptions: Sendable, Hashable {
    /// Which way to log in.
    public enum Flow: Sendable, Hashable {
        /// The provider's default (device login where offered).
        case automatic
        /// Device login, asked for explicitly.
        case device
        /// Browser login with a loopback redirect.
        case browser(openBrowser: Bool)
        /// A token the person already has.
        case existingToken(String)
    }

    /// The flow.
    public var flow: Flow
    /// The scopes or permissions to ask for; empty for the provider's default.
    public var scopes: [String]

    /// Creates options.
    public init(flow: Flow = .automatic, scopes: [String] = []) {
        self.flow = flow
        self.scopes = scopes
    }
}

/// What a login obtained.
public struct LoginResult: Sendable {
    /// The token, already saved.
    public var token: AccessToken
    /// The person's name, when the provider said it.
    public var userName: String?

    /// Creates a result.
    public init(token: AccessToken, userName: String?) {
        self.token = token
        self.userName = userName
    }
}

/// What checking a stored login with the provider found.
public struct AccountCheck: Sendable, Hashable {
    /// Whether the login still works.
    public enum Validity: String, Sendable, Hashable, Codable {
        /// The provider accepted it just now.
        case valid
        /// It no longer works: a new login is needed.
        case invalid
        /// It could not be checked (no network, a timeout): see ``AccountCheck/problem``.
        case unverified
        /// It was judged from what is stored alone (expiry, a refresh token), without asking the
        /// provider.
        case notChecked = "not_checked"
    }

    /// The verdict.
    public var validity: Validity
    /// The person's name, when known.
    public var userName: String?
    /// What is wrong, in one sentence, when something is.
    public var problem: String?
    /// The last rate-limit usage seen, as the provider reports it.
    public var usage: JSONValue?
    /// Whether the provider refused the stored access token just now: `sesame status` then
    /// records it on the login (``AccountSession/recordRefusal(of:)``), and its next use renews it.
    public var tokenRefused: Bool
    /// For an unverified check that failed here, not at the provider (a state file that could
    /// not be written: ``DesktopError/Status/cannotCreate``), the exit status that calls for.
    public var status: DesktopError.Status?

    /// Creates a check.
    public init(
        validity: Validity, userName: String? = nil, problem: String? = nil, usage: JSONValue? = nil,
        tokenRefused: Bool = false
    ) {
        self.validity = validity
        self.userName = userName
        self.problem = problem
        self.usage = usage
        self.tokenRefused = tokenRefused
    }
}

extension AccountCheck {
    /// What `status` says of a stored login: the core's decision (``AccountSession/condition(of:)``)
    /// first — a login that needs a new login, or whose expired token is renewed when next used,
    /// is not sent to the provider —, then `verify`, the provider's check online.
    public static func judging(
        _ condition: LoginCondition, verify: () async -> AccountCheck
    ) async -> AccountCheck {
        switch condition {
        case .needsLogin(let reason):
            return AccountCheck(validity: .invalid, problem: reason.description)
        case .renewable(expired: true):
            return AccountCheck(
                validity: .notChecked, problem: "The access token has expired; it is renewed when next used.")
        case .valid, .renewable(expired: false):
            return await verify()
        }
    }

    /// The check `body` makes; an `AuthError` it throws becomes what `refused` makes of it,
    /// any other error (no network, a timeout) an unverified check that names it. For a plug-in's
    /// ``ConnectedProvider/check(_:)``.
    public static func checking(
        _ body: () async throws -> AccountCheck, refused: (AuthError) -> AccountCheck
    ) async -> AccountCheck {
        do {
            return try await body()
        } catch let error as AuthError {
            return refused(error)
        } catch {
            var check = AccountCheck(validity: .unverified, problem: "\(error.sentence)")
            check.status = (error as? DesktopError)?.status
            return check
        }
    }

    /// What a provider's refusal of `token` (the error of a status check) says of it: a refused
    /// access token is invalid, or unverified while its refresh token may still renew it (`refuser`
    /// names who refused it: "The issuer"), and recorded either way (``tokenRefused``); any other
    /// error leaves it unverified. `usage` is the rate-limit usage the refusal reported, if any.
    /// For ``checking(_:refused:)``.
    public static func refusal(
        _ error: AuthError, of token: AccessToken, by refuser: String, usage: JSONValue? = nil
    ) -> AccountCheck {
        guard error.category == .authenticationReopenSession else {
            return AccountCheck(validity: .unverified, problem: error.userMessage ?? error.message, usage: usage)
        }
        guard token.refreshToken == nil else {
            return AccountCheck(
                validity: .unverified,
                problem: "\(refuser) refused the access token; the next use tries the refresh token.", usage: usage,
                tokenRefused: true)
        }
        return AccountCheck(
            validity: .invalid, problem: error.userMessage ?? error.message, usage: usage, tokenRefused: true)
    }
}

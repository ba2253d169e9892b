import Foundation

/// What kind of failure an ``AuthError`` is, and so how an app should recover.
///
/// These are the Facebook SDK's `FBErrorCategory` values made provider-neutral. Their
/// spelling is stable: it is what `sesame explain-error --json` prints.
///
/// ``ErrorCategory``, ``RecoveryTactic`` and ``LoginFailedReason`` are extensible: each is a
/// struct with a raw string and static members, not an enum, so a category added later does
/// not break an app's `switch`. Switch over the ones you handle and keep a `default`:
///
/// ```swift
/// switch error.recoveryTactic {
/// case .reauthenticate: showLogin(saying: error.messageForPerson)
/// case .retry, .retryAfterBackoff: scheduleRetry()
/// default: show(error.messageForPerson)
/// }
/// ```
public struct ErrorCategory: RawRepresentable, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The category's stable name, for example `throttling`.
    public var rawValue: String
    /// Creates a category from its name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A request the app should not have made as it did; fix the request.
    public static let invalid = ErrorCategory(rawValue: "invalid")
    /// A passing failure; the same call may succeed if made again.
    public static let retry = ErrorCategory(rawValue: "retry")
    /// The session is no longer valid; the person must log in again.
    public static let authenticationReopenSession = ErrorCategory(rawValue: "authenticationReopenSession")
    /// A permission the call needs is missing; ask for it again.
    public static let permissions = ErrorCategory(rawValue: "permissions")
    /// The provider failed.
    public static let server = ErrorCategory(rawValue: "server")
    /// The app, user or page is over a rate limit; back off, then retry.
    public static let throttling = ErrorCategory(rawValue: "throttling")
    /// The person cancelled or declined. Usually nothing to show.
    public static let userCancelled = ErrorCategory(rawValue: "userCancelled")
    /// A provider error that fits no other category.
    public static let providerOther = ErrorCategory(rawValue: "providerOther")
    /// The provider rejected the request as malformed.
    public static let badRequest = ErrorCategory(rawValue: "badRequest")

    /// The categories this version of Sesame defines, in a stable order. A later version may
    /// add more.
    public static let allCases: [ErrorCategory] = [
        .invalid, .retry, .authenticationReopenSession, .permissions, .server, .throttling, .userCancelled,
        .providerOther, .badRequest,
    ]

    public var description: String { rawValue }
}

/// What Sesame recommends doing about an ``AuthError``.
///
/// Extensible like ``ErrorCategory``: a struct with static members, so switch with a
/// `default`.
public struct RecoveryTactic: RawRepresentable, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The tactic's stable name, for example `retryAfterBackoff`.
    public var rawValue: String
    /// Creates a tactic from its name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Nothing to do (for example, the person cancelled). Write it `RecoveryTactic.none`
    /// where an optional is expected, so it is not read as `nil`.
    public static let none = RecoveryTactic(rawValue: "none")
    /// Close the session and ask the person to log in again.
    public static let reauthenticate = RecoveryTactic(rawValue: "reauthenticate")
    /// Ask the person again for the permission the call needs, then replay the call.
    public static let requestPermissions = RecoveryTactic(rawValue: "requestPermissions")
    /// Make the same call again.
    public static let retry = RecoveryTactic(rawValue: "retry")
    /// Wait (honouring any server hint), then make the same call again.
    public static let retryAfterBackoff = RecoveryTactic(rawValue: "retryAfterBackoff")
    /// Show the person the error's message (``AuthError/messageForPerson``).
    public static let showMessage = RecoveryTactic(rawValue: "showMessage")

    /// The tactics this version of Sesame defines, in a stable order. A later version may add
    /// more.
    public static let allCases: [RecoveryTactic] = [
        .none, .reauthenticate, .requestPermissions, .retry, .retryAfterBackoff, .showMessage,
    ]

    public var description: String { rawValue }
}

/// Why a login failed, when it did (the SDK's `FBErrorLoginFailedReason`).
///
/// Extensible like ``ErrorCategory``: a struct with static members, so switch with a
/// `default`.
public struct LoginFailedReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The person cancelled the login.
    public static let userCancelled = LoginFailedReason(rawValue: "userCancelled")
    /// The person declined the app's request (`error_reason=user_denied`).
    public static let userDenied = LoginFailedReason(rawValue: "userDenied")
    /// The redirect's `state` was missing or did not match: a possible cross-site request forgery.
    public static let stateMismatch = LoginFailedReason(rawValue: "stateMismatch")
    /// The redirect's `iss` was not the configured issuer, or was missing where the provider
    /// promises it (RFC 9207): a possible mix-up attack.
    public static let issuerMismatch = LoginFailedReason(rawValue: "issuerMismatch")
    /// No answer came back from the browser or device in time.
    public static let timedOut = LoginFailedReason(rawValue: "timedOut")
    /// The device code expired before the person approved it.
    public static let codeExpired = LoginFailedReason(rawValue: "codeExpired")
    /// The authorization code could not be exchanged for a token.
    public static let codeExchangeFailed = LoginFailedReason(rawValue: "codeExchangeFailed")
    /// The provider answered the login with an error.
    public static let providerError = LoginFailedReason(rawValue: "providerError")
    /// The redirect could not be read.
    public static let malformedRedirect = LoginFailedReason(rawValue: "malformedRedirect")
    /// A token supplied by the person was rejected by the provider.
    public static let invalidSuppliedToken = LoginFailedReason(rawValue: "invalidSuppliedToken")
    /// This machine's clock and the provider's disagree (a token issued in the future): the
    /// clock is to be set right, nothing is wrong with the login.
    public static let clockSkew = LoginFailedReason(rawValue: "clockSkew")
    /// The app gave the login nothing that shows the person its code or address.
    public static let noPresenter = LoginFailedReason(rawValue: "noPresenter")

    public var description: String { rawValue }
}

/// Facts about an ``AuthError`` that only its provider, or the error table that classified it,
/// knows, as a value of a type the provider's module defines: Facebook's rate-limit usage,
/// GitHub's single sign-on address, the ID-token check that failed.
///
/// Read them by type, not by string key:
///
/// ```swift
/// if let sso = error.details(as: GitHubErrorDetails.self)?.ssoURL { open(sso) }
/// ```
public protocol ProviderErrorDetails: Sendable {
    /// A few words for ``AuthError/description``, or `nil`.
    var summary: String? { get }

    /// The details as JSON, for logs and for tools that print every error alike.
    var json: JSONValue { get }

    /// A copy with `secrets` replaced by ``Redaction/placeholder`` in every text it holds, for
    /// ``AuthError/redacting(_:)``.
    func redacting(_ secrets: [String]) -> Self
}

extension ProviderErrorDetails {
    /// A few words for ``AuthError/description`` (Facebook's: `trace EJplcsCHuLu`), when the
    /// details have something a support request needs; `nil` by default.
    public var summary: String? { nil }
}

extension AuthError {
    /// The first of ``details`` that is a `Details`, if any.
    public func details<Details: ProviderErrorDetails>(as type: Details.Type = Details.self) -> Details? {
        details.lazy.compactMap { $0 as? Details }.first
    }

    /// Adds `newDetails` to ``details``, in place of any details of the same type.
    public mutating func attach<Details: ProviderErrorDetails>(_ newDetails: Details) {
        details.removeAll { $0 is Details }
        details.append(newDetails)
    }
}

/// The RFC 9207 issuer check a login redirect failed: attached to
/// ``AuthError/issuerMismatch(expected:received:provider:)``.
public struct IssuerCheckFailure: ProviderErrorDetails, Hashable {
    /// The configured issuer.
    public var expectedIssuer: String
    /// The redirect's `iss`, or `nil` when it had none.
    public var receivedIssuer: String?

    /// Creates the details.
    public init(expectedIssuer: String, receivedIssuer: String?) {
        self.expectedIssuer = expectedIssuer
        self.receivedIssuer = receivedIssuer
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = ["check": .string("issuer"), "expectedIssuer": .string(expectedIssuer)]
        if let receivedIssuer { object["receivedIssuer"] = .string(receivedIssuer) }
        return .object(object)
    }

    public func redacting(_ secrets: [String]) -> IssuerCheckFailure {
        IssuerCheckFailure(
            expectedIssuer: Redaction.redacting(secrets, in: expectedIssuer),
            receivedIssuer: receivedIssuer.map { Redaction.redacting(secrets, in: $0) })
    }
}

/// Every failure Sesame reports: classified, with what to tell the person and what to do.
///
/// This is the Facebook SDK's `NSError(FBError)`, with one rule for every error
/// (<doc:HandlingErrors>). ``category`` says what happened; its ``recoveryTactic`` is always one
/// the category allows (``ErrorCategory/allows(_:shouldNotifyUser:)``).
///
/// Its fields come in four groups:
/// - what to do: ``category``, ``recoveryTactic``, ``closesSession``, ``loginFailedReason``;
/// - the texts: ``message`` for developers; ``shouldNotifyUser``, ``userTitle``,
///   ``userMessage`` and ``contextualMessage`` for the person;
/// - the provider's answer: ``provider``, ``httpStatus``, ``code``, ``subcode``, ``retryAfter``
///   and the parsed ``body`` (the raw data, for contextual messages);
/// - what only the provider knows, as typed values its module defines: ``details``, read with
///   ``details(as:)``; and the ``underlyingError``.
///
/// `AuthError` is a struct so providers can add codes and details without breaking anyone.
/// Its ``description`` never contains a token or other secret.
public struct AuthError: Error, Sendable, CustomStringConvertible, LocalizedError {
    // MARK: What to do

    /// The classification.
    public var category: ErrorCategory
    /// What Sesame recommends doing.
    public var recoveryTactic: RecoveryTactic
    /// Whether this error ends the session (and clears its stored token). Usually true for
    /// ``ErrorCategory/authenticationReopenSession``; a taxonomy can keep a session open (the
    /// SDK did for a checkpointed account).
    public var closesSession: Bool
    /// Why a login failed, for login errors.
    public var loginFailedReason: LoginFailedReason?

    // MARK: The texts

    /// A message for developers: what happened, to what. Never shown as a user message.
    public var message: String
    /// Whether the app should show ``userMessage`` to the person (an out-of-band action is
    /// needed, or the provider asked for its message to be shown).
    public var shouldNotifyUser: Bool
    /// A title for an alert, when the provider or taxonomy has one.
    public var userTitle: String?
    /// The message the provider (or the SDK's table) has for the person, when there is one: shown
    /// when ``shouldNotifyUser``.
    public var userMessage: String?
    /// A sentence for the person that every error carries, chosen from the error's code and
    /// subcode (Facebook's 458: "The app was removed. Please log in again.") or, failing that,
    /// from its category (``ErrorCategory/contextualMessage``): shown when ``shouldNotifyUser``
    /// is false.
    public var contextualMessage: String

    // MARK: The provider's answer

    /// The provider that produced the error.
    public var provider: ProviderID?
    /// The HTTP status of the failed response, when there was one.
    public var httpStatus: Int?
    /// The provider's error code (Facebook's `code`), when it sent one.
    public var code: Int?
    /// The provider's error subcode (Facebook's `error_subcode`), when it sent one.
    public var subcode: Int?
    /// How long the provider asked the app to wait before trying again, when it said.
    public var retryAfter: Duration?
    /// The parsed response body, when it was JSON.
    public var body: JSONValue?

    // MARK: What only the provider knows

    /// Typed facts that only the provider, or the table that classified the error, knows:
    /// read one with ``details(as:)``.
    public var details: [any ProviderErrorDetails]
    /// The error underneath, such as a ``TransportError``.
    public var underlyingError: (any Error & Sendable)?

    /// Creates an error. Most code gets errors from an ``ErrorTaxonomy`` instead.
    public init(
        category: ErrorCategory,
        message: String,
        shouldNotifyUser: Bool = false,
        userTitle: String? = nil,
        userMessage: String? = nil,
        contextualMessage: String? = nil,
        code: Int? = nil,
        subcode: Int? = nil,
        httpStatus: Int? = nil,
        loginFailedReason: LoginFailedReason? = nil,
        recoveryTactic: RecoveryTactic? = nil,
        closesSession: Bool? = nil,
        retryAfter: Duration? = nil,
        body: JSONValue? = nil,
        provider: ProviderID? = nil,
        details: [any ProviderErrorDetails] = [],
        underlyingError: (any Error & Sendable)? = nil
    ) {
        self.category = category
        self.message = message
        self.shouldNotifyUser = shouldNotifyUser
        self.userTitle = userTitle
        self.userMessage = userMessage
        self.contextualMessage = contextualMessage ?? category.contextualMessage
        self.code = code
        self.subcode = subcode
        self.httpStatus = httpStatus
        self.loginFailedReason = loginFailedReason
        self.recoveryTactic = recoveryTactic ?? category.defaultTactic
        self.closesSession = closesSession ?? (category == .authenticationReopenSession)
        self.retryAfter = retryAfter
        self.body = body
        self.provider = provider
        self.details = details
        self.underlyingError = underlyingError
    }

    public var description: String {
        var parts: [String] = []
        if let provider { parts.append(provider.rawValue) }
        parts.append(category.rawValue)
        if let httpStatus { parts.append("HTTP \(httpStatus)") }
        if let code { parts.append(subcode.map { "code \(code)/\($0)" } ?? "code \(code)") }
        if let loginFailedReason { parts.append("login failed: \(loginFailedReason)") }
        var text = "AuthError(\(parts.joined(separator: ", "))): \(message)"
        for summary in details.compactMap(\.summary) { text += " [\(summary)]" }
        return text
    }

    /// What a person reads: ``userMessage`` when ``shouldNotifyUser`` says to show it (and there
    /// is one), otherwise ``message``; no secret, as in ``description``. What
    /// `localizedDescription` returns.
    public var errorDescription: String? { shouldNotifyUser ? (userMessage ?? message) : message }

    /// The message to show the person, by the one rule: ``userMessage`` when ``shouldNotifyUser``
    /// (and it is not blank), otherwise ``contextualMessage``.
    public var messageForPerson: String {
        if shouldNotifyUser, let userMessage, !userMessage.allSatisfy(\.isWhitespace) { return userMessage }
        return contextualMessage
    }
}

extension ErrorCategory {
    /// The tactics an error of this category may carry, the first being ``defaultTactic``:
    ///
    /// | category | tactics |
    /// |---|---|
    /// | `userCancelled` | `none` |
    /// | `authenticationReopenSession` | `reauthenticate` |
    /// | `permissions` | `requestPermissions`; `showMessage` only with `shouldNotifyUser` |
    /// | `retry` | `retry`, `retryAfterBackoff`; `showMessage` only with `shouldNotifyUser` |
    /// | `throttling` | `retryAfterBackoff` |
    /// | `server` | `showMessage`, `retryAfterBackoff`, `retry` |
    /// | `invalid` | `showMessage`, `none` |
    /// | `badRequest`, `providerOther` | `showMessage` |
    ///
    /// `showMessage` with `shouldNotifyUser` in `retry` and `permissions` is the Facebook SDK's
    /// "out-of-band action": the person has to act outside the app first (unlock a checkpointed
    /// account, 459; authorise an organisation's single sign-on), so retrying or asking again at
    /// once cannot help. A category this version of Sesame does not define allows `showMessage`.
    /// Every row of every error table is checked against this when it is built.
    public var allowedTactics: [RecoveryTactic] {
        switch self {
        case .userCancelled: [RecoveryTactic.none]
        case .authenticationReopenSession: [.reauthenticate]
        case .permissions: [.requestPermissions]
        case .retry: [.retry, .retryAfterBackoff]
        case .throttling: [.retryAfterBackoff]
        case .server: [.showMessage, .retryAfterBackoff, .retry]
        case .invalid: [.showMessage, RecoveryTactic.none]
        default: [.showMessage]  // badRequest, providerOther, and any category added later
        }
    }

    /// The tactics this category allows only when the person must act first
    /// (``AuthError/shouldNotifyUser``): see ``allowedTactics``.
    public var tacticsWhenThePersonMustAct: [RecoveryTactic] {
        self == .retry || self == .permissions ? [.showMessage] : []
    }

    /// Whether an error of this category may carry `tactic` (see ``allowedTactics``).
    public func allows(_ tactic: RecoveryTactic, shouldNotifyUser: Bool) -> Bool {
        allowedTactics.contains(tactic) || (shouldNotifyUser && tacticsWhenThePersonMustAct.contains(tactic))
    }

    /// The sentence for the person an error of this category carries as its
    /// ``AuthError/contextualMessage`` when nothing more specific is known (the Facebook SDK
    /// guide's messages where it has one).
    public var contextualMessage: String {
        switch self {
        case .userCancelled: "The request was cancelled."
        case .authenticationReopenSession: "Your current session is no longer valid. Please log in again."
        case .permissions: "This app doesn't have permission to do this. Allow it when you are asked, then try again."
        case .retry: "Something went wrong for a moment. Please try again."
        case .throttling: "Too many requests right now. Please wait a little, then try again."
        case .server: "The service is having trouble right now. Please try again later."
        default: "Something went wrong. Please try again later."  // invalid, badRequest, providerOther, later ones
        }
    }

    /// The tactic a category implies when the taxonomy names none: ``RecoveryTactic/showMessage``
    /// for a category this version of Sesame does not define.
    public var defaultTactic: RecoveryTactic { allowedTactics[0] }
}

extension AuthError {
    /// A login redirect whose `state` was missing or did not match the one sent: it may be
    /// forged (CSRF), so it is refused.
    public static func stateMismatch(provider: ProviderID? = nil, missing: Bool) -> AuthError {
        AuthError(
            category: .invalid,
            message: missing
                ? "The login redirect carried no 'state' parameter, so it cannot be tied to this login and was "
                    + "refused (a possible cross-site request forgery). Start the login again."
                : "The login redirect's 'state' did not match the one this login sent, so it was refused "
                    + "(a possible cross-site request forgery). Start the login again.",
            loginFailedReason: .stateMismatch,
            recoveryTactic: RecoveryTactic.none,
            provider: provider
        )
    }

    /// A login redirect whose `iss` parameter is not the configured issuer, or is missing
    /// although the provider says it always sends one: the RFC 9207 issuer check failed. The
    /// answer may come from another provider the app also uses (a mix-up attack), so it is
    /// refused before its code is used.
    ///
    /// - Parameters:
    ///   - expected: the configured issuer.
    ///   - received: the redirect's `iss`, or `nil` when it had none.
    ///   - provider: the provider the login was with, when known.
    public static func issuerMismatch(expected: String, received: String?, provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: received.map {
                "The login redirect's issuer is '\($0)', not '\(expected)' as configured, so it failed the RFC 9207 "
                    + "issuer check and was refused (it may come from another provider: a mix-up attack). "
                    + "Check the issuer configuration, then start the login again."
            }
                ?? "The login redirect carried no 'iss' parameter although '\(expected)' says it always sends one, "
                + "so it failed the RFC 9207 issuer check and was refused. Start the login again.",
            loginFailedReason: .issuerMismatch,
            recoveryTactic: .showMessage,
            provider: provider,
            details: [IssuerCheckFailure(expectedIssuer: expected, receivedIssuer: received)]
        )
    }

    /// A redirect that could not be parsed at all.
    public static func malformedRedirect(_ detail: String, provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "The login redirect could not be read: \(detail). Start the login again.",
            loginFailedReason: .malformedRedirect,
            recoveryTactic: RecoveryTactic.none,
            provider: provider
        )
    }

    /// No answer from the browser or device within `timeout`.
    public static func loginTimedOut(after timeout: Duration, provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .retry,
            message: "No login answer arrived within \(timeout.formattedSeconds). Start the login again, and finish "
                + "it in the browser or on the other device before the time runs out.",
            loginFailedReason: .timedOut,
            recoveryTactic: .retry,
            provider: provider
        )
    }

    /// Wraps a failure below HTTP: transient ones (timeouts, refused, reset, DNS) are
    /// ``ErrorCategory/retry``; the rest (oversized bodies, ...) are ``ErrorCategory/server``.
    ///
    /// A TLS failure or a refused certificate is ``ErrorCategory/invalid``, not ``ErrorCategory/server``:
    /// trying again later does not fix a certificate or a handshake, and the message says what is wrong.
    public static func transport(_ error: TransportError, provider: ProviderID? = nil) -> AuthError {
        let isTLS = error.kind == .tlsFailure || error.kind == .certificateRejected
        return AuthError(
            category: error.isTransient ? .retry : (isTLS ? .invalid : .server),
            message: error.description,
            provider: provider,
            underlyingError: error
        )
    }
}

// Helpers for this package's messages, not API: an app's `Duration` gains nothing from Sesame.
extension Duration {
    /// The duration as seconds with up to three decimals, for messages ("2.5 s").
    package var formattedSeconds: String {
        let seconds = inSeconds
        if seconds.rounded() == seconds { return "\(Int(seconds)) s" }
        return String(format: "%.3g s", seconds)
    }

    /// The duration in seconds as a `Double`.
    package var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// A provider's mapping from its raw errors to ``AuthError``.
///
/// Implementations must be total: every input, including HTML error pages, empty bodies,
/// truncated JSON and wrong types, becomes a classified ``AuthError``. Nothing traps or throws.
public protocol ErrorTaxonomy: Sendable {
    /// The provider whose errors this reads.
    var provider: ProviderID { get }

    /// Classifies a failed HTTP response.
    func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError

    /// Classifies an error a login redirect or token endpoint returned in OAuth form.
    func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError

    /// Classifies a failure below HTTP.
    func classify(_ error: TransportError) -> AuthError
}

extension ErrorTaxonomy {
    /// Classifies a failed response.
    public func classify(_ response: HTTPResponse) -> AuthError {
        classify(status: response.status, headers: response.headers, body: response.body)
    }

    /// Transient transport failures are ``ErrorCategory/retry``, the rest ``ErrorCategory/server``.
    public func classify(_ error: TransportError) -> AuthError { .transport(error, provider: provider) }

    /// RFC 6749 reading: `access_denied` is the person declining (``ErrorCategory/userCancelled``,
    /// nothing to show); anything else is a failed login with the provider's description.
    ///
    /// Two common extra parameters are read too: `error_reason=user_denied` (servers that tell
    /// an explicit "no" from a closed dialog send it) makes the reason
    /// ``LoginFailedReason/userDenied``, and a numeric `error_code` becomes ``AuthError/code``.
    public func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError {
        let code = error.additionalParameters["error_code"].flatMap { Int($0) }
        if error.error == "access_denied" {
            return AuthError(
                category: .userCancelled,
                message: "The person declined the login (\(error.summary)).",
                code: code,
                loginFailedReason: error.additionalParameters["error_reason"] == "user_denied"
                    ? .userDenied : .userCancelled,
                provider: provider
            )
        }
        return AuthError(
            category: .providerOther,
            message: "The login failed: \(error.summary).",
            code: code,
            loginFailedReason: .providerError,
            provider: provider
        )
    }
}

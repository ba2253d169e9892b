import Foundation

/// Receives the one redirect that ends a browser login (RFC 8252): for example a one-shot
/// HTTP listener on the loopback address (`LoopbackRedirectReceiver` in `SesameHTTPServer`).
///
/// One call is one login. The receiver starts listening, hands its redirect URI to `open`
/// (which builds the authorization URL and opens the browser), waits for the redirect whose
/// `state` is `expectedState`, runs `complete` with it (the code exchange), shows the person
/// how the login ended, and stops listening, whatever happens.
public protocol RedirectReceiver: Sendable {
    /// Runs one login's redirect round trip, checking the redirect's `iss` (RFC 9207) against
    /// `expectedIssuer` before `complete` sees it.
    ///
    /// This is the one requirement, with no default, so a receiver cannot skip the issuer
    /// check by leaving it out: a redirect whose `iss` fails the check must be refused with
    /// ``AuthError/issuerMismatch(expected:received:provider:)``, the way one with the wrong
    /// `state` is (``OAuth/parseRedirectParameters(_:expectedState:expectedIssuer:provider:)``
    /// does both checks). `expectedIssuer` is `nil` for a provider with no issuer identifier.
    ///
    /// - Parameters:
    ///   - expectedState: the `state` sent in the authorization request; a redirect without
    ///     it is refused.
    ///   - expectedIssuer: what the redirect's `iss` must be, or `nil` to check nothing.
    ///   - provider: the provider, for errors.
    ///   - open: called once with the redirect URI, once the receiver is listening.
    ///   - complete: called once with what the redirect carried and the redirect URI (the
    ///     token exchange needs it); what it returns or throws decides what the person is shown.
    /// - Returns: what `complete` returned.
    /// - Throws: what `open` or `complete` threw; ``AuthError/stateMismatch(provider:missing:)``
    ///   for a redirect whose `state` is missing or wrong;
    ///   ``AuthError/issuerMismatch(expected:received:provider:)`` for one whose `iss` is wrong
    ///   or missing when required; ``AuthError/loginTimedOut(after:provider:)`` when no
    ///   redirect came in time; `CancellationError` when the task is cancelled.
    func receiveRedirect<Result: Sendable>(
        expectedState: String,
        expectedIssuer: AuthorizationResponseIssuer?,
        provider: ProviderID?,
        open: (_ redirectURI: URL) async throws -> Void,
        complete: (_ outcome: RedirectOutcome, _ redirectURI: URL) async throws -> Result
    ) async throws -> Result
}

extension RedirectReceiver {
    /// Runs one login's redirect round trip for a provider with no issuer identifier: the
    /// requirement with no `iss` expectation.
    ///
    /// - Throws: what ``receiveRedirect(expectedState:expectedIssuer:provider:open:complete:)``
    ///   throws.
    public func receiveRedirect<Result: Sendable>(
        expectedState: String,
        provider: ProviderID?,
        open: (_ redirectURI: URL) async throws -> Void,
        complete: (_ outcome: RedirectOutcome, _ redirectURI: URL) async throws -> Result
    ) async throws -> Result {
        try await receiveRedirect(
            expectedState: expectedState, expectedIssuer: nil, provider: provider, open: open, complete: complete)
    }
}

/// Shows the person a web page, normally by opening their browser.
public protocol BrowserOpener: Sendable {
    /// Opens `url`. Returns once the browser was asked to open it (not when the person is done).
    ///
    /// - Throws: only when the person cannot be shown the URL at all.
    func open(_ url: URL) async throws
}

/// What a device login shows the person: a short code to enter at a web address.
///
/// The device code is the secret the app polls with; ``description`` does not show it.
public struct DeviceAuthorization: Sendable, Hashable, CustomStringConvertible {
    /// The code the app polls with (RFC 8628's `device_code`, Facebook's `code`). Secret.
    public var deviceCode: String
    /// The short code the person enters.
    public var userCode: String
    /// Where the person enters it.
    public var verificationURL: URL
    /// A URL that already carries the user code, when the provider gives one.
    public var verificationURLComplete: URL?
    /// How long the codes are valid.
    public var expiresIn: Duration
    /// How long to wait between polls.
    public var interval: Duration

    /// Creates an authorization.
    public init(
        deviceCode: String, userCode: String, verificationURL: URL, verificationURLComplete: URL? = nil,
        expiresIn: Duration, interval: Duration = .seconds(5)
    ) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURL = verificationURL
        self.verificationURLComplete = verificationURLComplete
        self.expiresIn = expiresIn
        self.interval = interval
    }

    public var description: String {
        "DeviceAuthorization(userCode: \(userCode), verificationURL: \(verificationURL.absoluteString), "
            + "expiresIn: \(expiresIn.formattedSeconds), interval: \(interval.formattedSeconds), "
            + "deviceCode: \(Redaction.placeholder))"
    }
}

/// How a device login ended, as its presenter is told.
public enum DeviceLoginEnd: Sendable {
    /// The person approved; the app has its token.
    case succeeded
    /// The login failed or the person declined.
    case failed(AuthError)
    /// The task running the login was cancelled.
    case cancelled
}

/// Shows the person a device login's code and where to enter it, and that the app is waiting.
public protocol DeviceCodePresenter: Sendable {
    /// Whether the person will see the code (`true` by default). A presenter that has nowhere to
    /// show it (a terminal presenter in an app without one) says `false`, and the login then
    /// fails at once with ``AuthError/noDeviceCodePresenter(provider:)`` instead of waiting
    /// silently until the code expires.
    var showsCode: Bool { get }

    /// Shows the code and the address. Called once, before the first poll.
    func present(_ authorization: DeviceAuthorization) async

    /// Called after each poll that found the person has not finished yet.
    ///
    /// - Parameters:
    ///   - authorization: what ``present(_:)`` showed.
    ///   - nextPollIn: the wait before the next poll (longer after a slow-down).
    func stillWaiting(_ authorization: DeviceAuthorization, nextPollIn: Duration) async

    /// Called once when the login ends, however it ends.
    func finished(_ end: DeviceLoginEnd) async
}

extension DeviceCodePresenter {
    /// A presenter shows the code unless it says otherwise.
    public var showsCode: Bool { true }
    /// Shows nothing between polls.
    public func stillWaiting(_ authorization: DeviceAuthorization, nextPollIn: Duration) async {}
    /// Shows nothing at the end.
    public func finished(_ end: DeviceLoginEnd) async {}
}

extension AuthError {
    /// A device login's code expired before the person approved it.
    public static func deviceCodeExpired(provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .retry,
            message: "The device login code expired before the person entered and approved it. Start the login "
                + "again to get a new code.",
            loginFailedReason: .codeExpired,
            recoveryTactic: .retry,
            provider: provider
        )
    }

    /// A device login whose presenter cannot show the code (an app with no terminal that gave
    /// no presenter of its own): nobody could approve it, so it fails before a code is asked for.
    public static func noDeviceCodePresenter(provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "A device login needs somewhere to show its code, and this app has no terminal and gave no "
                + "presenter. Pass a DeviceCodePresenter that shows the code (deviceLogin(presenter:)), or log in "
                + "in the browser with an opener (browserLogin(opener:)).",
            loginFailedReason: .noPresenter,
            recoveryTactic: .showMessage,
            provider: provider
        )
    }

    /// A browser login whose opener could neither open a browser nor show the address (an app
    /// with no terminal and no display that gave no opener of its own).
    public static func noBrowserOpener(provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "A browser login needs a browser or somewhere to show its address, and this app has neither "
                + "a display nor a terminal and gave no opener. Pass a BrowserOpener (browserLogin(opener:)), or "
                + "log in by device code with a presenter (deviceLogin(presenter:)).",
            loginFailedReason: .noPresenter,
            recoveryTactic: .showMessage,
            provider: provider
        )
    }

    /// A provider answer a login flow could not read (a 2xx without the fields it needs).
    public static func unreadableLoginAnswer(_ what: String, provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .providerOther,
            message: "The provider's \(what) could not be read. Try again; if it keeps happening, the provider's "
                + "endpoints or Sesame's configuration for them are wrong.",
            loginFailedReason: .providerError,
            provider: provider
        )
    }
}

extension AccessToken {
    /// A token from an OAuth 2.0 token answer (RFC 6749 §5.1).
    ///
    /// The granted permissions are the answer's `scope` when it has one, else the ones asked
    /// for (RFC 6749 §5.1: an absent `scope` means "as requested") plus, for a re-request,
    /// those the current token had.
    public init(_ answer: OAuthTokenResponse, for request: LoginRequest, now: Date = Date()) {
        let granted =
            answer.scope ?? (request.permissions.map(\.name) + (request.currentToken?.permissions.granted ?? []))
        let requested = Set(request.permissions.map(\.name))
        let declined = answer.scope.map { requested.subtracting($0) } ?? []
        self.init(
            tokenString: answer.accessToken,
            provider: request.provider,
            appID: request.appID,
            userID: request.currentToken?.userID,
            permissions: PermissionSet(granted: granted, declined: declined),
            expirationDate: answer.expiresIn.flatMap { $0 > 0 ? now.addingTimeInterval(TimeInterval($0)) : nil },
            refreshDate: now,
            refreshToken: answer.refreshToken,
            refreshTokenExpirationDate: answer.refreshToken == nil
                ? nil
                : answer.refreshTokenExpiresIn.flatMap {
                    $0 > 0 ? now.addingTimeInterval(TimeInterval($0)) : nil
                },
            idToken: answer.idToken
        )
    }
}

extension DeviceAuthorization: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "deviceCode": Redaction.placeholder, "userCode": userCode, "verificationURL": verificationURL,
                "verificationURLComplete": verificationURLComplete as Any, "expiresIn": expiresIn,
                "interval": interval,
            ])
    }
}

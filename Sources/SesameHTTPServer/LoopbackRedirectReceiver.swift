import Foundation
import Sesame

/// Receives a browser login's redirect on a one-shot HTTP listener on the loopback address,
/// as RFC 8252 (OAuth 2.0 for Native Apps) describes.
///
/// Each login gets its own listener on a random port of `127.0.0.1`; the redirect URI is
/// `http://127.0.0.1:<port>/callback`. Exactly one redirect is accepted, a `GET` to the callback
/// path with a loopback `Host`, no cross-site `Origin` and the login's `state`:
/// - anything else (a wrong or missing `state`, a cross-site form `POST`, a DNS-rebound `Host`)
///   gets an error page and the login keeps waiting for the real redirect; after ten such
///   requests the login fails with the last
///   refusal (for a bad `state`, `AuthError.stateMismatch(provider:missing:)`);
/// - a redirect with the right `state` whose `iss` fails the RFC 9207 check, when the login asks
///   for it, fails the login with `AuthError.issuerMismatch`;
/// - another path gets 404; a hit after the login ended gets a "you can close this window"
///   page and delivers nothing;
/// - no redirect within ``timeout`` (5 minutes by default) fails the login with
///   `AuthError.loginTimedOut(after:provider:)`.
///
/// The browser is held until the code exchange is done, then shown a small plain page: signed
/// in, or what went wrong in words.
public struct LoopbackRedirectReceiver: RedirectReceiver {
    /// The address to listen on; `127.0.0.1` as RFC 8252 §7.3 recommends.
    public var host: String
    /// The port; 0 (the default) picks a free one for each login. A provider that only accepts
    /// a registered port needs it fixed here.
    public var port: Int
    /// The path the redirect comes back to.
    public var callbackPath: String
    /// The host name written in the redirect URI, when it must differ from ``host`` (for
    /// example `localhost`, for providers that only accept that name; the listener then also
    /// listens on `::1`).
    public var redirectURIHost: String?
    /// How long to wait for the redirect, from the start of the login.
    public var timeout: Duration
    /// What ``timeout`` is measured on.
    public var clock: any Clock<Duration>
    /// The app's name for the browser page ("You are signed in to <name>"), if any.
    public var appName: String?
    /// Where the person may paste the redirect address instead, when their browser is on another
    /// machine (`PastedRedirect` in the core says what is accepted); `nil` (the default) reads
    /// nothing. The listener keeps listening meanwhile: the first answer, pasted or received,
    /// ends the wait, and the other is then stopped.
    public var pasteSource: (any RedirectPasteSource)?

    /// Creates a receiver.
    public init(
        host: String = "127.0.0.1", port: Int = 0, callbackPath: String = "/callback",
        redirectURIHost: String? = nil, timeout: Duration = .seconds(300),
        clock: any Clock<Duration> = ContinuousClock(), appName: String? = nil,
        pasteSource: (any RedirectPasteSource)? = nil
    ) {
        self.host = host
        self.port = port
        self.callbackPath = callbackPath.hasPrefix("/") ? callbackPath : "/" + callbackPath
        self.redirectURIHost = redirectURIHost
        self.timeout = timeout
        self.clock = clock
        self.appName = appName
        self.pasteSource = pasteSource
    }

    /// Runs one login's redirect round trip, refusing a redirect whose `iss` fails the RFC 9207
    /// check against `expectedIssuer` as it refuses one with the wrong `state`.
    ///
    /// - Throws: `AuthError` for a redirect with the wrong `state` or `iss`, an error answer, no
    ///   answer in time, or a listener that cannot start; whatever the exchange throws.
    public func receiveRedirect<Result: Sendable>(
        expectedState: String,
        expectedIssuer: AuthorizationResponseIssuer?,
        provider: ProviderID?,
        open: (_ redirectURI: URL) async throws -> Void,
        complete: (_ outcome: RedirectOutcome, _ redirectURI: URL) async throws -> Result
    ) async throws -> Result {
        let exchange = RedirectExchange(
            expectedState: expectedState, expectedIssuer: expectedIssuer, provider: provider,
            callbackPath: callbackPath, appName: appName)
        let server = HTTPServer(
            configuration: .init(
                host: host, port: port, alsoListenOnIPv6Loopback: redirectURIHost == "localhost",
                // Room for the browser beside many idle or slow local connections (each must
                // send its head within 10 s); no per-address limit, as every local program
                // shares the browser's address.
                maxConnections: 512, maxHeaderBytes: 16 * 1024, maxBodyBytes: 64 * 1024,
                connectionIdleTimeout: .seconds(30), stopGracePeriod: .seconds(2), requestHeadTimeout: .seconds(10))
        ) { request in
            await exchange.handle(request)
        }
        do {
            try server.start()
        } catch let error as HTTPServerError {
            throw AuthError(
                category: .invalid,
                message: "Cannot receive the login redirect: \(error)",
                shouldNotifyUser: true,
                userMessage: "The sign-in could not start: \(error)",
                recoveryTactic: .showMessage,
                provider: provider,
                underlyingError: error)
        }
        var components = URLComponents(url: server.baseURL, resolvingAgainstBaseURL: false)!
        if let redirectURIHost { components.host = redirectURIHost }
        components.path = callbackPath
        let redirectURI = components.url!

        let timeout = timeout
        let clock = clock
        let timer = Task {
            try? await clock.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            exchange.deliver(.failure(.loginTimedOut(after: timeout, provider: provider)))
        }
        var pasting: Task<Void, Never>?
        do {
            try await open(redirectURI)
            pasting = pasteSource.map { exchange.readPastes(from: $0, redirectURI: redirectURI) }
            let outcome = try await exchange.wait()
            timer.cancel()
            await Self.stop(pasting)
            let result = try await complete(outcome, redirectURI)
            exchange.conclude(.signedIn)
            await server.stop()
            return result
        } catch {
            timer.cancel()
            await Self.stop(pasting)
            exchange.conclude(.failed(error))
            await server.stop()
            throw error
        }
    }

    /// Stops reading pastes and waits until the reading has stopped.
    private static func stop(_ pasting: Task<Void, Never>?) async {
        pasting?.cancel()
        await pasting?.value
    }
}

/// How a login ended, for the page the browser is shown.
package enum LoginPageVerdict: Sendable {
    case signedIn
    case failed(any Error)
}

/// One login's meeting point between the HTTP handler (the browser's redirect) and the task
/// running the login.
package final class RedirectExchange: Sendable {
    private struct State {
        var delivery: Result<RedirectOutcome, AuthError>?
        var waiter: CheckedContinuation<RedirectOutcome, any Error>?
        var waiterCancelled = false
        var verdict: LoginPageVerdict?
        var pageWaiters: [CheckedContinuation<LoginPageVerdict, Never>] = []
        var refusedRequests = 0
    }

    let expectedState: String
    let expectedIssuer: AuthorizationResponseIssuer?
    let provider: ProviderID?
    let callbackPath: String
    let appName: String?
    private let state = Locked(State())

    package init(
        expectedState: String, expectedIssuer: AuthorizationResponseIssuer?, provider: ProviderID?,
        callbackPath: String, appName: String?
    ) {
        self.expectedState = expectedState
        self.expectedIssuer = expectedIssuer
        self.provider = provider
        self.callbackPath = callbackPath
        self.appName = appName
    }

    /// Hands the first redirect (or failure) to the login; later ones are ignored.
    ///
    /// - Returns: whether this one was the first.
    @discardableResult
    func deliver(_ delivery: Result<RedirectOutcome, AuthError>) -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<RedirectOutcome, any Error>?) in
            guard state.delivery == nil else { return (false, nil) }
            state.delivery = delivery
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(with: delivery.mapError { $0 as any Error })
        return first
    }

    /// Reads what the person pastes (`PastedRedirect.receive`) and hands the redirect, or the
    /// failure that ended the pasting, to the login, unless the browser's redirect came first.
    func readPastes(from source: any RedirectPasteSource, redirectURI: URL) -> Task<Void, Never> {
        Task {
            do {
                let outcome = try await PastedRedirect.receive(
                    from: source, redirectURI: redirectURI, expectedState: expectedState,
                    expectedIssuer: expectedIssuer, provider: provider)
                deliver(.success(outcome))
            } catch let error as AuthError {
                deliver(.failure(error))
            } catch {
                // Cancelled: the redirect came through the listener, or the login ended.
            }
        }
    }

    /// Whether a redirect (or failure) was already delivered.
    var isDelivered: Bool { state.withLock { $0.delivery != nil } }

    /// Waits for the redirect.
    func wait() async throws -> RedirectOutcome {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<RedirectOutcome, any Error>) in
                let ready = state.withLock { state -> Result<RedirectOutcome, any Error>? in
                    if let delivery = state.delivery { return delivery.mapError { $0 as any Error } }
                    if state.waiterCancelled { return .failure(CancellationError()) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.waiterCancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Records how the login ended and answers the browser requests waiting for it.
    package func conclude(_ verdict: LoginPageVerdict) {
        let waiters = state.withLock { state in
            if state.verdict == nil { state.verdict = verdict }
            defer { state.pageWaiters.removeAll() }
            return state.pageWaiters
        }
        let final = state.withLock { $0.verdict! }
        for waiter in waiters { waiter.resume(returning: final) }
    }

    private func verdict() async -> LoginPageVerdict {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> LoginPageVerdict? in
                if let verdict = state.verdict { return verdict }
                state.pageWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    // MARK: The browser's side

    package func handle(_ request: HTTPServerRequest) async -> HTTPServerResponse {
        guard request.path == callbackPath else {
            return LoginPage.render(
                title: "Not found", message: "There is nothing here. This address only receives a sign-in answer.",
                status: 404)
        }
        guard request.method == .get else {
            // The redirect is a browser navigation, a GET; a POST here is a cross-site form.
            var response = refuse(
                AuthError.redirectRefused(
                    "it was a \(request.method.rawValue), not the browser's GET", provider: provider),
                status: 405)
            response.headers["Allow"] = "GET"
            return response
        }
        guard let host = request.headers["Host"], Self.isLoopbackAuthority(host) else {
            // DNS rebinding: a page on another name made the browser send this here.
            return refuse(
                AuthError.redirectRefused("it was addressed to another host name", provider: provider), status: 421)
        }
        if let origin = request.headers["Origin"], !Self.isLoopbackOrigin(origin) {
            return refuse(AuthError.redirectRefused("it came from another site", provider: provider), status: 403)
        }
        guard !isDelivered else { return LoginPage.alreadyFinished() }
        let parameters = request.query
        let states = parameters.filter { $0.0 == "state" }.map(\.1)
        guard states.count == 1, OAuth.constantTimeEquals(states[0], expectedState) else {
            // A forged or stale redirect: refuse it and keep waiting for the real one, up to a bound.
            return refuse(.stateMismatch(provider: provider, missing: states.isEmpty), status: 400)
        }
        let outcome: RedirectOutcome
        do {
            outcome = try OAuth.parseRedirectParameters(
                parameters, expectedState: expectedState, expectedIssuer: expectedIssuer, provider: provider)
        } catch let error as AuthError {
            guard deliver(.failure(error)) else { return LoginPage.alreadyFinished() }
            return LoginPage.render(
                title: "Sign-in refused",
                message: error.message,
                status: 400)
        } catch {
            return LoginPage.render(title: "Sign-in refused", message: "\(error)", status: 400)
        }
        guard deliver(.success(outcome)) else { return LoginPage.alreadyFinished() }
        return LoginPage.render(await verdict(), appName: appName)
    }

    /// How many refused requests to the callback a login tolerates before it fails with the
    /// last refusal: enough for a stray reload or a forged request or two, few enough that a
    /// local process cannot keep a login waiting by flooding it.
    static let maximumRefusedRequests = 10

    /// Answers a request that is not the login's redirect with an error page; the login keeps
    /// waiting unless this was one refusal too many.
    private func refuse(_ error: AuthError, status: Int) -> HTTPServerResponse {
        let tooMany = state.withLock { state -> Bool in
            state.refusedRequests += 1
            return state.refusedRequests >= Self.maximumRefusedRequests
        }
        if tooMany { deliver(.failure(error)) }
        return LoginPage.render(
            title: "Sign-in refused",
            message: error.message + (tooMany ? "" : " This window is not the sign-in; the application keeps waiting."),
            status: status)
    }

    /// Whether a `Host` field names a loopback address (`127.0.0.1:port`, `localhost`, `[::1]:port`).
    static func isLoopbackAuthority(_ authority: String) -> Bool {
        var name = Substring(authority.trimmingCharacters(in: .whitespaces))
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isASCII) && rest.count > 1)
            else { return false }
            name = name[...close]
        } else if let colon = name.firstIndex(of: ":") {
            guard name[name.index(after: colon)...].allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
            name = name[..<colon]
        }
        return !name.isEmpty && EndpointSecurity.isLoopback(String(name))
    }

    /// Whether an `Origin` field is a loopback origin (`http://127.0.0.1:port`); `null` and
    /// every other site are not.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        guard let url = URL(string: origin), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            let host = url.host
        else { return false }
        return EndpointSecurity.isLoopback(host)
    }
}

extension AuthError {
    /// A request to the redirect URI that cannot be the login's redirect.
    fileprivate static func redirectRefused(_ why: String, provider: ProviderID?) -> AuthError {
        AuthError(
            category: .invalid,
            message: "A request to the sign-in address was refused because \(why) (a possible cross-site request "
                + "forgery).",
            loginFailedReason: .stateMismatch, recoveryTactic: RecoveryTactic.none, provider: provider)
    }
}

/// The small plain pages the browser is shown.
enum LoginPage {
    static func render(_ verdict: LoginPageVerdict, appName: String?) -> HTTPServerResponse {
        switch verdict {
        case .signedIn:
            return render(
                title: "Signed in",
                message: "You are signed in\(appName.map { " to \($0)" } ?? ""). You can close this window and "
                    + "return to the application.")
        case .failed(let error as AuthError) where error.category == .userCancelled:
            return render(
                title: "Sign-in cancelled",
                message: "The sign-in was cancelled and nothing was shared. You can close this window.")
        case .failed(let error as AuthError):
            return render(
                title: "Sign-in failed",
                message: "The sign-in did not complete: \(error.userMessage ?? error.message) "
                    + "You can close this window.",
                status: 400)
        case .failed(is CancellationError):
            return render(
                title: "Sign-in cancelled",
                message: "The application stopped waiting for this sign-in. You can close this window.")
        case .failed:
            return render(
                title: "Sign-in failed",
                message: "The sign-in did not complete because of an error in the application. "
                    + "You can close this window and try again.",
                status: 500)
        }
    }

    static func alreadyFinished() -> HTTPServerResponse {
        render(
            title: "Sign-in already finished",
            message: "This sign-in has already finished. You can close this window.")
    }

    static func render(title: String, message: String, status: Int = 200) -> HTTPServerResponse {
        let html = """
            <!doctype html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(HTMLEscaping.escape(title))</title>
            <style>body{font-family:sans-serif;max-width:32em;margin:4em auto;padding:0 1em;line-height:1.5}</style>
            </head>
            <body><h1>\(HTMLEscaping.escape(title))</h1><p>\(HTMLEscaping.escape(message))</p></body>
            </html>

            """
        var response = HTTPServerResponse.html(html, status: status)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
    }
}

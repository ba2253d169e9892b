import Foundation

/// What one poll of a device login found.
public enum DevicePollAnswer: Sendable {
    /// The person has not finished yet: poll again at the current interval.
    case pending
    /// Polling too fast: poll again at `interval`, or, when `nil`, the current interval plus
    /// five seconds (RFC 8628 §3.5).
    case slowDown(interval: Duration?)
    /// The person approved.
    case authorized(AccessToken)
    /// The person declined; the flow classifies it with the provider's
    /// ``ErrorTaxonomy/classifyLoginError(_:)``.
    case denied(OAuthErrorResponse)
    /// The code expired.
    case expired
    /// Any other OAuth error; classified with ``ErrorTaxonomy/classifyLoginError(_:)``.
    case error(OAuthErrorResponse)
    /// An answer the dialect does not recognise: a failed one is classified with
    /// the provider's ``ErrorTaxonomy``; a 2xx one is an unreadable answer.
    case unrecognized
}

/// The state of a device login at one poll, for the dialect that reads it.
public struct DevicePollContext: Sendable {
    /// What the provider handed out at the start.
    public var authorization: DeviceAuthorization
    /// The interval in use now (widened by slow-downs).
    public var interval: Duration
    /// The login request.
    public var request: LoginRequest

    /// Creates a context (dialects' tests build one to read a poll answer).
    public init(authorization: DeviceAuthorization, interval: Duration, request: LoginRequest) {
        self.authorization = authorization
        self.interval = interval
        self.request = request
    }
}

/// How one provider runs a device login: how to start it, how to poll, how to read a poll
/// answer. ``RFC8628DeviceDialect`` is the standard one; Facebook's variant (`device/login`,
/// `device/login_status`, subcodes 1349174 / 1349172 / 1349152 / 1349173) is another.
public protocol DeviceLoginDialect: Sendable {
    /// The provider.
    var provider: ProviderID { get }
    /// How the provider's errors are read.
    var errorTaxonomy: any ErrorTaxonomy { get }

    /// The request that starts a device login.
    func startRequest(for request: LoginRequest) throws -> HTTPRequest
    /// The codes in a successful (2xx) start answer.
    ///
    /// - Throws: ``AuthError`` when the answer lacks what a device login needs.
    func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization
    /// The request for one poll.
    func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest
    /// What a poll answer (any status) says.
    ///
    /// - Throws: ``AuthError`` when the answer cannot be turned into a token (its token request
    ///   failed).
    func readPoll(_ response: HTTPResponse, context: DevicePollContext) async throws -> DevicePollAnswer
}

/// RFC 8628's device authorization grant, as standard OAuth 2.0 providers run it.
public struct RFC8628DeviceDialect: DeviceLoginDialect {
    public var provider: ProviderID
    public var errorTaxonomy: any ErrorTaxonomy
    /// The device authorization endpoint.
    public var deviceAuthorizationEndpoint: URL
    /// The token endpoint.
    public var tokenEndpoint: URL
    /// The app's client id.
    public var clientID: String
    /// How the client authenticates its start and polls: `none` for a desktop app, normally.
    public var clientAuthentication: ClientAuthentication
    /// How scopes are joined.
    public var scopeSeparator: String
    /// The wall clock, for expiry dates.
    public var now: @Sendable () -> Date

    /// The grant type of a device token request.
    public static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// Creates a dialect.
    public init(
        provider: ProviderID, errorTaxonomy: any ErrorTaxonomy, deviceAuthorizationEndpoint: URL, tokenEndpoint: URL,
        clientID: String, clientAuthentication: ClientAuthentication = .none, scopeSeparator: String = " ",
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.provider = provider
        self.errorTaxonomy = errorTaxonomy
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.scopeSeparator = scopeSeparator
        self.now = now
    }

    public func startRequest(for request: LoginRequest) throws -> HTTPRequest {
        var form: [(String, String)] = []
        if !request.permissions.isEmpty {
            form.append(("scope", request.permissions.map(\.name).joined(separator: scopeSeparator)))
        }
        return try clientAuthentication.formRequest(
            deviceAuthorizationEndpoint, form, clientID: clientID, tokenEndpoint: tokenEndpoint)
    }

    /// Reads `error` first, whatever the status (RFC 8628 §3.5 errors are identified by the `error`
    /// member): GitHub refuses a start with HTTP 200 and `device_flow_disabled`.
    public func authorization(from response: HTTPResponse, for request: LoginRequest) throws -> DeviceAuthorization {
        if let error = OAuthErrorResponse(json: response.json) { throw errorTaxonomy.classifyLoginError(error) }
        return try Self.readAuthorization(response.json, deviceCodeField: "device_code", provider: provider)
    }

    /// Reads a device authorization answer; `verification_url` (Google's spelling) is accepted
    /// too, and a missing `interval` is 5 seconds.
    public static func readAuthorization(
        _ json: JSONValue?, deviceCodeField: String, provider: ProviderID?
    ) throws -> DeviceAuthorization {
        guard let json, let deviceCode = json[deviceCodeField]?.stringValue, !deviceCode.isEmpty,
            let userCode = json["user_code"]?.stringValue, !userCode.isEmpty,
            let verification = (json["verification_uri"] ?? json["verification_url"])?.stringValue,
            let verificationURL = URL(string: verification),
            let expiresIn = json["expires_in"]?.lenientInt, expiresIn > 0
        else {
            throw AuthError.unreadableLoginAnswer(
                "device login start answer (it needs \(deviceCodeField), user_code, verification_uri and "
                    + "expires_in)", provider: provider)
        }
        let interval = json["interval"]?.lenientInt.flatMap { $0 > 0 ? $0 : nil } ?? 5
        return DeviceAuthorization(
            deviceCode: deviceCode, userCode: userCode, verificationURL: verificationURL,
            verificationURLComplete: json["verification_uri_complete"]?.stringValue.flatMap(URL.init(string:)),
            expiresIn: .seconds(expiresIn), interval: .seconds(interval))
    }

    public func pollRequest(_ context: DevicePollContext) throws -> HTTPRequest {
        try clientAuthentication.formRequest(
            tokenEndpoint, [("grant_type", Self.grantType), ("device_code", context.authorization.deviceCode)],
            clientID: clientID)
    }

    /// Reads `error` before `access_token`, whatever the status: GitHub and others answer
    /// `authorization_pending`, `slow_down` and the rest with HTTP 200. A `slow_down` that names a
    /// new `interval` (GitHub's does) is polled at it.
    public func readPoll(_ response: HTTPResponse, context: DevicePollContext) -> DevicePollAnswer {
        if let error = OAuthErrorResponse(json: response.json) {
            switch error.error {
            case "authorization_pending": return .pending
            case "slow_down":
                let interval = response.json?["interval"]?.lenientInt.flatMap { $0 > 0 && $0 < 3600 ? $0 : nil }
                return .slowDown(interval: interval.map { .seconds($0) })
            case "expired_token": return .expired
            case "access_denied": return .denied(error)
            default: return .error(error)
            }
        }
        guard response.isSuccess, let answer = OAuthTokenResponse(json: response.json) else { return .unrecognized }
        return .authorized(AccessToken(answer, for: context.request, now: now()))
    }
}

/// A login by code on another device (Facebook Login for Devices, RFC 8628): the person is
/// shown a short code and an address, and the app polls until they approve, decline, or the
/// code expires.
///
/// Polling waits on the injected clock, so tests never sleep. `slow_down` widens the
/// interval; a passing network failure or server error is retried at a doubled interval (up
/// to three in a row); cancelling the task stops polling at once.
public struct DeviceLoginFlow: LoginUI {
    /// The provider's side of the flow.
    public var dialect: any DeviceLoginDialect
    /// What shows the person the code.
    public var presenter: any DeviceCodePresenter
    /// What sends the requests.
    public var transport: any HTTPTransport
    /// What polling waits on.
    public var clock: any Clock<Duration>
    /// How many failed polls in a row (network or server errors) end the login.
    public var maxConsecutiveFailures: Int

    /// Creates a flow.
    public init(
        dialect: any DeviceLoginDialect, presenter: any DeviceCodePresenter, transport: any HTTPTransport,
        clock: any Clock<Duration> = ContinuousClock(), maxConsecutiveFailures: Int = 3
    ) {
        self.dialect = dialect
        self.presenter = presenter
        self.transport = transport
        self.clock = clock
        self.maxConsecutiveFailures = maxConsecutiveFailures
    }

    /// - Throws: ``AuthError`` (``AuthError/noDeviceCodePresenter(provider:)`` at once when the
    ///   presenter cannot show the code, ``LoginFailedReason/codeExpired``,
    ///   ``LoginFailedReason/userDenied``, a refused start, repeated failures); `CancellationError`
    ///   when the task is cancelled.
    public func logIn(_ request: LoginRequest) async throws -> AccessToken {
        guard presenter.showsCode else { throw AuthError.noDeviceCodePresenter(provider: dialect.provider) }
        let taxonomy = dialect.errorTaxonomy
        let start = try await LoginHTTP.send(
            try dialect.startRequest(for: request), through: transport, taxonomy: taxonomy)
        guard start.isSuccess else { throw taxonomy.classify(start) }
        let authorization = try dialect.authorization(from: start, for: request)
        await presenter.present(authorization)
        do {
            let token = try await poll(authorization, request: request)
            await presenter.finished(.succeeded)
            return token
        } catch let error as AuthError {
            await presenter.finished(.failed(error))
            throw error
        } catch {
            await presenter.finished(
                Task.isCancelled || error is CancellationError
                    ? .cancelled
                    : .failed(
                        AuthError(
                            category: .providerOther, message: "The device login failed: \(error)",
                            loginFailedReason: .providerError, provider: dialect.provider,
                            underlyingError: SendableErrorBox(error))))
            throw error
        }
    }

    private func poll(_ authorization: DeviceAuthorization, request: LoginRequest) async throws -> AccessToken {
        let taxonomy = dialect.errorTaxonomy
        let clock = clock
        // Time since the codes were handed out, on the injected clock.
        var elapsed = Duration.zero
        var context = DevicePollContext(
            authorization: authorization, interval: authorization.interval, request: request)
        var wait = context.interval
        var failures = 0
        while true {
            elapsed += try await clock.measure { try await clock.sleep(for: wait) }
            guard elapsed < authorization.expiresIn else {
                throw AuthError.deviceCodeExpired(provider: dialect.provider)
            }
            var answer = DevicePollAnswer.unrecognized
            var response = HTTPResponse(status: 0)
            do {
                let poll = try dialect.pollRequest(context)
                elapsed += try await clock.measure {
                    response = try await LoginHTTP.send(poll, through: transport, taxonomy: taxonomy)
                }
                answer = try await dialect.readPoll(response, context: context)
            } catch let error as AuthError
                where error.category == .retry && !response.isSuccess && failures + 1 < maxConsecutiveFailures
            {
                // A failed poll is tried again; an error reading a 2xx answer is not: the code was
                // used up by it (Facebook's 459 for a checkpointed person, met while the new
                // token is read), and polling again would only report an expired code.
                failures += 1
                wait = context.interval * (1 << failures)
                await presenter.stillWaiting(authorization, nextPollIn: wait)
                continue
            }
            switch answer {
            case .pending:
                failures = 0
                wait = context.interval
            case .slowDown(let interval):
                failures = 0
                context.interval = interval ?? context.interval + .seconds(5)
                wait = context.interval
            case .authorized(let token):
                return token
            case .denied(let error), .error(let error):
                throw taxonomy.classifyLoginError(error)
            case .expired:
                throw AuthError.deviceCodeExpired(provider: dialect.provider)
            case .unrecognized:
                if response.isSuccess {
                    throw AuthError.unreadableLoginAnswer("device login poll answer", provider: dialect.provider)
                }
                let error = taxonomy.classify(response)
                guard [.server, .retry].contains(error.category), failures + 1 < maxConsecutiveFailures else {
                    throw error
                }
                failures += 1
                wait = context.interval * (1 << failures)
            }
            await presenter.stillWaiting(authorization, nextPollIn: wait)
        }
    }
}

extension RFC8628DeviceDialect: CustomReflectable {
    /// Every field but the client's credential.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "provider": provider, "deviceAuthorizationEndpoint": deviceAuthorizationEndpoint,
                "tokenEndpoint": tokenEndpoint, "clientID": clientID,
                "clientAuthentication": clientAuthentication.method.rawValue,
                "scopeSeparator": scopeSeparator,
            ])
    }
}

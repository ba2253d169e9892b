import Foundation
import Sesame

extension ProviderID {
    /// Facebook.
    public static let facebook: ProviderID = "facebook"
}

/// Keys of `AuthError.providerInfo` that ``FacebookErrorTaxonomy`` fills in, beside
/// those of `ErrorRuleInfoKey`.
public enum FacebookErrorInfoKey {
    /// The rate-limit usage read from the response's headers (see ``GraphUsage/json``).
    public static let usage = "usage"
    /// The ``GraphErrorBody/Kind`` of the body, as its raw value.
    public static let bodyKind = "bodyKind"
}

/// Classifies Facebook's errors the way the Facebook SDK 3.x did, and further where
/// Facebook's documentation says more.
///
/// The mapping is the table in `GraphErrors.json` (``table``), turned into Swift at build time;
/// this type reads the response, asks the table, and adds what only the response can say:
///
/// - a non-blank `error_user_msg` becomes the user message and sets `AuthError.shouldNotifyUser`;
///   `error_user_title` becomes the user title;
/// - `is_transient`, `type` and `fbtrace_id` are kept on the error;
/// - the rate-limit usage headers go into `AuthError.graphUsage`, and a throttling error
///   waits at least the usage's `estimated_time_to_regain_access` (or a `Retry-After` header).
///
/// It is total: any status, headers and bytes give a classified error, never a trap or a throw.
/// See <doc:SesameFacebook#Odd-bodies> for what each unusual body becomes.
public struct FacebookErrorTaxonomy: ErrorTaxonomy {
    /// Always `ProviderID.facebook`.
    public var provider: ProviderID { .facebook }

    /// Bodies larger than this many bytes are classified by their status alone.
    public var maximumBodySize: Int

    /// The rows of `GraphErrors.json`, in the order they are tried.
    public static var table: ErrorRuleTable { GraphErrors.table }

    /// Creates the taxonomy.
    public init(maximumBodySize: Int = 8 << 20) { self.maximumBodySize = maximumBodySize }

    /// Classifies a failed Graph API response.
    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let graph = GraphErrorBody(body, maximumSize: maximumBodySize)
        let usage = GraphUsage(headers: headers)
        let facts = ErrorFacts(
            code: graph.code, subcode: graph.subcode, error: graph.errorIdentifier, status: status,
            isTransient: graph.isTransient)
        let rule = Self.table.firstMatch(facts) ?? Self.lastResort

        var shouldNotifyUser = rule.shouldNotifyUser
        var userMessage = rule.userMessage
        if let serverMessage = graph.userMessage {
            userMessage = serverMessage
            shouldNotifyUser = true
        }

        var retryAfter: Duration?
        if rule.recoveryTactic == .retry || rule.recoveryTactic == .retryAfterBackoff {
            let regain = rule.category == .throttling ? usage?.estimatedTimeToRegainAccess : nil
            retryAfter = [regain, Self.retryAfterHeader(headers)].compactMap { $0 }.max()
        }

        var info: [String: JSONValue] = [
            ErrorRuleInfoKey.rule: .string(rule.id),
            ErrorRuleInfoKey.allowsSilentReauthentication: .bool(rule.allowsSilentReauthentication),
            FacebookErrorInfoKey.bodyKind: .string(graph.kind.rawValue),
        ]
        if let key = rule.messageKey { info[ErrorRuleInfoKey.messageKey] = .string(key) }
        if let usage { info[FacebookErrorInfoKey.usage] = usage.json }

        return AuthError(
            category: rule.category,
            message: Self.developerMessage(status: status, graph: graph, rule: rule),
            shouldNotifyUser: shouldNotifyUser,
            userTitle: graph.userTitle ?? rule.userTitle,
            userMessage: userMessage,
            code: graph.code,
            subcode: graph.subcode,
            httpStatus: status,
            recoveryTactic: rule.recoveryTactic,
            closesSession: rule.closesSession,
            isTransient: graph.isTransient,
            retryAfter: retryAfter,
            errorType: graph.type,
            traceID: graph.traceID ?? headers["x-fb-trace-id"].flatMap(GraphErrorBody.text),
            body: graph.json,
            provider: .facebook,
            providerInfo: info
        )
    }

    /// Classifies an error that came back from the login dialog (the redirect's `error`,
    /// `error_reason`, `error_code` and `error_description`), as the SDK 3.x's `FBSession` did.
    ///
    /// - `access_denied` (the person pressed Cancel or declined, `error_reason=user_denied`) is
    ///   `ErrorCategory.userCancelled` with no message: there is nothing to tell the
    ///   person, who chose it.
    /// - `error_code=14` (the SDK's restricted-treatment code) is also `ErrorCategory.userCancelled`.
    /// - Anything else is a failed login (`LoginFailedReason.providerError`) in the
    ///   `ErrorCategory.retry` category: the person can start the login again.
    public func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError {
        let summary = GraphErrorBody.text(error.summary) ?? error.error
        if error.error == "access_denied" || error.errorCode == 14 {
            let denied = error.errorReason == "user_denied"
            return AuthError(
                category: .userCancelled,
                message: denied
                    ? "The person declined the Facebook login (\(summary)). Nothing to show; offer the login again when "
                        + "they ask for it."
                    : "The Facebook login was cancelled (\(summary)). Nothing to show; offer the login again when they "
                        + "ask for it.",
                code: error.errorCode,
                loginFailedReason: denied ? .userDenied : .userCancelled,
                recoveryTactic: RecoveryTactic.none,
                provider: .facebook
            )
        }
        return AuthError(
            category: .retry,
            message:
                "The Facebook login failed: \(summary). Start the login again; if it keeps failing, check the app's "
                + "login settings (redirect URI, app mode) in the Facebook app dashboard.",
            userMessage: "The Facebook login did not finish. Please try logging in again.",
            code: error.errorCode,
            loginFailedReason: .providerError,
            recoveryTactic: .showMessage,
            closesSession: false,
            provider: .facebook
        )
    }

    // MARK: Details

    /// The rule used if a table were ever to match nothing (the generator makes sure the last
    /// row matches everything, so this is never reached).
    static let lastResort = ErrorRule(
        id: "other", match: ErrorRuleMatch(), category: .providerOther, recoveryTactic: .showMessage,
        shouldNotifyUser: false, closesSession: false, meaning: "An error no rule describes.", source: "Sesame")

    static func retryAfterHeader(_ headers: HTTPHeaders) -> Duration? {
        guard let text = headers["Retry-After"]?.trimmingCharacters(in: .whitespaces), let seconds = Int(text),
            seconds > 0, seconds < 10_000_000
        else { return nil }
        return .seconds(seconds)
    }

    static func developerMessage(status: Int, graph: GraphErrorBody, rule: ErrorRule) -> String {
        var text = "Facebook answered HTTP \(status)"
        if let code = graph.code {
            text += " with error \(code)"
            if let subcode = graph.subcode { text += "/\(subcode)" }
            if let type = graph.type { text += " (\(type))" }
        } else if let identifier = graph.errorIdentifier {
            text += " with error '\(identifier)'"
        } else {
            text += " with \(graph.kind.phrase(byteCount: graph.byteCount))"
        }
        if let message = graph.message { text += ": \(message)" }
        if !text.hasSuffix(".") { text += "." }
        return text + " " + rule.meaning
    }
}

extension GraphErrorBody.Kind {
    /// The kind in words, for messages: "an HTML page", "an empty body", ...
    public func phrase(byteCount: Int) -> String {
        switch self {
        case .errorObject: "a Graph error with no code"
        case .errorString: "an OAuth error"
        case .errorArray: "an error array with no readable error in it"
        case .restStyle: "a REST-style error with no code"
        case .noError: "JSON that holds no error"
        case .null: "a body of JSON null"
        case .empty: "an empty body"
        case .html: "an HTML page instead of JSON"
        case .text: "text that is not JSON"
        case .malformedJSON: "JSON that is cut off or malformed"
        case .tooLarge: "a body of \(byteCount) bytes, too large to read"
        }
    }
}

extension AuthError {
    /// The rate-limit usage that came with the response, when it carried any usage header.
    public var graphUsage: GraphUsage? { providerInfo[FacebookErrorInfoKey.usage].flatMap(GraphUsage.init(json:)) }

    /// What the body of the failed response looked like, for errors from ``FacebookErrorTaxonomy``.
    public var graphBodyKind: GraphErrorBody.Kind? {
        providerInfo[FacebookErrorInfoKey.bodyKind]?.stringValue.flatMap(GraphErrorBody.Kind.init(rawValue:))
    }
}

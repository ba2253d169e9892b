import Foundation
import Sesame

extension ProviderID {
    /// Facebook.
    public static let facebook: ProviderID = "facebook"
}

/// What ``FacebookErrorTaxonomy`` read from a failed Graph API answer beyond the code and
/// subcode (which are `AuthError.code` and `AuthError.subcode`): the error's type, trace id
/// and transient flag, the shape of the body and the rate-limit usage. Attached to its errors, read with
/// `error.details(as: GraphErrorDetails.self)` (or `AuthError.graphUsage` and
/// `AuthError.graphBodyKind`).
public struct GraphErrorDetails: ProviderErrorDetails, Hashable {
    /// The error `type` (`OAuthException`, `GraphMethodException`, ...).
    public var type: String?
    /// The `fbtrace_id` (or the `x-fb-trace-id` header), for support requests.
    public var traceID: String?
    /// Facebook's `is_transient`.
    public var isTransient: Bool?
    /// The shape of the body.
    public var bodyKind: GraphErrorBody.Kind
    /// The rate-limit usage read from the response's headers, when it carried any.
    public var usage: GraphUsage?

    /// Creates the details.
    public init(
        type: String? = nil, traceID: String? = nil, isTransient: Bool? = nil, bodyKind: GraphErrorBody.Kind,
        usage: GraphUsage? = nil
    ) {
        self.type = type
        self.traceID = traceID
        self.isTransient = isTransient
        self.bodyKind = bodyKind
        self.usage = usage
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = ["bodyKind": .string(bodyKind.rawValue)]
        object["type"] = type.map(JSONValue.string)
        object["fbtrace_id"] = traceID.map(JSONValue.string)
        object["isTransient"] = isTransient.map(JSONValue.bool)
        object["usage"] = usage?.json
        return .object(object)
    }

    /// `trace` and the trace id, when there is one.
    public var summary: String? { traceID.map { "trace \($0)" } }

    public func redacting(_ secrets: [String]) -> GraphErrorDetails {
        var copy = self
        copy.type = type.map { Redaction.redacting(secrets, in: $0) }
        copy.traceID = traceID.map { Redaction.redacting(secrets, in: $0) }
        return copy
    }
}

/// The permissions the person declined when a permission request got none of them: attached
/// to the `userCancelled` error that ``FacebookSession`` throws then.
public struct DeclinedPermissions: ProviderErrorDetails, Hashable {
    /// The declined permissions, sorted.
    public var declined: [String]

    /// Creates the details.
    public init(_ declined: [String]) { self.declined = declined }

    public var json: JSONValue { .object(["declined": .array(declined.map(JSONValue.string))]) }

    /// The same details: permission names are not secrets.
    public func redacting(_ secrets: [String]) -> DeclinedPermissions { self }
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
        let rule = Self.table.classifying(facts)

        var retryAfter: Duration?
        if rule.recoveryTactic == .retry || rule.recoveryTactic == .retryAfterBackoff {
            let regain = rule.category == .throttling ? usage?.estimatedTimeToRegainAccess : nil
            retryAfter = [regain, headers.retryAfter(now: Date())].compactMap { $0 }.max()
        }

        let traceID = graph.traceID ?? headers["x-fb-trace-id"].flatMap(GraphErrorBody.text)
        var error = AuthError(
            rule: rule, message: Self.developerMessage(status: status, graph: graph, rule: rule), provider: .facebook)
        if let serverMessage = graph.userMessage {
            error.userMessage = serverMessage
            error.shouldNotifyUser = true
        }
        error.userTitle = graph.userTitle ?? rule.userTitle
        error.code = graph.code
        error.subcode = graph.subcode
        error.httpStatus = status
        error.retryAfter = retryAfter
        error.body = graph.json
        error.attach(
            GraphErrorDetails(
                type: graph.type, traceID: traceID, isTransient: graph.isTransient, bodyKind: graph.kind,
                usage: usage))
        return error
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
    public var graphUsage: GraphUsage? { details(as: GraphErrorDetails.self)?.usage }

    /// What the body of the failed response looked like, for errors from ``FacebookErrorTaxonomy``.
    public var graphBodyKind: GraphErrorBody.Kind? {
        details(as: GraphErrorDetails.self)?.bodyKind
    }
}

import Foundation
import Sesame
import SesameEmulator

/// An error as Facebook's Graph API answers it: the `{"error": {...}}` envelope, the HTTP status
/// Facebook sends it with, and any headers that go with it.
///
/// Wording: where Facebook's own text is known (the reference's §3 and §4, and public reports of
/// real answers) it is used as is; the rest is marked "emulator wording" in <doc:ScenarioCatalogue>.
/// Clients must classify by `code` and `error_subcode`, never by `message`.
package struct GraphError: Error, Sendable, Hashable {
    package var message: String
    package var type: String = "OAuthException"
    package var code: Int
    package var subcode: Int?
    package var userTitle: String?
    package var userMessage: String?
    package var isTransient: Bool = false
    package var status: Int = 400
    package var headers: HTTPHeaders = [:]

    package init(
        message: String, type: String = "OAuthException", code: Int, subcode: Int? = nil, userTitle: String? = nil,
        userMessage: String? = nil, isTransient: Bool = false, status: Int = 400, headers: HTTPHeaders = [:]
    ) {
        self.message = message
        self.type = type
        self.code = code
        self.subcode = subcode
        self.userTitle = userTitle
        self.userMessage = userMessage
        self.isTransient = isTransient
        self.status = status
        self.headers = headers
    }

    /// The `error` object, with `fbtrace_id`.
    package func envelope(traceID: String) -> JSONValue {
        var error: [String: JSONValue] = [
            "message": .string(message),
            "type": .string(type),
            "code": .number(Double(code)),
            "is_transient": .bool(isTransient),
            "fbtrace_id": .string(traceID),
        ]
        if let subcode { error["error_subcode"] = .number(Double(subcode)) }
        if let userTitle { error["error_user_title"] = .string(userTitle) }
        if let userMessage { error["error_user_msg"] = .string(userMessage) }
        return .object(["error": .object(error)])
    }

    /// Whether Facebook adds `WWW-Authenticate` to this answer (token errors).
    var challengesToken: Bool { code == 190 || code == 102 }
}

// MARK: - The catalogue

extension GraphError {
    // Tokens ------------------------------------------------------------------------------------

    static let invalidToken = GraphError(
        message: "Invalid OAuth access token - Cannot parse access token", code: 190)

    static let activeTokenRequired = GraphError(
        message: "An active access token must be used to query information about the current user.", code: 2500)

    static let tokenRequired = GraphError(message: "An access token is required to request this resource.", code: 104)

    /// A token error (190): Facebook's "Error validating access token: " and what is wrong.
    private static func tokenInvalid(_ reason: String, subcode: Int? = nil) -> GraphError {
        GraphError(message: "Error validating access token: " + reason, code: 190, subcode: subcode)
    }

    static func appNotAuthorized(appID: String) -> GraphError {
        tokenInvalid("The user has not authorized application \(appID).", subcode: 458)
    }

    static let checkpointed = tokenInvalid(
        "You cannot access the app till you log in to www.facebook.com and follow the instructions given.",
        subcode: 459)

    static let passwordChanged = tokenInvalid(
        "The session has been invalidated because the user changed their password or Facebook has changed the "
            + "session for security reasons.", subcode: 460)

    static func sessionExpired(at expiry: Date, now: Date) -> GraphError {
        tokenInvalid(
            "Session has expired on \(facebookDate(expiry)). The current time is \(facebookDate(now)).", subcode: 463)
    }

    static let unconfirmedUser = tokenInvalid(
        "Sessions for the user are not allowed because the user is not a confirmed user.", subcode: 464)

    static let userLoggedOut = tokenInvalid(
        "This may be because the user logged out or may be due to a system error.", subcode: 467)

    static let invalidSession = tokenInvalid("The session is invalid.", subcode: 492)

    static let dataAccessExpired = tokenInvalid(
        "Data access for this app has expired. The person must log in again to renew it.")

    // Permissions and requests ------------------------------------------------------------------

    static let notAuthorizedToPublish = GraphError(
        message: "(#200) The user hasn't authorized the application to perform this action", code: 200, status: 403)

    static func permissionRequired(_ permission: String) -> GraphError {
        GraphError(
            message: "(#200) Requires \(permission) permission to manage the object", code: 200, status: 403)
    }

    static func unsupported(_ method: HTTPMethod, id: String) -> GraphError {
        GraphError(
            message: "Unsupported \(method.rawValue.lowercased()) request. Object with ID '\(id)' does not exist, "
                + "cannot be loaded due to missing permissions, or does not support this operation. Please read "
                + "the Graph API documentation at https://developers.facebook.com/docs/graph-api",
            type: "GraphMethodException", code: 100, subcode: 33)
    }

    static func unknownPath(_ components: String) -> GraphError {
        GraphError(message: "Unknown path components: \(components)", code: 2500)
    }

    static func unsupportedMethod(_ method: HTTPMethod) -> GraphError {
        GraphError(
            message: "Unsupported \(method.rawValue.lowercased()) request.", type: "GraphMethodException", code: 100)
    }

    /// A legacy request form, which apps created from 2026-11-04 cannot use (Graph API v27.0).
    /// The stored copies of Facebook's documents do not show the error Graph answers with; this
    /// is Graph's error for a deprecated feature, code 12 (`(#12) … is deprecated for versions …`,
    /// as real answers read). Emulator wording.
    static func legacyForm(_ form: String) -> GraphError {
        GraphError(
            message: "(#12) \(form) is deprecated: apps created since November 4, 2026 (Graph API v27.0) cannot use "
                + "it, on any version.", code: 12)
    }

    static func invalidParameter(_ text: String) -> GraphError {
        GraphError(message: "(#100) \(text)", code: 100)
    }

    static func nonexistingField(_ field: String, node: String) -> GraphError {
        GraphError(message: "(#100) Tried accessing nonexisting field (\(field)) on node type (\(node))", code: 100)
    }

    static let appTokenRequired = GraphError(
        message: "(#15) This method must be called with an app access_token.", code: 15)

    static let tooManyTestUsers = GraphError(message: "(#2900) Too many test accounts", code: 2900)

    static let missingMessage = GraphError(message: "(#100) Missing message or attachment", code: 100)

    // The OAuth endpoint ------------------------------------------------------------------------

    static let missingClientID = GraphError(message: "Missing client_id parameter.", code: 101)

    static let invalidClientID = GraphError(
        message: "Error validating application. Invalid application ID.", code: 101)

    static let invalidClientSecret = GraphError(message: "Error validating client secret.", code: 1)

    static let missingRedirectURI = GraphError(message: "Missing redirect_uri parameter.", code: 191)

    static let invalidCode = GraphError(message: "Invalid verification code format.", code: 100)

    static let codeExpired = GraphError(message: "This authorization code has expired.", code: 100, subcode: 36007)

    static let redirectMismatch = GraphError(
        message: "Error validating verification code. Please make sure your redirect_uri is identical to the one "
            + "you used in the OAuth dialog request", code: 100, subcode: 36008)

    static let codeUsed = GraphError(message: "This authorization code has been used.", code: 100, subcode: 36009)

    static let verifierMismatch = GraphError(
        message: "Invalid code_verifier: it does not match the code_challenge of the login request.", code: 100)

    static let verifierRequired = GraphError(
        message: "Missing code_verifier: the login request carried a code_challenge, so the exchange needs the "
            + "code_verifier (or the app secret).", code: 100)

    // Device login ------------------------------------------------------------------------------

    static let devicePending = GraphError(
        message: "This request requires the user to take a pending action", code: 31, subcode: 1_349_174,
        userTitle: "Device Login Authorization Pending",
        userMessage: "User has not yet authorized your application. Continue polling.")

    static let deviceSlowDown = GraphError(
        message: "User request limit reached", code: 17, subcode: 1_349_172,
        userTitle: "OAuth Device Excessive Polling",
        userMessage: "Your device is polling too frequently. Space your requests with a minium interval of 5 seconds.")

    static let deviceExpired = GraphError(
        message: "The session has expired", code: 463, subcode: 1_349_152, userTitle: "Activation Code Expired",
        userMessage: "The code you entered has expired. Please go back to your device for a new code and try again.")

    static let deviceDeclined = GraphError(
        message: "authorization_declined", code: 31, subcode: 1_349_173, userTitle: "Device Login Declined",
        userMessage: "The person declined to log in on this device.")

    // Server, throttling and the scenarios ------------------------------------------------------

    static let unknown = GraphError(message: "An unknown error has occurred.", code: 1, status: 500)

    static let temporary = GraphError(
        message: "An unexpected error has occurred. Please retry your request later.", code: 2, isTransient: true,
        status: 500)

    static let duplicatePost = GraphError(message: "(#506) Duplicate status message", code: 506)

    static let blockedWithUserMessage = GraphError(
        message: "(#368) The action attempted has been deemed abusive or is otherwise disallowed", code: 368,
        userTitle: "You're Temporarily Blocked",
        userMessage: "It looks like you were misusing this feature by going too fast. You've been temporarily "
            + "blocked from using it.")

    static func appThrottled(headers: HTTPHeaders) -> GraphError {
        GraphError(
            message: "(#4) Application request limit reached", code: 4, isTransient: true, headers: headers)
    }

    static func userThrottled(headers: HTTPHeaders) -> GraphError {
        GraphError(message: "(#17) User request limit reached", code: 17, isTransient: true, headers: headers)
    }

    static func pageThrottled(headers: HTTPHeaders) -> GraphError {
        GraphError(message: "(#32) Page request limit reached", code: 32, isTransient: true, headers: headers)
    }

    static func customRateLimited(headers: HTTPHeaders) -> GraphError {
        GraphError(
            message: "(#613) Calls to this api have exceeded the rate limit.", code: 613, isTransient: true,
            headers: headers)
    }

    // Admin -------------------------------------------------------------------------------------

    static func admin(_ text: String, status: Int = 400) -> GraphError {
        GraphError(message: text, type: "SesameAdminException", code: 100, status: status)
    }

    /// The way Facebook writes dates in token messages: `Tuesday, 09-Jan-24 10:00:00 PST` (here in UTC).
    static func facebookDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEEE, dd-MMM-yy HH:mm:ss 'UTC'"
        return formatter.string(from: date)
    }
}

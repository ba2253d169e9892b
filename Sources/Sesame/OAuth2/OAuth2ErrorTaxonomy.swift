import Foundation

/// How a described provider's errors are classified: the code read where
/// ``OAuth2Description/errors`` says, matched against the provider's own rows and then the base
/// rows every table extends (``ErrorRuleTable/base``); a `Retry-After` header becomes the
/// error's `retryAfter` on errors that ask to wait. It is total: an HTML page, an empty body or
/// broken JSON is classified by its status.
public struct OAuth2ErrorTaxonomy: ErrorTaxonomy {
    /// The provider the errors are reported for.
    public var provider: ProviderID
    /// The provider's name in messages.
    public var displayName: String
    /// Where the error code sits.
    public var format: OAuth2ErrorFormat
    /// The rows tried: the provider's own (which extend the base), or the base alone.
    public var table: ErrorRuleTable
    /// The wall clock, for `Retry-After` dates.
    public var now: @Sendable () -> Date

    /// The taxonomy of `described`.
    public init(_ described: OAuth2Description, now: @escaping @Sendable () -> Date = { Date() }) {
        provider = described.id
        displayName = described.displayName
        format = described.errors
        table = described.errorRows ?? .base
        self.now = now
    }

    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let json = body.count <= 1 << 20 ? JSONValue(parsing: body) : nil
        var error = self.error(
            code: format.code(in: json), description: format.errorDescription(in: json), status: status)
        error.httpStatus = status
        error.body = json
        if error.recoveryTactic == .retry || error.recoveryTactic == .retryAfterBackoff {
            error.retryAfter = headers.retryAfter(now: now())
        }
        return error
    }

    public func classifyLoginError(_ response: OAuthErrorResponse) -> AuthError {
        var error = self.error(code: response.error, description: response.errorDescription, status: nil)
        error.loginFailedReason = error.category == .userCancelled ? .userCancelled : .providerError
        return error
    }

    private func error(code: String?, description: String?, status: Int?) -> AuthError {
        let rule = table.classifying(ErrorFacts(error: code, status: status))
        var message = "\(displayName) answered"
        if let status { message += " HTTP \(status)" }
        if let code {
            message += " with error '\(Self.printable(code))'"
            if let description { message += ": \(Self.printable(description))" }
        }
        if !message.hasSuffix(".") { message += "." }
        return AuthError(rule: rule, message: message + " " + rule.meaning, provider: provider)
    }

    /// At most 200 printable characters of text from the provider, for messages.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200).map(Character.init))
    }
}

import Foundation
import Sesame

/// Classifies an Acme server's errors through the table in `AcmeErrors.json` (``table``), which
/// Sesame's `ErrorTableGeneratorPlugin` turns into Swift at build time.
///
/// It reads the RFC 6749 §5.2 JSON error body, then the HTTP status; a `Retry-After` header
/// becomes the error's `retryAfter` on errors that ask to wait. It is total: an HTML page, an
/// empty body or broken JSON is classified by its status.
public struct AcmeErrorTaxonomy: ErrorTaxonomy {
    /// The rows of `AcmeErrors.json`, in the order they are tried.
    public static var table: ErrorRuleTable { AcmeErrors.table }

    /// The wall clock, for `Retry-After` dates.
    public var now: @Sendable () -> Date

    /// Creates the taxonomy.
    public init(now: @escaping @Sendable () -> Date = { Date() }) { self.now = now }

    public var provider: ProviderID { .acme }

    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let json = body.count <= 1 << 20 ? JSONValue(parsing: body) : nil
        let oauth = OAuthErrorResponse(json: json)
        var error = self.error(oauth, status: status)
        error.httpStatus = status
        error.body = json
        if error.recoveryTactic == .retry || error.recoveryTactic == .retryAfterBackoff {
            error.retryAfter = headers.retryAfter(now: now())
        }
        return error
    }

    public func classifyLoginError(_ response: OAuthErrorResponse) -> AuthError {
        var error = self.error(response, status: nil)
        error.loginFailedReason = error.category == .userCancelled ? .userCancelled : .providerError
        return error
    }

    private func error(_ oauth: OAuthErrorResponse?, status: Int?) -> AuthError {
        let rule = Self.table.classifying(ErrorFacts(error: oauth?.error, status: status))
        var message = "Acme answered"
        if let status { message += " HTTP \(status)" }
        if let oauth {
            message += " with error '\(Self.printable(oauth.error))'"
            if let description = oauth.errorDescription { message += ": \(Self.printable(description))" }
        }
        if !message.hasSuffix(".") { message += "." }
        return AuthError(rule: rule, message: message + " " + rule.meaning, provider: .acme)
    }

    /// At most 200 printable characters of text from the server, for messages.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200).map(Character.init))
    }
}

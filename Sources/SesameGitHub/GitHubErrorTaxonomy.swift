import Foundation
import Sesame

/// What ``GitHubErrorTaxonomy`` read from a failed answer beyond the classification: attached
/// to its errors, read with `error.details(as: GitHubErrorDetails.self)`.
public struct GitHubErrorDetails: ProviderErrorDetails, Hashable {
    /// What the taxonomy read the error as (`bad_credentials`, `sso_required`, an OAuth error
    /// code...), when it read one: the `error` column of `GitHubErrors.json`.
    public var githubError: String?
    /// The SAML single sign-on authorisation URL from `X-GitHub-SSO`.
    public var ssoURL: String?
    /// The scopes the endpoint accepts, from `X-Accepted-OAuth-Scopes`.
    public var acceptedScopes: [String]?
    /// The scopes the token has, from `X-OAuth-Scopes`.
    public var grantedScopes: [String]?
    /// The epoch second at which the primary rate limit resets, from `x-ratelimit-reset`.
    public var rateLimitReset: Int?
    /// The `errors` array of a 422 answer (at most 20 entries).
    public var validationErrors: [JSONValue]?
    /// The `documentation_url` of the answer.
    public var documentationURL: String?

    /// Creates the details.
    public init(
        githubError: String? = nil, ssoURL: String? = nil, acceptedScopes: [String]? = nil,
        grantedScopes: [String]? = nil, rateLimitReset: Int? = nil, validationErrors: [JSONValue]? = nil,
        documentationURL: String? = nil
    ) {
        self.githubError = githubError
        self.ssoURL = ssoURL
        self.acceptedScopes = acceptedScopes
        self.grantedScopes = grantedScopes
        self.rateLimitReset = rateLimitReset
        self.validationErrors = validationErrors
        self.documentationURL = documentationURL
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = [:]
        object["githubError"] = githubError.map(JSONValue.string)
        object["ssoURL"] = ssoURL.map(JSONValue.string)
        object["acceptedScopes"] = acceptedScopes.map { .array($0.map(JSONValue.string)) }
        object["grantedScopes"] = grantedScopes.map { .array($0.map(JSONValue.string)) }
        object["rateLimitReset"] = rateLimitReset.map { .number(Double($0)) }
        object["validationErrors"] = validationErrors.map(JSONValue.array)
        object["documentationURL"] = documentationURL.map(JSONValue.string)
        return .object(object)
    }

    public func redacting(_ secrets: [String]) -> GitHubErrorDetails {
        func clean(_ text: String) -> String { Redaction.redacting(secrets, in: text) }
        var copy = self
        copy.githubError = githubError.map(clean)
        copy.ssoURL = ssoURL.map(clean)
        copy.acceptedScopes = acceptedScopes?.map(clean)
        copy.grantedScopes = grantedScopes?.map(clean)
        copy.validationErrors = validationErrors?.map { $0.redacting(secrets) }
        copy.documentationURL = documentationURL.map(clean)
        return copy
    }
}

/// Classifies GitHub's errors through the table in `GitHubErrors.json` (``table``), generated
/// into Swift at build time.
///
/// It reads what GitHub's documentation says to read: the status; `X-GitHub-SSO` (SAML SSO,
/// with the authorisation URL); `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (the
/// primary limit: wait until the reset); `retry-after` or a "secondary rate limit" message
/// (back off, at least a minute without a hint); "Resource not accessible" and
/// `X-Accepted-OAuth-Scopes` against `X-OAuth-Scopes` (a missing scope, named); a 422's
/// `errors`; and the OAuth `error` of device-flow and refresh answers. It is total: HTML
/// pages, empty bodies and broken JSON are classified by their status.
public struct GitHubErrorTaxonomy: ErrorTaxonomy {
    /// The host, for messages.
    public var host: GitHubHost
    /// The wall clock, for `x-ratelimit-reset` and `Retry-After` dates.
    public var now: @Sendable () -> Date

    /// The rows of `GitHubErrors.json`, in the order they are tried.
    public static var table: ErrorRuleTable { GitHubErrors.table }

    /// The wait after a secondary rate limit that came without a `retry-after` (GitHub: "at
    /// least one minute").
    public static let secondaryLimitDefaultWait: Duration = .seconds(60)

    /// Creates the taxonomy.
    public init(host: GitHubHost = .github, now: @escaping @Sendable () -> Date = { Date() }) {
        self.host = host
        self.now = now
    }

    public var provider: ProviderID { .github }

    /// What the taxonomy reads an answer as: the `error` column value, or `nil`.
    public static func errorIdentifier(status: Int, headers: HTTPHeaders, json: JSONValue?) -> String? {
        if let oauth = json?["error"]?.stringValue, !oauth.isEmpty { return oauth }
        let message = (json?["message"]?.stringValue ?? "").lowercased()
        switch status {
        case 401:
            return "bad_credentials"
        case 403, 404, 429:
            if status != 404, headers["X-GitHub-SSO"] != nil { return "sso_required" }
            if status != 404, headers["x-ratelimit-remaining"]?.trimmingCharacters(in: .whitespaces) == "0" {
                return "primary_rate_limit"
            }
            if status != 404, headers["retry-after"] != nil || message.contains("secondary rate limit") {
                return "secondary_rate_limit"
            }
            if status == 429 { return nil }
            if message.contains("resource not accessible") { return "resource_not_accessible" }
            let accepted = GitHubText.scopes(headers["X-Accepted-OAuth-Scopes"])
            if !accepted.isEmpty, let grantedHeader = headers["X-OAuth-Scopes"] {
                let granted = Set(GitHubText.scopes(grantedHeader))
                if !accepted.contains(where: { granted.contains($0) || GitHubScopes.implied(by: granted).contains($0) })
                {
                    return "missing_scope"
                }
            }
            return nil
        default:
            return nil
        }
    }

    /// Classifies a failed HTTP response (or a 200 that carries an OAuth `error`).
    public func classify(status: Int, headers: HTTPHeaders, body: Data) -> AuthError {
        let json = body.count <= 1 << 20 ? JSONValue(parsing: body) : nil
        let identifier = Self.errorIdentifier(status: status, headers: headers, json: json)
        let rule = Self.table.classifying(ErrorFacts(error: identifier, status: status))
        var details = GitHubErrorDetails(githubError: identifier.map(GitHubText.printable))
        let accepted = GitHubText.scopes(headers["X-Accepted-OAuth-Scopes"])
        let granted = GitHubText.scopes(headers["X-OAuth-Scopes"])
        if !accepted.isEmpty { details.acceptedScopes = accepted }
        if headers["X-OAuth-Scopes"] != nil { details.grantedScopes = granted }
        details.documentationURL = json?["documentation_url"]?.stringValue.map(GitHubText.printable)

        let githubMessage = (json?["message"]?.stringValue ?? json?["error_description"]?.stringValue).map(
            GitHubText.printable)
        var message = "\(host.isGitHubDotCom ? "GitHub" : "GitHub (\(host.hostname))") answered HTTP \(status)"
        if let githubMessage, !githubMessage.isEmpty { message += ": \(githubMessage)" }
        if !message.hasSuffix(".") { message += "." }
        var userMessage = rule.userMessage
        var retryAfter: Duration?
        var afterMeaning = ""

        switch identifier {
        case "sso_required":
            let url = Self.ssoURL(headers["X-GitHub-SSO"] ?? "")
            if let url {
                details.ssoURL = url
                message += " Authorise the token for the organisation at \(url), then try again."
                userMessage = (userMessage ?? "") + " Open \(url) to authorise it, then try again."
            } else {
                message +=
                    " The organisation requires SAML single sign-on; authorise the token for it in GitHub's "
                    + "settings (Settings → Applications, or the token's \"Configure SSO\"), then try again."
            }
        case "primary_rate_limit":
            let reset = headers["x-ratelimit-reset"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            // Seconds until the reset, at least 1; a reset 10 million seconds (16 weeks) or more
            // away is no answer GitHub gives, and is treated as none.
            let untilReset = reset.map {
                Date(timeIntervalSince1970: TimeInterval($0)).timeIntervalSince(now()).rounded(.up)
            }
            // Said after the rule's meaning, which already says that the limit is used up.
            if let reset, let untilReset, untilReset < 10_000_000 {
                details.rateLimitReset = reset
                let seconds = Int(max(1, untilReset))
                retryAfter = .seconds(seconds)
                afterMeaning =
                    untilReset >= 1
                    ? " It resets in \(Duration.seconds(seconds).formattedSeconds) (x-ratelimit-reset \(reset))."
                    : " Its reset time (x-ratelimit-reset \(reset)) has passed by this machine's clock, so the next "
                        + "call should succeed."
            } else {
                retryAfter = Self.secondaryLimitDefaultWait
            }
        case "secondary_rate_limit":
            retryAfter = headers.retryAfter(now: now(), shortest: 0) ?? Self.secondaryLimitDefaultWait
            message += " A secondary rate limit was hit; wait \(retryAfter!.formattedSeconds) before trying again."
        case "resource_not_accessible", "missing_scope":
            let implied = GitHubScopes.implied(by: Set(granted))
            let missing = accepted.filter { !granted.contains($0) && !implied.contains($0) }
            if !missing.isEmpty {
                let names = missing.map { "'\($0)'" }.joined(separator: " or ")
                message +=
                    " The token needs the scope \(names) (X-Accepted-OAuth-Scopes); it has "
                    + (granted.isEmpty ? "none" : granted.map { "'\($0)'" }.joined(separator: ", "))
                    + ". Log in again asking for it."
                userMessage =
                    "This needs the GitHub permission \(names), which your sign-in does not have. Sign in "
                    + "again and allow it."
            } else {
                message +=
                    " The token (or the app) lacks a permission this endpoint needs; for a fine-grained token "
                    + "or a GitHub App, grant it in the token's or app's settings."
            }
        case "bad_credentials":
            message += " Log in again (the token was revoked, expired or is not valid)."
        default:
            if status == 422 {
                let errors = json?["errors"]?.arrayValue ?? []
                if !errors.isEmpty {
                    details.validationErrors = Array(errors.prefix(20))
                    message += " Errors: " + errors.prefix(10).map(Self.validationText).joined(separator: "; ") + "."
                }
            } else if (500...599).contains(status) {
                retryAfter = headers.retryAfter(now: now(), shortest: 0)
            } else if status == 429 {
                retryAfter = headers.retryAfter(now: now(), shortest: 0)
            }
        }
        message += " " + rule.meaning + afterMeaning
        var error = AuthError(rule: rule, message: message, provider: .github)
        error.userMessage = userMessage
        error.httpStatus = status
        error.retryAfter = retryAfter
        error.body = json
        error.attach(details)
        return error
    }

    /// Classifies an OAuth error of the device flow or of a refresh (sent with HTTP 200).
    public func classifyLoginError(_ error: OAuthErrorResponse) -> AuthError {
        let rule = Self.table.classifying(ErrorFacts(error: error.error))
        var message = "GitHub answered the login with '\(GitHubText.printable(error.error))'"
        if let description = error.errorDescription { message += ": \(GitHubText.printable(description))" }
        if !message.hasSuffix(".") { message += "." }
        message += " " + rule.meaning
        var classified = AuthError(rule: rule, message: message, provider: .github)
        classified.loginFailedReason =
            rule.category == .userCancelled
            ? .userCancelled : error.error == "expired_token" ? .codeExpired : .providerError
        classified.attach(GitHubErrorDetails(githubError: GitHubText.printable(error.error)))
        return classified
    }

    /// The `url=` of an `X-GitHub-SSO: required; url=https://...` header, when it is an https URL.
    public static func ssoURL(_ header: String) -> String? {
        for part in header.split(separator: ";") {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard trimmed.lowercased().hasPrefix("url=") else { continue }
            let url = String(trimmed.dropFirst(4))
            guard let parsed = URL(string: url), parsed.scheme?.lowercased() == "https" || parsed.host == "127.0.0.1"
            else { return nil }
            return GitHubText.printable(url)
        }
        return nil
    }

    /// One entry of a 422's `errors`: `Repository.name: already_exists (name already exists)`.
    static func validationText(_ entry: JSONValue) -> String {
        if let text = entry.stringValue { return GitHubText.printable(text) }
        var text = [entry["resource"]?.stringValue, entry["field"]?.stringValue].compactMap { $0 }.joined(
            separator: ".")
        if let code = entry["code"]?.stringValue { text += text.isEmpty ? code : ": \(code)" }
        if let message = entry["message"]?.stringValue { text += text.isEmpty ? message : " (\(message))" }
        return GitHubText.printable(text.isEmpty ? entry.jsonText : text)
    }
}

/// GitHub's scope hierarchy, so a token with `repo` is not said to lack `public_repo`.
public enum GitHubScopes {
    /// Scopes that `granted` include without naming them (`repo` includes `public_repo`...).
    public static func implied(by granted: Set<String>) -> Set<String> {
        let children: [String: [String]] = [
            "repo": ["repo:status", "repo_deployment", "public_repo", "repo:invite", "security_events"],
            "admin:org": ["write:org", "read:org", "manage_runners:org"],
            "write:org": ["read:org"],
            "admin:public_key": ["write:public_key", "read:public_key"],
            "write:public_key": ["read:public_key"],
            "admin:repo_hook": ["write:repo_hook", "read:repo_hook"],
            "write:repo_hook": ["read:repo_hook"],
            "admin:gpg_key": ["write:gpg_key", "read:gpg_key"],
            "write:gpg_key": ["read:gpg_key"],
            "user": ["read:user", "user:email", "user:follow"],
            "write:packages": ["read:packages"],
            "project": ["read:project"],
            "write:discussion": ["read:discussion"],
        ]
        var result = Set<String>()
        var queue = Array(granted)
        while let scope = queue.popLast() {
            for child in children[scope] ?? [] where result.insert(child).inserted { queue.append(child) }
        }
        return result
    }
}

import Foundation

/// What a resource asked for when it found a token not enough: more scopes (RFC 6750 §3.1,
/// `insufficient_scope`) or a stronger or more recent login (RFC 9470,
/// `insufficient_user_authentication` with `acr_values` and `max_age`).
///
/// Read from the answer's `WWW-Authenticate: Bearer` challenge, and attached to the
/// ``ErrorCategory/permissions`` error that ``Session/send(_:taxonomy:authorization:allowLoginUI:loginUI:exchange:)``
/// throws when it cannot step up:
///
/// ```swift
/// } catch let error as AuthError {
///     if let needed = error.details(as: StepUpRequirement.self) { print(needed.scopes) }
/// }
/// ```
public struct StepUpRequirement: ProviderErrorDetails, Hashable {
    /// RFC 6750's `insufficient_scope`: the token lacks a scope the resource needs.
    public static let insufficientScope = "insufficient_scope"
    /// RFC 9470's `insufficient_user_authentication`: the login is not strong or recent enough.
    public static let insufficientUserAuthentication = "insufficient_user_authentication"

    /// The challenge's `error`: ``insufficientScope`` or ``insufficientUserAuthentication``.
    public var error: String
    /// The scopes the resource needs (the challenge's `scope`, split at spaces), in its order.
    public var scopes: [String]
    /// The authentication context classes the resource accepts (`acr_values`), in its order.
    public var acrValues: [String]
    /// The most seconds since the person last authenticated that the resource accepts (`max_age`).
    public var maxAge: Int?
    /// The challenge's `error_description`, when it had one.
    public var errorDescription: String?

    /// Creates a requirement.
    public init(
        error: String, scopes: [String] = [], acrValues: [String] = [], maxAge: Int? = nil,
        errorDescription: String? = nil
    ) {
        self.error = error
        self.scopes = scopes
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.errorDescription = errorDescription
    }

    /// The requirement `response` states in a `Bearer` (or `DPoP`) challenge of its
    /// `WWW-Authenticate` headers, or `nil` when it states none (a success, another error).
    public init?(_ response: HTTPResponse) {
        guard !response.isSuccess else { return nil }
        self.init(challenges: AuthenticationChallenge.parse(response.headers))
    }

    /// The requirement the first `Bearer` or `DPoP` challenge with one of the two errors states.
    public init?(challenges: [AuthenticationChallenge]) {
        let kinds = [Self.insufficientScope, Self.insufficientUserAuthentication]
        guard
            let challenge = challenges.first(where: {
                ($0.isScheme("Bearer") || $0.isScheme("DPoP")) && kinds.contains($0["error"] ?? "")
            }), let error = challenge["error"]
        else { return nil }
        func words(_ name: String) -> [String] { (challenge[name] ?? "").split(separator: " ").map(String.init) }
        self.init(
            error: error, scopes: words("scope"), acrValues: words("acr_values"),
            maxAge: challenge["max_age"].flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil },
            errorDescription: challenge["error_description"])
    }

    /// The authorization-request parameters that ask for what the resource needs beyond scopes:
    /// `acr_values` and `max_age` (OpenID Connect Core §3.1.2.1), for
    /// ``LoginRequest/Options/authorizationParameters``.
    public var authorizationParameters: [String: String] {
        var parameters: [String: String] = [:]
        if !acrValues.isEmpty { parameters["acr_values"] = acrValues.joined(separator: " ") }
        if let maxAge { parameters["max_age"] = String(maxAge) }
        return parameters
    }

    /// What is needed, in words: "the scopes calendar, contacts", "a login within 300 s".
    public var needs: String {
        var parts: [String] = []
        if !scopes.isEmpty {
            parts.append("the scope\(scopes.count == 1 ? "" : "s") \(scopes.joined(separator: ", "))")
        }
        if !acrValues.isEmpty { parts.append("a login of class \(acrValues.joined(separator: " or "))") }
        if let maxAge { parts.append("a login within the last \(maxAge) s") }
        if parts.isEmpty {
            parts.append(error == Self.insufficientScope ? "more scopes (it did not say which)" : "a stronger login")
        }
        return parts.joined(separator: " and ")
    }

    public var summary: String? { "needs \(needs)" }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "error": .string(error), "scopes": .array(scopes.map { .string($0) }),
            "acrValues": .array(acrValues.map { .string($0) }),
        ]
        if let maxAge { object["maxAge"] = .number(Double(maxAge)) }
        if let errorDescription { object["errorDescription"] = .string(errorDescription) }
        return .object(object)
    }

    public func redacting(_ secrets: [String]) -> StepUpRequirement {
        var copy = self
        copy.errorDescription = errorDescription.map { Redaction.redacting(secrets, in: $0) }
        return copy
    }
}

extension AuthError {
    /// A resource's answer that the token is not enough (``StepUpRequirement``): a
    /// ``ErrorCategory/permissions`` error whose message names what is needed, with the
    /// requirement attached (``details(as:)``).
    ///
    /// - Parameters:
    ///   - requirement: what the resource asked for.
    ///   - httpStatus: the answer's status.
    ///   - provider: the provider of the login.
    public static func stepUpNeeded(
        _ requirement: StepUpRequirement, httpStatus: Int?, provider: ProviderID?
    ) -> AuthError {
        let status = httpStatus.map { "HTTP \($0) " } ?? ""
        let advice =
            requirement.error == StepUpRequirement.insufficientScope
            ? "Ask the person for them (re-authorize with them added), then try again."
            : "Ask the person to log in again as it says, then try again."
        return AuthError(
            category: .permissions,
            message: "The resource answered \(status)\(requirement.error): it needs \(requirement.needs), which this "
                + "login does not have. \(advice)",
            httpStatus: httpStatus, recoveryTactic: .requestPermissions, closesSession: false, provider: provider,
            details: [requirement])
    }
}

/// The key of ``LoginRequest/Options/authorizationParameters``.
enum AuthorizationParametersKey: LoginOptionKey {
    static let defaultValue: [String: String] = [:]
}

extension LoginRequest.Options {
    /// Extra parameters for this login's authorization request, such as RFC 9470's step-up
    /// `acr_values` and `max_age`; browser dialects add them to the authorization URL, after their
    /// own (``OAuth2BrowserDialect``, OpenID's).
    public var authorizationParameters: [String: String] {
        get { self[AuthorizationParametersKey.self] }
        set { self[AuthorizationParametersKey.self] = newValue }
    }

    /// ``authorizationParameters`` in a stable order (by name), for an authorization URL.
    package var authorizationParameterItems: [(String, String)] {
        authorizationParameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

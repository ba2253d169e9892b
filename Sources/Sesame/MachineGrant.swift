import Foundation

/// How a login with no person in it was obtained, and so how it is renewed: by making the same
/// grant again when it is due, since no refresh token comes with it.
///
/// Recorded with the login (``AccessToken/machineGrant``), so that any later process renews it
/// the same way; it holds no secret: the client authenticates afresh each time (its secret or its
/// private key come from its settings).
///
/// ```swift
/// var token = try await grant.send(form: MachineGrant.clientCredentials.form(scopes: ["jobs"]))
/// token.machineGrant = .clientCredentials
/// ```
public enum MachineGrant: Sendable, Hashable {
    /// The client credentials grant (RFC 6749 §4.4): the client acting for itself.
    case clientCredentials
    /// The token exchange (RFC 8693): a workload's identity token from `source`, of
    /// `subjectTokenType` (``jwtTokenType`` or ``idTokenType``), asked for `audience` when the
    /// source takes one (GitHub Actions), exchanged for the provider's access token.
    case tokenExchange(source: SubjectTokenSource, subjectTokenType: String, audience: String?)

    /// The token exchange's `grant_type`.
    public static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// `urn:ietf:params:oauth:token-type:jwt`: a subject token that is a JWT.
    public static let jwtTokenType = "urn:ietf:params:oauth:token-type:jwt"
    /// `urn:ietf:params:oauth:token-type:id_token`: a subject token that is an OpenID ID token.
    public static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"

    /// The grant's `grant_type`.
    public var grantType: String {
        switch self {
        case .clientCredentials: "client_credentials"
        case .tokenExchange: Self.tokenExchangeGrantType
        }
    }

    /// The token request's form for `scopes` (none: the client's default), with the subject
    /// token of a token exchange, without client authentication, which the provider adds.
    public func form(scopes: [String], subjectToken: String? = nil) -> [(String, String)] {
        var form = [("grant_type", grantType)]
        if case .tokenExchange(_, let type, _) = self {
            form += [
                ("subject_token", subjectToken ?? ""), ("subject_token_type", type),
                ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ]
        }
        if !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        return form
    }

    /// A fresh subject token for a token exchange; `nil` for a grant that takes none.
    ///
    /// - Throws: what ``SubjectTokenSource/read(audience:environment:transport:)`` throws.
    public func subjectToken(environment: [String: String], transport: any HTTPTransport) async throws -> String? {
        guard case .tokenExchange(let source, _, let audience) = self else { return nil }
        return try await source.read(audience: audience, environment: environment, transport: transport)
    }

    /// The grant as stored with a login: where the subject token comes from, never the token.
    var json: JSONValue {
        var members: [String: JSONValue] = ["grant_type": .string(grantType)]
        if case .tokenExchange(let source, let type, let audience) = self {
            members["subject_token_source"] = source.json
            members["subject_token_type"] = .string(type)
            if let audience { members["audience"] = .string(audience) }
        }
        return .object(members)
    }

    /// The grant stored as `json`; `nil` for one this version does not know.
    init?(json: JSONValue) {
        switch json["grant_type"]?.stringValue {
        case "client_credentials": self = .clientCredentials
        case Self.tokenExchangeGrantType:
            guard let source = SubjectTokenSource(json: json["subject_token_source"]) else { return nil }
            self = .tokenExchange(
                source: source, subjectTokenType: json["subject_token_type"]?.stringValue ?? Self.jwtTokenType,
                audience: json["audience"]?.stringValue)
        default: return nil
        }
    }
}

extension AccessToken {
    /// The ``providerExtras`` name under which a login records its ``machineGrant``.
    package static let machineGrantExtra = "machine_grant"

    /// The grant that made this login when no person took part (``MachineGrant``), recorded so
    /// that it is renewed by making the grant again; `nil` for a person's login.
    public var machineGrant: MachineGrant? {
        get { providerExtras[Self.machineGrantExtra].flatMap(MachineGrant.init(json:)) }
        set { providerExtras[Self.machineGrantExtra] = newValue?.json }
    }
}

extension TokenRenewer {
    /// This renewer, and for a login made by a ``MachineGrant``, that grant made again: such a
    /// login can always be renewed (the client authenticates afresh), under the core's one
    /// renewal path, so concurrent callers and processes (and a fleet's machines, with
    /// PostgreSQL's locking) make one grant between them.
    ///
    /// - Parameter grant: makes `grant` again for the login given and returns the new token
    ///   (with its ``AccessToken/machineGrant`` set).
    public func renewingMachineLogins(
        _ grant: @escaping @Sendable (_ current: AccessToken, _ grant: MachineGrant) async throws -> AccessToken
    ) -> TokenRenewer {
        let base = self
        return TokenRenewer(
            maximumLeeway: maximumLeeway,
            canRenew: { token, now in token.machineGrant != nil || base.canRenew(token, now) },
            renew: { token in
                if let machine = token.machineGrant { return try await grant(token, machine) }
                return try await base.renew(token)
            })
    }
}

import Foundation

/// How a client proves who it is, by the name discovery uses
/// (`token_endpoint_auth_methods_supported`, RFC 6749 §2.3.1, OpenID Connect Core §9).
///
/// A description names the method; ``ClientAuthentication`` is the method with its credential.
public struct ClientAuthenticationMethod: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The name discovery uses.
    public let rawValue: String
    /// Creates a method from its discovery name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The client id and secret in an HTTP Basic `Authorization` header: the default when
    /// discovery names no method.
    public static let clientSecretBasic = ClientAuthenticationMethod(rawValue: "client_secret_basic")
    /// The client id and secret in the form body.
    public static let clientSecretPost = ClientAuthenticationMethod(rawValue: "client_secret_post")
    /// The client id alone, in the form body: a public client.
    public static let none = ClientAuthenticationMethod(rawValue: "none")
    public var description: String { rawValue }

    /// The method a client uses with a provider: `none` without a secret; with one,
    /// `client_secret_basic` when the provider supports it or names no method (Discovery §3's
    /// default), else `client_secret_post` when it supports that.
    public static func chosen(hasSecret: Bool, supported: [String]?) -> ClientAuthenticationMethod {
        guard hasSecret else { return .none }
        let supported = supported ?? [clientSecretBasic.rawValue]
        if supported.contains(clientSecretBasic.rawValue) { return .clientSecretBasic }
        if supported.contains(clientSecretPost.rawValue) { return .clientSecretPost }
        return .clientSecretBasic
    }
}

/// The one hook every request to a token endpoint goes through (the code exchange, the refresh
/// grant, device login's start and polls, revocation): it adds what the client's authentication
/// needs to the form and headers.
///
/// ```swift
/// var request = try ClientAuthentication.clientSecretBasic(secret)
///     .formRequest(tokenEndpoint, [("grant_type", "refresh_token"), ("refresh_token", token)],
///                  clientID: "desktop-app", tokenEndpoint: tokenEndpoint)
/// ```
///
/// Its ``description`` names the method, never the credential.
public struct ClientAuthentication: Sendable, CustomStringConvertible, CustomReflectable {
    /// What one request needs authenticated, handed to a method made with
    /// ``init(method:authenticate:)``.
    public struct Request: Sendable {
        /// The form's fields, without any client credential (`client_id`, `client_secret`).
        public var form: [(String, String)]
        /// The request's headers.
        public var headers: HTTPHeaders
        /// The client id.
        public let clientID: String
        /// The provider's token endpoint: the audience of a signed client assertion, also for a
        /// revocation or device request sent elsewhere.
        public let tokenEndpoint: URL
    }

    private enum Kind: Sendable {
        case none
        case basic(ClientSecret)
        case post(ClientSecret)
        case custom(@Sendable (inout Request) throws -> Void)
    }

    /// The method, by its discovery name.
    public let method: ClientAuthenticationMethod
    private let kind: Kind

    private init(_ method: ClientAuthenticationMethod, _ kind: Kind) {
        self.method = method
        self.kind = kind
    }

    /// A public client: `client_id` in the body, nothing else (RFC 6749 §2.3, RFC 8252).
    public static let none = ClientAuthentication(.none, .none)

    /// `client_secret_basic`: the client id and secret, each form-encoded first as RFC 6749
    /// §2.3.1 says, in an HTTP Basic `Authorization` header.
    public static func clientSecretBasic(_ secret: ClientSecret) -> ClientAuthentication {
        ClientAuthentication(.clientSecretBasic, .basic(secret))
    }

    /// `client_secret_post`: `client_id` and `client_secret` in the form body.
    public static func clientSecretPost(_ secret: ClientSecret) -> ClientAuthentication {
        ClientAuthentication(.clientSecretPost, .post(secret))
    }

    /// A method Sesame does not spell out (a signed assertion, say): `authenticate` adds what it
    /// needs to each request. It must not log the credential it adds.
    public init(method: ClientAuthenticationMethod, authenticate: @escaping @Sendable (inout Request) throws -> Void) {
        self.init(method, .custom(authenticate))
    }

    /// The authentication by `method` with `secret`: `none` without a secret; a secret with
    /// `none` (or a method this initialiser does not know) is sent in the body.
    public init(_ method: ClientAuthenticationMethod, secret: ClientSecret?) {
        switch (method, secret) {
        case (_, nil): self = .none
        case (.clientSecretBasic, let secret?): self = .clientSecretBasic(secret)
        case (_, let secret?): self = .clientSecretPost(secret)
        }
    }

    /// Adds the client's authentication to a request's `form` and `headers`: any `client_id` or
    /// `client_secret` already in the form is replaced.
    ///
    /// - Throws: what a custom method throws (a key that cannot sign, say).
    public func apply(
        form: inout [(String, String)], headers: inout HTTPHeaders, clientID: String, tokenEndpoint: URL
    ) throws {
        var request = Request(
            form: form.filter { $0.0 != "client_id" && $0.0 != "client_secret" }, headers: headers,
            clientID: clientID, tokenEndpoint: tokenEndpoint)
        switch kind {
        case .none:
            request.form.append(("client_id", clientID))
        case .basic(let secret):
            let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret.value)
            request.headers["Authorization"] = "Basic " + Data(pair.utf8).base64EncodedString()
        case .post(let secret):
            request.form.append(("client_id", clientID))
            request.form.append(("client_secret", secret.value))
        case .custom(let authenticate):
            try authenticate(&request)
        }
        form = request.form
        headers = request.headers
    }

    /// A form POST of `form` to `url`, asking for JSON, with the client's authentication added.
    ///
    /// - Throws: what ``apply(form:headers:clientID:tokenEndpoint:)`` throws.
    public func formRequest(
        _ url: URL, _ form: [(String, String)], clientID: String, tokenEndpoint: URL? = nil
    ) throws -> HTTPRequest {
        var form = form
        var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"]
        try apply(form: &form, headers: &headers, clientID: clientID, tokenEndpoint: tokenEndpoint ?? url)
        return HTTPRequest(method: .post, url: url, headers: headers, body: Data(FormEncoding.encode(form).utf8))
    }

    public var description: String { "ClientAuthentication(\(method))" }
    public var customMirror: Mirror { Mirror(self, children: ["method": method.rawValue]) }
}

import Foundation

/// Where a workload's identity token comes from, for the token exchange (RFC 8693): the place a
/// CI system or a cluster puts one. Recorded with the login instead of the token itself, so that
/// each renewal exchanges a fresh one and no secret is stored.
///
/// ```swift
/// let source = try SubjectTokenSource(parsing: "github-actions")   // or "kubernetes", "file:/run/token"
/// let jwt = try await source.read(audience: "sesame", environment: ProcessInfo.processInfo.environment,
///                                  transport: CurlTransport())
/// ```
public enum SubjectTokenSource: Sendable, Hashable, CustomStringConvertible {
    /// GitHub Actions' OIDC token: asked of `ACTIONS_ID_TOKEN_REQUEST_URL` with the bearer
    /// `ACTIONS_ID_TOKEN_REQUEST_TOKEN` (a job with `permissions: id-token: write`).
    case githubActions
    /// A file holding the token, read afresh each time: a Kubernetes projected service-account
    /// token (``kubernetesTokenPath``), or any file a platform rotates.
    case file(String)

    /// Where Kubernetes mounts a pod's service-account token.
    public static let kubernetesTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

    /// The source a setting names: `github-actions`, `kubernetes` (its token file) or
    /// `file:PATH`.
    ///
    /// - Throws: ``AuthError`` (`invalid`) naming the three forms, for anything else.
    public init(parsing text: String) throws {
        switch text {
        case "github-actions": self = .githubActions
        case "kubernetes": self = .file(Self.kubernetesTokenPath)
        case let path where path.hasPrefix("file:") && path.count > 5: self = .file(String(path.dropFirst(5)))
        default:
            throw AuthError(
                category: .invalid,
                message: "'\(text)' is not a subject token source; use github-actions, kubernetes, or file:PATH.",
                recoveryTactic: .showMessage)
        }
    }

    /// The source as a setting writes it.
    public var description: String {
        switch self {
        case .githubActions: "github-actions"
        case .file(let path): path == Self.kubernetesTokenPath ? "kubernetes" : "file:\(path)"
        }
    }

    /// A fresh subject token.
    ///
    /// - Parameters:
    ///   - audience: the audience GitHub Actions is asked to put in the token (`audience=`);
    ///     `nil` takes its default (the repository owner's URL).
    ///   - environment: where GitHub Actions' two variables are read.
    ///   - transport: what asks GitHub Actions.
    /// - Throws: ``AuthError`` (`invalid`) naming the variable or file that is missing or empty,
    ///   or the answer that holds no token; never the token.
    public func read(
        audience: String?, environment: [String: String], transport: any HTTPTransport
    ) async throws -> String {
        switch self {
        case .file(let path):
            let text = await onOwnThread { try? String(contentsOfFile: path, encoding: .utf8) }
            guard let token = text?.trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
                throw Self.problem(
                    "The subject token file \(path) is missing, unreadable or empty; check the token's mount or "
                        + "the subject_token setting.")
            }
            return token
        case .githubActions:
            guard let address = environment["ACTIONS_ID_TOKEN_REQUEST_URL"], !address.isEmpty,
                let bearer = environment["ACTIONS_ID_TOKEN_REQUEST_TOKEN"], !bearer.isEmpty
            else {
                throw Self.problem(
                    "ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not both set: run in a "
                        + "GitHub Actions job with 'permissions: id-token: write'.")
            }
            let text = audience.map { OAuth.appendingQuery([("audience", $0)], toText: address) } ?? address
            guard let url = URL(string: text), url.host != nil else {
                throw Self.problem("ACTIONS_ID_TOKEN_REQUEST_URL is not a URL.")
            }
            let response = try await transport.send(
                HTTPRequest(url: url, headers: ["Authorization": "Bearer \(bearer)", "Accept": "application/json"]))
            guard response.isSuccess, let token = response.json?["value"]?.stringValue, !token.isEmpty else {
                throw Self.problem(
                    "GitHub Actions did not hand out an ID token (HTTP \(response.status)); check the job's "
                        + "'permissions: id-token: write'.")
            }
            return token
        }
    }

    private static func problem(_ message: String) -> AuthError {
        AuthError(category: .invalid, message: message, recoveryTactic: .showMessage)
    }

    var json: JSONValue {
        switch self {
        case .githubActions: .object(["kind": .string("github-actions")])
        case .file(let path): .object(["kind": .string("file"), "path": .string(path)])
        }
    }

    init?(json: JSONValue?) {
        switch json?["kind"]?.stringValue {
        case "github-actions": self = .githubActions
        case "file":
            guard let path = json?["path"]?.stringValue else { return nil }
            self = .file(path)
        default: return nil
        }
    }
}

import Foundation
import Sesame

extension ProviderID {
    /// GitHub, on github.com or on a GitHub Enterprise Server host.
    public static let github: ProviderID = "github"
}

/// Where one GitHub lives: its OAuth pages and its REST API.
///
/// github.com keeps them on two hosts (`https://github.com/login/...`,
/// `https://api.github.com`); a GitHub Enterprise Server keeps both on one
/// (`https://HOST/login/...`, `https://HOST/api/v3`).
public struct GitHubHost: Sendable, Hashable, CustomStringConvertible {
    /// The host name logins are kept under and `git` asks about: `github.com`, or the
    /// Enterprise Server's name (with `:port` when it has one).
    public var hostname: String
    /// The base of the OAuth pages (`/login/device/code`, `/login/oauth/access_token`).
    public var oauthBaseURL: URL
    /// The base of the REST API (`/user`, `/user/repos`).
    public var apiBaseURL: URL

    /// github.com.
    public static let github = GitHubHost(
        hostname: "github.com", oauthBaseURL: URL(string: "https://github.com")!,
        apiBaseURL: URL(string: "https://api.github.com")!)

    /// Creates a host from explicit base URLs (a test server, a proxy).
    public init(hostname: String, oauthBaseURL: URL, apiBaseURL: URL) {
        self.hostname = hostname.lowercased()
        self.oauthBaseURL = oauthBaseURL
        self.apiBaseURL = apiBaseURL
    }

    /// The host named by a `--hostname` setting: `github.com` (or `api.github.com`) is
    /// github.com; any other name is a GitHub Enterprise Server at `https://NAME`.
    ///
    /// - Throws: `AuthError` (`invalid`) when `name` is not a host name: empty, with a scheme,
    ///   a path, spaces or other characters a host name cannot have.
    public init(hostname name: String) throws {
        var trimmed = name.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed.hasSuffix(":443") { trimmed.removeLast(4) }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-:[]")
        guard !trimmed.isEmpty, trimmed.count <= 253, trimmed.allSatisfy(allowed.contains),
            trimmed.first != ".", trimmed.first != "-", trimmed.first != ":",
            let base = URL(string: "https://\(trimmed)"), base.host != nil
        else {
            throw AuthError(
                category: .invalid,
                message: "'\(GitHubText.printable(name))' is not a GitHub host name. Give just the name, such as "
                    + "github.com or github.example.com (no https://, no path).",
                recoveryTactic: .showMessage, provider: .github)
        }
        if trimmed == "github.com" || trimmed == "api.github.com" {
            self = .github
            return
        }
        self.init(hostname: trimmed, oauthBaseURL: base, apiBaseURL: base.appendingPathComponent("api/v3"))
    }

    /// Whether this is github.com rather than an Enterprise Server.
    public var isGitHubDotCom: Bool { hostname == "github.com" }

    /// `POST` here to start a device login.
    public var deviceCodeURL: URL { oauthBaseURL.appendingPathComponent("login/device/code") }
    /// `POST` here to poll a device login and to refresh a token.
    public var accessTokenURL: URL { oauthBaseURL.appendingPathComponent("login/oauth/access_token") }

    /// The API URL of `path` (`user`, `/user/repos`).
    public func apiURL(_ path: String) -> URL {
        apiBaseURL.appendingPathComponent(String(path.drop { $0 == "/" }))
    }

    /// Whether `url` is on this host's API (same scheme, host and port, under the API path),
    /// so a token may be sent there.
    public func isAPIURL(_ url: URL) -> Bool {
        guard url.scheme?.lowercased() == apiBaseURL.scheme?.lowercased(),
            url.host?.lowercased() == apiBaseURL.host?.lowercased(), url.port == apiBaseURL.port
        else { return false }
        let base = apiBaseURL.path.hasSuffix("/") ? apiBaseURL.path : apiBaseURL.path + "/"
        return base == "/" || url.path.hasPrefix(base) || url.path + "/" == base
    }

    public var description: String { hostname }
}

/// The GitHub provider: one host, one OAuth app (or GitHub App) client id.
///
/// ```swift
/// let github = GitHubProvider(clientID: "Iv1.0123456789abcdef")   // github.com
/// let login = GitHubSession.deviceLogin(provider: github, transport: transport, presenter: presenter)
/// let session = GitHubSession(provider: github, transport: transport, store: store, loginUI: login)
/// try await session.open(allowLoginUI: true)
/// let me = try await session.client().user()
/// ```
///
/// Logins are stored under provider `github` with the **host name as the app id**
/// (``credentialAppID``), so github.com and each Enterprise Server keep their logins apart,
/// changing the OAuth app does not lose them, and `git`'s question "a login for host H?" is
/// one lookup.
public struct GitHubProvider: Sendable {
    /// Where GitHub is.
    public var host: GitHubHost
    /// The OAuth app's or GitHub App's client id (device flow and refresh).
    public var clientID: String
    /// The client secret, only for GitHub Apps whose user tokens are refreshed with one.
    public var clientSecret: ClientSecret?
    /// Scopes asked for when a login names none (OAuth apps; GitHub Apps ignore scopes).
    public var defaultScopes: [String]
    /// The error mapping.
    public var taxonomy: GitHubErrorTaxonomy
    /// The wall clock.
    public var now: @Sendable () -> Date

    /// The scopes `gh` asks for by default.
    public static let standardScopes = ["repo", "read:org", "gist"]

    /// Creates a provider.
    public init(
        host: GitHubHost = .github, clientID: String, clientSecret: ClientSecret? = nil,
        defaultScopes: [String] = GitHubProvider.standardScopes, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.host = host
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.defaultScopes = defaultScopes
        self.now = now
        self.taxonomy = GitHubErrorTaxonomy(host: host, now: now)
    }

    /// `text` as a client id, checked: 1 to 100 characters, ASCII letters, digits, `.`, `_`
    /// and `-` (GitHub's are `Iv1.` and 16 hex digits, or 20 characters such as `Ov23li…`).
    ///
    /// - Throws: `AuthError` (`invalid`) saying what is wrong and where to find the client id.
    public static func checkedClientID(_ text: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard !trimmed.isEmpty, trimmed.count <= 100, trimmed.allSatisfy(allowed.contains) else {
            throw AuthError(
                category: .invalid,
                message: "'\(GitHubText.printable(String(text.prefix(40))))' is not a GitHub client id. Copy the "
                    + "Client ID from the OAuth app's or GitHub App's settings page (GitHub → Settings → Developer "
                    + "settings); it looks like Iv1.0123456789abcdef.",
                recoveryTactic: .showMessage, provider: .github)
        }
        return trimmed
    }

    /// Checks that the host's API answers, without a token (`GET` of the API root, as
    /// `doctor` would): `nil` when it does, else the classified error saying why not.
    ///
    /// - Parameters:
    ///   - transport: what sends the request.
    ///   - timeout: how long to wait for the answer.
    public func probe(transport: any HTTPTransport, timeout: Duration = .seconds(30)) async -> AuthError? {
        do {
            let response = try await LoginHTTP.send(
                HTTPRequest(url: host.apiBaseURL, headers: GitHubClient.standardHeaders, timeout: timeout),
                through: transport, taxonomy: taxonomy)
            guard response.isSuccess else { return taxonomy.classify(response) }
            guard response.json?["current_user_url"] != nil else {
                return AuthError(
                    category: .invalid,
                    message: "\(host.apiBaseURL.absoluteString) answered, but not as GitHub's REST API does (no "
                        + "current_user_url). Check the host name.",
                    recoveryTactic: .showMessage, provider: .github)
            }
            return nil
        } catch let error as AuthError {
            return error
        } catch {
            return AuthError(
                category: .providerOther, message: "GitHub could not be reached: \(error)", provider: .github)
        }
    }

    /// The app id logins are stored under: the host name (see the type's discussion).
    public var credentialAppID: String { host.hostname }

    // MARK: Identity

    /// The provider id logins are stored under: `github`.
    public var id: ProviderID { .github }
    /// "GitHub", or "GitHub Enterprise (HOST)".
    public var displayName: String { host.isGitHubDotCom ? "GitHub" : "GitHub Enterprise (\(host.hostname))" }
    /// How GitHub's answers are classified.
    public var errorTaxonomy: any ErrorTaxonomy { taxonomy }

    /// How a refresh tells GitHub who the client is: the client id in the form, with the client
    /// secret beside it (`client_secret_post`) for a GitHub App that refreshes with one.
    public var clientAuthentication: ClientAuthentication {
        ClientAuthentication(.clientSecretPost, secret: clientSecret)
    }

    /// GitHub on this host as the core's OAuth 2.0 engine reads it: device login (RFC 8628, whose
    /// errors GitHub answers with HTTP 200) with the client id alone, refresh of expiring GitHub
    /// App user tokens with ``clientAuthentication``, and errors classified by ``taxonomy`` with
    /// the rows of `GitHubErrors.json`.
    public var described: OAuth2Description {
        var described = OAuth2Description(
            id: .github, displayName: displayName,
            endpoints: OAuth2Endpoints(token: host.accessTokenURL, deviceAuthorization: host.deviceCodeURL),
            clientAuthenticationMethod: .clientSecretPost, defaultScopes: defaultScopes,
            errorRows: GitHubErrorTaxonomy.table)
        described.deviceLoginIsPublic = true
        described.newTokenAdvice =
            "Create a new token (GitHub → Settings → Developer settings → Personal access tokens) and try again."
        described.classifier = taxonomy
        return described
    }

    /// GitHub on the core's OAuth 2.0 engine (``described``), sending through `transport`, with
    /// `GET /user` after each token (a device login, a refresh, a token the person supplies) for
    /// its login and scopes.
    public func oauth2(transport: any HTTPTransport) -> OAuth2Provider {
        var provider = OAuth2Provider(
            trusted: described, clientID: clientID, clientAuthentication: clientAuthentication, transport: transport,
            now: now)
        provider.checkToken = { [self] in
            try await identified($0.token, for: $0.request, previous: $0.renewing, transport: transport)
        }
        return provider
    }
}

extension GitHubProvider: CustomReflectable {
    /// Every field but the client secret's value.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "host": host, "clientID": clientID,
                "clientSecret": (clientSecret == nil ? nil : Redaction.placeholder) as Any,
                "defaultScopes": defaultScopes,
            ])
    }
}

/// Text helpers for messages.
enum GitHubText {
    /// At most 300 printable characters of text from GitHub, for messages.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(300).map(Character.init))
    }

    /// A comma-separated scope header (`X-OAuth-Scopes: repo, read:org`) as a list.
    static func scopes(_ header: String?) -> [String] {
        (header ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

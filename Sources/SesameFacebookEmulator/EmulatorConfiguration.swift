import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

/// A Facebook Login for Business configuration: what a login with its `config_id` asks for, and
/// the objects (Pages, businesses) each permission is granted for.
public struct EmulatedLoginConfiguration: Sendable, Hashable, Codable {
    /// The configuration id, sent as `config_id`.
    public var id: String
    /// The permissions, each with the ids of the objects it is granted for (none: not per object).
    public var scopes: [FacebookGranularScope]

    /// Creates a configuration.
    public init(id: String, scopes: [FacebookGranularScope]) {
        self.id = id
        self.scopes = scopes
    }

    /// The permissions it asks for.
    public var permissions: [String] { scopes.map(\.scope) }

    /// The configuration the emulator has unless told otherwise: email, and the Pages and
    /// business a business tool would manage.
    public static let sesameDefault = EmulatedLoginConfiguration(
        id: "800000000000001",
        scopes: [
            FacebookGranularScope(scope: "email"),
            FacebookGranularScope(scope: "pages_show_list", targetIDs: ["200000000000001", "200000000000002"]),
            FacebookGranularScope(scope: "business_management", targetIDs: ["300000000000001"]),
        ])
}

/// A Facebook app the emulator knows: its id, name and credentials, and where it may redirect.
///
/// The emulator's credentials are not secrets in the real sense (anyone who can reach the
/// emulator can read them through its admin API), but the emulator still treats them as
/// Facebook does: a wrong secret is refused, and they never appear in its log.
public struct EmulatedApp: Sendable, Hashable, Codable {
    /// The app id (`client_id`), digits as Facebook's are.
    public var id: String
    /// The name shown on the consent page.
    public var name: String
    /// The app secret, for `client_secret`, `fb_exchange_token` and `client_credentials`.
    public var secret: String
    /// The client token, for device login's `access_token={app-id}|{client-token}`.
    public var clientToken: String
    /// Registered redirect URIs, matched exactly (Facebook's strict mode), query ignored.
    public var redirectURIs: [String]
    /// Whether any loopback redirect URI (`http://127.0.0.1:<any port>/…`, `localhost`, `[::1]`)
    /// is accepted, as a desktop app with RFC 8252 redirects needs.
    public var allowsLoopbackRedirects: Bool

    /// Creates an app.
    public init(
        id: String, name: String, secret: String, clientToken: String, redirectURIs: [String] = [],
        allowsLoopbackRedirects: Bool = true
    ) {
        self.id = id
        self.name = name
        self.secret = secret
        self.clientToken = clientToken
        self.redirectURIs = redirectURIs
        self.allowsLoopbackRedirects = allowsLoopbackRedirects
    }

    /// The app the emulator serves when none is configured: the "embedded default" that the
    /// examples and the command line use with no real app id.
    public static let sesameDefault = EmulatedApp(
        id: "1234567890123456", name: "Sesame Emulator App", secret: "sesame-emulator-app-secret",
        clientToken: "sesame-emulator-client-token")

    /// The default app under another id (`sesame emulator --app-id ID`), with the same name,
    /// secret and client token.
    public static func sesameDefault(id: String) -> EmulatedApp {
        var app = sesameDefault
        app.id = id
        return app
    }

    /// Whether `uri` may receive this app's login redirect.
    func allowsRedirect(to uri: String) -> Bool {
        guard let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), components.fragment == nil
        else { return false }
        if allowsLoopbackRedirects, scheme == "http", ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) {
            return true
        }
        var bare = components
        bare.query = nil
        let withoutQuery = bare.string ?? uri
        return redirectURIs.contains(withoutQuery) || redirectURIs.contains(uri)
    }
}

/// A person with a Facebook account in the emulator.
public struct EmulatedUser: Sendable, Hashable, Codable {
    /// The user id (an app-scoped id in real Facebook; digits).
    public var id: String
    /// The full name.
    public var name: String
    /// The first name.
    public var firstName: String
    /// The last name.
    public var lastName: String
    /// The email address, returned by `/me?fields=email` when `email` is granted.
    public var email: String
    /// The birthday as Facebook formats it (`MM/DD/YYYY`), returned when `user_birthday` is granted.
    public var birthday: String?
    /// For a test user: the app it belongs to.
    public var testUserAppID: String?
    /// For a test user: the password Facebook's test-user API returns. Not a real credential.
    public var password: String?

    /// Creates a person.
    public init(
        id: String, name: String, firstName: String? = nil, lastName: String? = nil, email: String? = nil,
        birthday: String? = nil
    ) {
        self.id = id
        self.name = name
        if let firstName, let lastName {
            self.firstName = firstName
            self.lastName = lastName
        } else {
            let parts = name.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            self.firstName = firstName ?? parts.first ?? name
            self.lastName = lastName ?? (parts.count > 1 ? parts[1...].joined(separator: " ") : "")
        }
        self.email = email ?? "\(id)@example.com"
        self.birthday = birthday
        self.testUserAppID = nil
        self.password = nil
    }

    /// Whether this is a test user made through the test-user API.
    public var isTestUser: Bool { testUserAppID != nil }

    /// The person who is "logged in to Facebook" in the emulator's dialog unless another is chosen.
    public static let sesameDefault = EmulatedUser(
        id: "100000000000001", name: "Sam Sesame", firstName: "Sam", lastName: "Sesame",
        email: "sam.sesame@example.com", birthday: "04/01/1990")
}

/// Hard limits that keep the emulator's memory bounded and its input checked.
public struct EmulatorLimits: Sendable, Hashable {
    /// The largest request body accepted, in bytes.
    public var maxBodyBytes: Int = 1 << 20
    /// The most parameters (query plus body) one request may carry.
    public var maxParameters: Int = 200
    /// The longest path accepted, in bytes.
    public var maxPathBytes: Int = 2048
    /// The longest post message (Facebook's limit is 63,206 characters).
    public var maxMessageCharacters: Int = 63_206
    /// The most requests in one batch (Facebook's limit is 50).
    public var maxBatchSize: Int = 50
    /// The most posts kept per person; the oldest are dropped beyond it.
    public var maxPostsPerUser: Int = 10_000
    /// The most test users per app (Facebook's limit is 2,000).
    public var maxTestUsersPerApp: Int = 2_000
    /// The most people in all (configured, test and admin-created).
    public var maxUsers: Int = 20_000
    /// The most live tokens; the oldest expired ones, then the oldest, are dropped beyond it.
    public var maxTokens: Int = 100_000
    /// The most pending dialogs, codes or device codes of each kind kept; the oldest are dropped.
    public var maxPending: Int = 2_000
    /// The most scenarios active at once.
    public var maxScenarios: Int = 100
    /// The most names in one `fields` list.
    public var maxFields: Int = 100

    /// The defaults.
    public init() {}
}

/// How an ``Emulator`` starts: what it listens on, what it knows and how it behaves.
public struct EmulatorConfiguration: Sendable {
    /// The TCP port on 127.0.0.1; 0 picks a free one.
    public var port: Int = 0
    /// The apps the emulator knows. The first is the default.
    public var apps: [EmulatedApp] = [.sesameDefault]
    /// The people the emulator knows besides test users. The first is the one logged in to the dialog
    /// unless another is chosen.
    public var users: [EmulatedUser] = [.sesameDefault]
    /// Scenarios active from the start, as `--scenario` sets them.
    public var scenarios: [ScenarioSetting] = []
    /// Where to keep people, tokens, grants and posts across runs; `nil` keeps them in memory only.
    /// The file is JSON, mode 0600, replaced atomically.
    public var stateFileURL: URL?
    /// The Graph API version the emulator serves an unversioned call with, as Facebook serves it
    /// with the app's default version. A versioned call is served by the version it names, or,
    /// when that version has ended (`GraphAPIVersions`), by the oldest one still available, as
    /// Facebook does; `facebook-api-version` names the version that served it.
    public var graphVersion: String = GraphAPIVersions.tested
    /// The Facebook Login for Business configurations every app has, by id: a login that sends
    /// `config_id` asks for a configuration's permissions (its `scope` is ignored), and
    /// `debug_token` then lists the objects they were granted for in `granular_scopes`.
    public var loginConfigurations: [EmulatedLoginConfiguration] = [.sesameDefault]
    /// How long a token from a login (code exchange, device login) lives, in seconds.
    public var shortLivedTokenLifetime: TimeInterval = 2 * 3600
    /// How long a token from `fb_exchange_token` or `fb_extend_sso_token` lives (about 60 days).
    public var longLivedTokenLifetime: TimeInterval = 5_184_000
    /// How long the app keeps access to a person's data after they log in (90 days).
    public var dataAccessLifetime: TimeInterval = 90 * 86_400
    /// How long an authorization code can be exchanged.
    public var codeLifetime: TimeInterval = 600
    /// How long a device code lives (`expires_in` of `device/login`).
    public var deviceCodeLifetime: TimeInterval = 420
    /// The polling interval a device must keep (`interval` of `device/login`), in seconds.
    public var devicePollInterval: Int = 5
    /// Calls per hour each person who installed an app adds to its allowance (Facebook: 200).
    /// `X-App-Usage` reports the share used.
    public var hourlyCallsPerUser: Int = 200
    /// Whether going over the hourly allowance answers error 4, as Facebook does. Off by default,
    /// so load tests and long sessions are not throttled unless they ask to be.
    public var enforcesRateLimits: Bool = false
    /// Input and memory limits.
    public var limits = EmulatorLimits()
    /// The current time. Tests inject a controllable clock; the admin API can also move time forward.
    public var now: @Sendable () -> Date = { Date() }
    /// Called once per request with a line that names the method, the path (never the query, which
    /// may carry tokens) and the status.
    public var requestLog: (@Sendable (String) -> Void)?

    /// A configuration with the default app and person, in memory, on a free port.
    public init() {}

    /// The conventional state file: `$XDG_STATE_HOME/sesame/emulator.json`, or
    /// `~/.local/state/sesame/emulator.json`.
    public static func defaultStateFileURL(
        environment: [String: String] = ProcessInfo.processInfo.environment
    )
        -> URL
    {
        XDG.stateFile("emulator.json", environment: environment)
    }

    /// The default app: the first in ``apps``.
    public var defaultApp: EmulatedApp { apps.first ?? .sesameDefault }
}

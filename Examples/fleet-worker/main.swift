// fleet-worker: one of many copies that post to Facebook on behalf of many people, from the
// logins a fleet shares in PostgreSQL.
//
// Every copy opens the same PostgresCredentialStore (libpq's PGHOST, PGPORT, … say where it is;
// SESAME_POSTGRES_KEY_FILE or SESAME_POSTGRES_KEY hold the keys the tokens are sealed with), lists the app's stored logins,
// and for each one opens a FacebookSession from the stored token (no UI) and posts to the
// person's feed. A renewal takes PostgresRefreshLock, so however many copies find a token due at
// once, one renews it and the others use what it saved. Every Graph call first consults the
// app's PostgresRateLimitBudget, so when Facebook throttles the app, every copy holds back until
// the window is over, and then one call finds out whether it is.
//
//   fleet-worker [--share K/N] [--message TEXT]
//   fleet-worker --seed N          (emulator only: make N test users and store their logins)

import Foundation
import Sesame
import SesameCurl
import SesameFacebook
import SesamePostgres

#if canImport(Glibc)
    import Glibc
#endif

// A reader that goes away (`fleet-worker | head -1`) is a failed write, never a signal.
signal(SIGPIPE, SIG_IGN)

// Each line is one write, at once: the lines of copies sharing a terminal or a pipe never mix.
// A write that fails (a full disk, a reader gone) is remembered and ends the run with status 74.
let outputFailed = Locked(false)
func say(_ text: String) {
    do {
        try FileHandle.standardOutput.write(contentsOf: Data("\(text)\n".utf8))
    } catch {
        outputFailed.withLock { $0 = true }
    }
}
func complain(_ text: String) { try? FileHandle.standardError.write(contentsOf: Data("fleet-worker: \(text)\n".utf8)) }

let usage = """
    usage: fleet-worker [--share K/N] [--message TEXT]
           fleet-worker --seed N

    Posts MESSAGE to the feed of every person whose Facebook login for the app is stored in the
    fleet's PostgreSQL store, opening each session from the stored token. With --share K/N it
    takes only every N-th login, starting at the K-th, so N copies split the work. --seed N
    (the emulator only) makes N test users and stores their logins.

    Environment:
      PGHOST, PGPORT, PGUSER, PGDATABASE, ...  where the store is (libpq's variables, ~/.pgpass)
      SESAME_POSTGRES            a libpq connection string, instead of the PG* variables
      SESAME_POSTGRES_KEY_FILE   a file of the keys the tokens are sealed with, a line each:
                                 ID:BASE64 (the Base64 from `openssl rand -base64 32`), the
                                 current key first; or SESAME_POSTGRES_KEY, that text
      SESAME_FACEBOOK_APP_ID     the app whose logins are used
      SESAME_FACEBOOK_GRAPH_URL  the Graph API origin: the emulator's address (default: Facebook's)

    Exit status: 0 every post succeeded; 1 a post failed; 64 usage; 74 the store or the output
    failed; 78 a setting is missing or wrong.

    """

// MARK: The command line

struct Options {
    var share = (index: 1, count: 1)
    var message = "Hello from a fleet worker"
    var seedCount: Int?
}

func parse(_ arguments: [String]) -> Options {
    var options = Options()
    var arguments = arguments[...]
    while let argument = arguments.popFirst() {
        switch argument {
        case "-h", "--help":
            say(usage)
            exit(outputFailed.withLock { $0 } ? 74 : 0)
        case "--share":
            let parts = (arguments.popFirst() ?? "").split(separator: "/").compactMap { Int($0) }
            guard parts.count == 2, parts[1] >= 1, (1...parts[1]).contains(parts[0]) else {
                complain("--share needs K/N with 1 <= K <= N, such as 2/4.\n\n" + usage)
                exit(64)
            }
            options.share = (parts[0], parts[1])
        case "--message":
            guard let text = arguments.popFirst(), !text.isEmpty else {
                complain("--message needs the text to post.\n\n" + usage)
                exit(64)
            }
            options.message = text
        case "--seed":
            guard let count = arguments.popFirst().flatMap(Int.init), (1...500).contains(count) else {
                complain("--seed needs a number of test users from 1 to 500.\n\n" + usage)
                exit(64)
            }
            options.seedCount = count
        default:
            complain("unknown argument '\(argument)'.\n\n" + usage)
            exit(64)
        }
    }
    return options
}

let options = parse(Array(CommandLine.arguments.dropFirst()))

// MARK: Settings

let environment = ProcessInfo.processInfo.environment
func setting(_ name: String) -> String {
    guard let value = environment[name], !value.isEmpty else {
        complain("\(name) is not set; see `fleet-worker --help`.")
        exit(78)
    }
    return value
}

// The key that seals the tokens at rest, from the environment (never from the arguments, which
// `ps` shows).
let keys: CredentialEncryptionKeys
do {
    keys = try CredentialEncryptionKeys.fromEnvironment(environment)
} catch {
    complain("\(error)")
    exit(78)
}
let appID = setting("SESAME_FACEBOOK_APP_ID")
let graphURL: URL
if let text = environment["SESAME_FACEBOOK_GRAPH_URL"], !text.isEmpty {
    guard let url = URL(string: text), url.host != nil else {
        complain("SESAME_FACEBOOK_GRAPH_URL is not an address such as http://127.0.0.1:8765.")
        exit(78)
    }
    graphURL = url
} else {
    graphURL = FacebookProvider.facebookGraphBaseURL
}

// What every copy shares: the store, the renewal lock and the app's Graph budget, all on the
// database libpq's variables name. Nothing else is shared, not even a file.
let database = PostgresConfiguration.fromEnvironment(environment)
let store = PostgresCredentialStore(configuration: database, keys: keys)
let lock = PostgresRefreshLock(configuration: database)
let facebook = FacebookProvider(appID: appID, graphBaseURL: graphURL)
let governor = GraphUsageGovernor(
    budget: PostgresRateLimitBudget(
        configuration: database, provider: .facebook, appID: appID, warning: { complain($0) }))
let transport = CurlTransport()

// MARK: Seeding (the emulator only)

/// Makes `count` test users who granted publish_actions, through the emulator's test-user API,
/// and stores each one's login under the user's id.
func seed(_ count: Int) async throws {
    // The emulator tells its app secret to whoever asks on loopback; Facebook never does.
    let apps = try await transport.send(HTTPRequest(url: graphURL.appending(path: "__sesame/apps")))
    guard
        let secret = apps.json?["data"]?.arrayValue?.first(where: { $0["id"]?.stringValue == appID })?["secret"]?
            .stringValue
    else {
        throw SeedFailure(
            description: "\(graphURL.absoluteString) is not a Sesame emulator serving app \(appID); --seed works "
                + "only there.")
    }
    let app = GraphClient(provider: facebook, transport: transport, accessToken: "\(appID)|\(secret)")
    for _ in 0..<count {
        let user = try await app.post(
            "\(appID)/accounts/test-users",
            parameters: ["installed": "true", "permissions": "public_profile,publish_actions"])
        guard let id = user["id"]?.stringValue, let token = user["access_token"]?.stringValue else {
            throw SeedFailure(description: "the emulator made a test user without an id or token.")
        }
        let accessToken = AccessToken(
            tokenString: token, provider: .facebook, appID: appID, userID: id,
            permissions: PermissionSet(granted: ["public_profile", "publish_actions"], declined: []),
            expirationDate: Date().addingTimeInterval(2 * 3600))
        try await store.save(
            StoredCredential(key: CredentialKey(provider: .facebook, appID: appID, account: id), token: accessToken))
        say("seeded user \(id)")
    }
}

struct SeedFailure: Error, CustomStringConvertible { var description: String }

// MARK: Posting

/// Opens `login`'s session from the store (no UI) and posts `message` to the person's feed.
func post(for login: StoredCredential) async throws -> String {
    let session = FacebookSession(
        provider: facebook, transport: transport, store: store, account: login.key.account,
        configuration: .init(refreshLocking: .service(lock)), governor: governor)
    try await session.openActiveSession(allowLoginUI: false)
    let answer = try await session.graph.post("me/feed", parameters: ["message": options.message])
    return answer["id"]?.stringValue ?? "?"
}

/// A duration as whole milliseconds.
func milliseconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
}

/// One line for a failure: what Facebook or the store said, never a token.
func sentence(_ error: any Error) -> String {
    if let error = error as? AuthError { return "\(error.category): \(error.message)" }
    return String(describing: error)
}

func run() async -> Int32 {
    do {
        // Harmless when the tables exist; a DBA can create them instead (PostgresCredentialStore.migrationSQL).
        try await store.migrate()
        if let seedCount = options.seedCount {
            try await seed(seedCount)
            return 0
        }
    } catch let error as CredentialStoreError {
        complain(error.message)
        return 74
    } catch {
        complain(sentence(error))
        return 1
    }

    let logins: [StoredCredential]
    do {
        logins = try await store.list(provider: .facebook).filter { $0.key.appID == appID && !$0.needsLogin }
    } catch {
        complain(sentence(error))
        return 74
    }
    let share = options.share
    let mine = logins.enumerated().filter { $0.offset % share.count == share.index - 1 }.map(\.element)
    let name = "worker \(share.index)/\(share.count) (pid \(getpid()))"
    say("\(name): \(mine.count) of \(logins.count) stored logins of app \(appID)")

    var failures = 0
    let started = ContinuousClock.now
    for login in mine {
        let clock = ContinuousClock.now
        do {
            let id = try await post(for: login)
            say("\(name): posted \(id) for user \(login.key.account) in \(milliseconds(ContinuousClock.now - clock))")
        } catch {
            failures += 1
            say("\(name): FAILED for user \(login.key.account): \(sentence(error))")
        }
    }
    say(
        "\(name): \(mine.count - failures) posted, \(failures) failed, in \(milliseconds(ContinuousClock.now - started))"
    )
    if outputFailed.withLock({ $0 }) {
        complain("could not write to standard output; the posts above were made.")
        return 74
    }
    return failures == 0 ? 0 : 1
}

exit(await run())

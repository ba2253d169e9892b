import Foundation
import Sesame
import SesameFacebook
import SesameFacebookEmulator
import SesameTestSupport
import Testing

/// Counts the emulator's request log lines that name a path.
private final class RequestCounter: Sendable {
    private let count = Locked(0)
    let path: String
    init(path: String) { self.path = path }
    var value: Int { count.withLock { $0 } }
    func record(_ line: String) { if line.contains(path) { count.withLock { $0 += 1 } } }
}

@Suite("Facebook's daily token extension across processes")
struct ExtensionProcessTests {
    init() { TestProviders.bootstrap() }

    @Test("20 'sesame token facebook' processes on a day-old token make exactly one extension call")
    func twentyProcessesOneExtension() async throws {
        let extensions = RequestCounter(path: "/oauth/access_token")
        var configuration = EmulatorConfiguration()
        configuration.requestLog = { extensions.record($0) }
        let emulator = try Emulator(configuration: configuration)
        try await withStarted({ try await emulator.start() }, stop: { _ in await emulator.stop() }) { endpoints in
            let app = configuration.defaultApp

            // A two-day-old token in the file store of a private XDG_STATE_HOME.
            let cli = try CLIHarness(storage: "file")
            let tokenString = try await emulator.issueToken(permissions: ["email"], longLived: true)
            let old = AccessToken(
                tokenString: tokenString, provider: .facebook, appID: app.id, userID: configuration.users[0].id,
                permissions: PermissionSet(granted: ["email", "public_profile"]),
                expirationDate: Date().addingTimeInterval(50 * 86_400),
                refreshDate: Date().addingTimeInterval(-2 * 86_400))
            let store = FileCredentialStore(url: cli.root.appending(path: "state/sesame/credentials.json"))
            let key = CredentialKey(provider: .facebook, appID: app.id, account: "default")
            try await store.save(StoredCredential(key: key, token: old))

            let environment = [
                "SESAME_FACEBOOK_APP_ID": app.id, "SESAME_FACEBOOK_CLIENT_TOKEN": app.clientToken,
                "SESAME_FACEBOOK_GRAPH_URL": endpoints.graphURL.absoluteString,
                "SESAME_FACEBOOK_DIALOG_URL": endpoints.baseURL.absoluteString,
                "SESAME_FACEBOOK_GRAPH_VERSION": configuration.graphVersion,
            ]
            let results = try await withThrowingTaskGroup(of: ProcessResult.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await cli.run("sesame", ["token", "facebook"], environment: environment) }
                }
                return try await group.reduce(into: [ProcessResult]()) { $0.append($1) }
            }

            #expect(results.count == 20)
            for result in results { #expect(result.status == 0, "sesame token failed: \(result.standardError)") }
            #expect(extensions.value == 1, "the 20 processes made \(extensions.value) extension calls")
            let stored = try #require(try await store.load(key)?.token)
            #expect(
                stored.refreshDate > old.refreshDate.addingTimeInterval(86_400), "the stored token was not extended")
            #expect(
                Set(results.map { $0.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) }) == [
                    stored.tokenString
                ])
        }
    }
}

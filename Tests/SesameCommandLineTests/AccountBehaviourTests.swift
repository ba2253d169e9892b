import Foundation
import Sesame
import SesameCommandLine
import SesameCurl
import SesameDesktop
import SesameFacebookEmulator
import SesameFacebookPlugin
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A store whose failures a test chooses: saves refused as a locked keyring would, deletes that
/// fail, and entries that cannot be read.
final class ScriptedStore: CredentialStore {
    let inner = InMemoryCredentialStore()
    let failSaves: CredentialStoreError?
    let failDeletes: Bool
    private let unreadable: Locked<[UnreadableCredential]>
    private let saveCount = Locked(0)
    private let calls = Locked((listings: 0, searches: 0))

    init(failSaves: CredentialStoreError? = nil, failDeletes: Bool = false, unreadable: [UnreadableCredential] = []) {
        self.failSaves = failSaves
        self.failDeletes = failDeletes
        self.unreadable = Locked(unreadable)
    }

    var saves: Int { saveCount.withLock { $0 } }
    /// How many times ``listing(provider:)`` and ``containsEntries(provider:)`` were called.
    var listings: Int { calls.withLock { $0.listings } }
    var searches: Int { calls.withLock { $0.searches } }
    var backendDescription: String { "scripted keyring" }

    func save(_ credential: StoredCredential) async throws {
        if let failSaves { throw failSaves }
        saveCount.withLock { $0 += 1 }
        try await inner.save(credential)
    }

    func load(_ key: CredentialKey) async throws -> StoredCredential? {
        if unreadable.withLock({ $0.contains { $0.key == key } }) {
            throw CredentialStoreError(kind: .corrupt, message: "The keyring item for \(key) is not JSON.")
        }
        return try await inner.load(key)
    }

    func delete(_ key: CredentialKey) async throws -> Bool {
        if failDeletes { throw CredentialStoreError(kind: .ioFailure, message: "The keyring refused to delete.") }
        let removed = unreadable.withLock { entries in
            let before = entries.count
            entries.removeAll { $0.key == key }
            return before != entries.count
        }
        return try await inner.delete(key) || removed
    }

    func list(provider: ProviderID?) async throws -> [StoredCredential] { try await inner.list(provider: provider) }

    func containsEntries(provider: ProviderID?) async throws -> Bool {
        calls.withLock { $0.searches += 1 }
        let hasUnreadable = unreadable.withLock { $0 }.contains { provider == nil || $0.key?.provider == provider }
        return try await !inner.list(provider: provider).isEmpty || hasUnreadable
    }

    func listing(provider: ProviderID?) async throws -> CredentialListing {
        calls.withLock { $0.listings += 1 }
        return CredentialListing(
            credentials: try await inner.list(provider: provider),
            unreadable: unreadable.withLock { $0 }.filter { provider == nil || $0.key?.provider == provider })
    }
}

/// Runs `sesame` in this process, with the keyring replaced by `store`.
struct InProcessCLI {
    let root: URL
    let store: ScriptedStore
    let environment: [String: String]

    init(store: ScriptedStore, environment: [String: String]) {
        root = URL(fileURLWithPath: environment["XDG_CONFIG_HOME"] ?? "/tmp").deletingLastPathComponent()
        self.store = store
        self.environment = environment
    }

    init(store: ScriptedStore = ScriptedStore(), extra: [String: String] = [:]) throws {
        root = FileManager.default.temporaryDirectory.appending(path: "sesame-inproc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        self.store = store
        var environment: [String: String] = [
            "XDG_STATE_HOME": root.appending(path: "state").path,
            "XDG_CONFIG_HOME": root.appending(path: "config").path,
            "HOME": root.appending(path: "home").path, "SESAME_STORAGE": "keyring", "NO_COLOR": "1",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
        environment.merge(extra) { $1 }
        self.environment = environment
    }

    struct Result {
        var status: Int32
        var output: String
        var error: String
    }

    func run(_ arguments: [String], input: String = "") async -> Result {
        let output = Locked("")
        let error = Locked("")
        let io = CommandIO(
            readStandardInput: { Data(input.utf8.prefix($0 + 1)) }, write: { text in output.withLock { $0 += text } },
            writeError: { text in error.withLock { $0 += text } })
        let store = self.store
        let status = await SesameCLI.main(
            arguments, io: io, environment: environment, keyring: { (store, "scripted keyring") })
        return Result(status: status, output: output.withLock { $0 }, error: error.withLock { $0 })
    }

    /// A stored login for the built-in emulator's app, as `sesame login facebook` leaves it.
    func storeEmulatorLogin(
        account: String, token: String = "EAAtest\(UUID().uuidString.prefix(8))", needsLogin: Bool = false
    )
        async throws
    {
        let app = EmulatorConfiguration().defaultApp.id
        try await store.inner.save(
            StoredCredential(
                key: CredentialKey(provider: .facebook, appID: app, account: account),
                token: AccessToken(
                    tokenString: token, provider: .facebook, appID: app, userID: "100000000000001",
                    expirationDate: Date().addingTimeInterval(3_600)),
                needsLogin: needsLogin))
    }
}

@Suite("accounts, logout, login and status across providers")
struct AccountBehaviourTests {
    init() { TestProviders.bootstrap() }

    @Test("logging out the active account makes a remaining one active and says so")
    func logoutSwitches() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "alice")
        try await cli.storeEmulatorLogin(account: "bob")
        #expect(await cli.run(["switch", "facebook", "bob"]).status == 0)
        let logout = await cli.run(["logout", "facebook"])
        #expect(logout.status == 0, "\(logout.error)")
        #expect(logout.error.contains("Account 'alice' is now the active one."))
        let token = await cli.run(["token", "facebook"])
        #expect(token.status == 0, "\(token.error)")
        #expect(token.output.hasPrefix("EAAtest"))
        let again = await cli.run(["logout", "facebook"])
        #expect(again.status == 0, "the second logout removes alice: \(again.error)")
        // No login left: no active account remembered, so `status` does not expect one.
        #expect(await AccountState(environment: cli.environment).snapshot().hasActiveAccount(for: .facebook) == false)
    }

    @Test("a login the provider ends (an invalid token) is cleared, and a remaining one becomes active")
    func providerEndsLogin() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "alice")
        try await cli.storeEmulatorLogin(account: "bob", token: "EAAneverissuedbytheemulator")
        #expect(await cli.run(["switch", "facebook", "bob"]).status == 0)
        let permissions = await cli.run(["permissions", "facebook"])
        #expect(permissions.status == 77, "\(permissions.error)")
        #expect(permissions.error.contains("Account 'alice' is now the active one."), "\(permissions.error)")
        let token = await cli.run(["token", "facebook"])
        #expect(token.status == 0, "\(token.error)")
    }

    @Test("a login that cannot be removed is an error with a non-zero exit, and its token is still there")
    func failedRemoval() async throws {
        let cli = try InProcessCLI(store: ScriptedStore(failDeletes: true))
        try await cli.storeEmulatorLogin(account: "default")
        let logout = await cli.run(["logout", "facebook"])
        #expect(logout.status == 74, "\(logout.error)")
        #expect(!logout.output.contains("Logged out"))
        #expect(logout.error.contains("refused to delete"))
        #expect(await cli.run(["token", "facebook"]).status == 0)
    }

    @Test("a login is refused before any code is shown when the store cannot save")
    func storeCheckedFirst() async throws {
        let locked = CredentialStoreError(kind: .locked, message: "The keyring collection is locked.")
        let cli = try InProcessCLI(store: ScriptedStore(failSaves: locked))
        let started = ContinuousClock.now
        let login = await cli.run(["login", "facebook"])
        #expect(login.status == 69, "\(login.error)")
        #expect(login.error.contains("locked"))
        #expect(!login.error.contains("enter the code"), "no device code is shown for a login that cannot be kept")
        // Before, the code was shown and the login waited up to 7 minutes for an approval it could not keep.
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("one unreadable entry: status shows the good logins and marks it; logout removes it")
    func unreadableEntry() async throws {
        let app = EmulatorConfiguration().defaultApp.id
        let bad = CredentialKey(provider: .facebook, appID: app, account: "broken")
        let cli = try InProcessCLI(
            store: ScriptedStore(unreadable: [UnreadableCredential(key: bad, problem: "Its secret is empty.")]))
        try await cli.storeEmulatorLogin(account: "default")
        let status = await cli.run(["status", "--timeout", "60"])
        #expect(status.output.contains("default (active):"), "\(status.output)")
        #expect(status.output.contains("unreadable stored entry (account 'broken')"))
        let logout = await cli.run(["logout", "facebook", "--account", "broken"])
        #expect(logout.status == 0, "\(logout.error)")
        #expect(logout.output.contains("could not be read, and was removed"))
        #expect(try await cli.store.listing(provider: .facebook).unreadable.isEmpty)
    }

    @Test("a stored login that needs a new one never blocks login: it is replaced, and that is said")
    func loginReplaces() async throws {
        let cli = try InProcessCLI(extra: ["SESAME_EMULATOR_APPROVE": "auto"])
        try await cli.storeEmulatorLogin(account: "default", token: "EAAold", needsLogin: true)
        let login = await cli.run(["login", "facebook"])
        #expect(login.status == 0, "\(login.error)")
        #expect(login.output.contains("It replaces the login stored before"))
        let token = await cli.run(["token", "facebook"])
        #expect(token.status == 0)
        #expect(token.output != "EAAold\n")
    }

    @Test("status exits 77 when nothing is logged in, 0 when the active login works")
    func statusExit() async throws {
        let cli = try InProcessCLI(extra: ["SESAME_EMULATOR_APPROVE": "auto"])
        let empty = await cli.run(["status", "--timeout", "60"])
        #expect(empty.status == 77)
        #expect(empty.output.contains("Not logged in to any provider"))
        #expect(await cli.run(["login", "facebook"]).status == 0)
        let status = await cli.run(["status", "--timeout", "60"])
        #expect(status.status == 0, "\(status.output)\(status.error)")
        #expect(status.output.contains("checked with the provider just now"))
        #expect(!status.output.contains("127.0.0.1"), "no address that is dead once the command exits")
    }

    @Test("the emulator notice is printed for login, never for token")
    func emulatorNotice() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run(
            "sesame", ["login", "facebook"], environment: ["SESAME_EMULATOR_APPROVE": "auto"])
        #expect(login.standardError.contains("Using Sesame's built-in Facebook emulator"))
        let token = try await cli.run("sesame", ["token", "facebook"])
        #expect(token.status == 0)
        #expect(token.standardError.isEmpty, "\(token.standardError)")
    }

    @Test("status with a provider that never answers ends within its bound and says what it could not verify")
    func statusBounded() async throws {
        let silent = try SilentListener()
        defer { silent.stop() }
        let cli = try InProcessCLI(extra: [
            "SESAME_FACEBOOK_APP_ID": "1234567890", "SESAME_FACEBOOK_GRAPH_URL": "http://127.0.0.1:\(silent.port)",
        ])
        for account in ["one", "two"] {
            try await cli.store.inner.save(
                StoredCredential(
                    key: CredentialKey(provider: .facebook, appID: "1234567890", account: account),
                    token: AccessToken(tokenString: "EAAx\(account)", provider: .facebook, appID: "1234567890")))
        }
        try await cli.store.inner.save(
            StoredCredential(
                key: CredentialKey(provider: .facebook, appID: "1234567890", account: "default"),
                token: AccessToken(tokenString: "EAAxdefault", provider: .facebook, appID: "1234567890")))
        let started = ContinuousClock.now
        let status = await cli.run(["status"])
        let elapsed = ContinuousClock.now - started
        // The bound is 5 s for all three accounts together, not a wait per account; the margin is
        // for a loaded machine.
        #expect(elapsed < .seconds(60), "three accounts are checked at once within the 5 s bound, not 60 s each")
        #expect(status.status == 75, "\(status.output)\(status.error)")
        #expect(status.output.components(separatedBy: "could not verify").count - 1 == 3, "\(status.output)")
        #expect(status.output.contains("no answer within 5.0 seconds"), "\(status.output)")

        // --timeout sets the bound.
        let short = await cli.run(["status", "--timeout", "0.5"])
        #expect(short.status == 75, "\(short.output)\(short.error)")
        #expect(short.output.contains("no answer within 0.5 seconds"), "\(short.output)")
    }

    @Test(
        "status --timeout takes a number of seconds above 0 and up to 600",
        arguments: ["0", "-1", "abc", "601", "nan", "inf", ""])
    func statusTimeoutRefused(_ value: String) async throws {
        let cli = try InProcessCLI()
        let result = await cli.run(["status", "--timeout", value])
        #expect(result.status == 64, "\(result.error)")
        #expect(result.error.contains("--timeout must be a number of seconds"), "\(result.error)")
    }

    @Test(
        "a bad setting is an error naming where it came from and what is allowed",
        arguments: [
            (#"{"facebook": {"app_id": 1234567890}}"#, [String: String](), "facebook.app_id"),
            ("[1, 2]", [:], "not a JSON object"),
            (#"{"facebook": {"app_id": "abc"}}"#, [:], "digits"),
            (#"{"facebok": {}}"#, [:], #"unknown key "facebok""#),
            (#"{"storage": 3}"#, ["SESAME_STORAGE": ""], "(storage) is a number"),
            ("{}", ["SESAME_EMULATOR_APPROVE": "yes"], "SESAME_EMULATOR_APPROVE"),
            ("{}", ["SESAME_FACEBOOK_GRAPH_URL": "ftp://x"], "http(s)"),
        ])
    func badSettings(_ file: String, _ variables: [String: String], _ says: String) async throws {
        let cli = try InProcessCLI(extra: variables)
        let config = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data(file.utf8).write(to: config.appending(path: "config.json"))
        let result = await cli.run(["login", "facebook"])
        #expect(result.status == 78, "\(result.error)")
        #expect(result.error.contains(says), "\(result.error)")
    }

    @Test(
        "what --with-token reads is checked before anything is sent: too long, NUL, empty",
        arguments: [
            (String(repeating: "A", count: 10 << 20), "too long for an access token"),
            ("EAA\u{0}abc", "not an access token"),
            ("\n", "gave no token"),
        ])
    func withTokenInput(_ input: String, _ says: String) async throws {
        let cli = try InProcessCLI()
        let result = await cli.run(["login", "facebook", "--with-token"], input: input)
        #expect(result.status == 65, "\(result.error)")
        #expect(result.error.contains(says), "\(result.error)")
        #expect(!result.error.contains("Network error"))
    }

    @Test("device login with a real app id and no client token names the setting to give")
    func clientTokenMissing() async throws {
        let cli = try InProcessCLI(extra: ["SESAME_FACEBOOK_APP_ID": "1234567890"])
        let result = await cli.run(["login", "facebook"])
        #expect(result.status == 78)
        #expect(result.error.contains("SESAME_FACEBOOK_CLIENT_TOKEN"))
        #expect(!result.error.contains("FacebookProvider"))
    }

    @Test("a state directory that cannot be written is said plainly, never as a Foundation error dump")
    func unwritableState() async throws {
        let cli = try InProcessCLI(extra: ["SESAME_EMULATOR_APPROVE": "auto"])
        let blocker = cli.root.appending(path: "not-a-directory")
        try Data().write(to: blocker)
        var environment = cli.environment
        environment["XDG_STATE_HOME"] = blocker.appending(path: "state").path
        let result = await InProcessCLI(store: cli.store, environment: environment).run(["login", "facebook"])
        #expect(result.status == 73, "\(result.error)")
        #expect(result.error.contains("XDG_STATE_HOME"))
        #expect(!result.error.contains("NSCocoaErrorDomain") && !result.error.contains("Error Domain"))
    }

    @Test("sesame emulator refuses a state file it cannot write before it accepts any change")
    func emulatorStateChecked() async throws {
        let cli = try CLIHarness()
        let blocker = cli.root.appending(path: "file")
        try Data().write(to: blocker)
        let result = try await cli.run(
            "sesame", ["emulator", "--state-file", blocker.appending(path: "emulator.json").path])
        #expect(result.status == 73)
        #expect(result.standardError.contains("cannot be kept"))
        #expect(!result.standardOutput.contains("Press Ctrl-C"))
    }

    @Test("plain http to a host that is not loopback is refused unless SESAME_ALLOW_INSECURE_HTTP names it")
    func insecureHTTP() async throws {
        let cli = try InProcessCLI(extra: [
            "SESAME_FACEBOOK_APP_ID": "1234567890", "SESAME_FACEBOOK_GRAPH_URL": "http://graph.sesame-test.invalid",
        ])
        let refused = await cli.run(["login", "facebook", "--with-token"], input: "EAAtoken")
        #expect(refused.status != 0)
        #expect(refused.error.contains("plain http"), "\(refused.error)")
        let request = ProviderConnectionRequest(
            instance: "facebook", configuration: DesktopConfiguration(),
            environment: ["SESAME_ALLOW_INSECURE_HTTP": "Graph.Example.test, other.test,"],
            terminal: Terminal(inputIsInteractive: false, errorIsInteractive: false, usesColor: false),
            transport: CurlTransport(), emulators: nil, purpose: .use)
        #expect(request.allowedInsecureHosts == ["graph.example.test", "other.test"])
    }

    @Test("a config file that is a directory is an error, not ignored")
    func configDirectory() async throws {
        let cli = try InProcessCLI()
        try FileManager.default.createDirectory(
            at: cli.root.appending(path: "config/sesame/config.json"), withIntermediateDirectories: true)
        let result = await cli.run(["status"])
        #expect(result.status == 78)
        #expect(result.error.contains("is a directory"))
    }
}

@Suite("the provider plug-in point")
struct ProviderPluginTests {
    init() { TestProviders.bootstrap() }

    @Test("every command and the config file take their providers from the one list")
    func oneList() throws {
        let names = Desktop.providers.map(\.name)
        #expect(Set(names).count == names.count, "each provider is listed once")
        #expect(ErrorProviderSupport.all.map(\.id.rawValue) == names)
        let help = try #require(SesameCLI.commands.first { $0.spec.name == "login" }).spec.help
        for plugin in Desktop.providers {
            for setting in plugin.settings(instance: plugin.name) where setting.isFlag {
                #expect(help.contains("--\(setting.name)"), "login's help lists \(plugin.name)'s --\(setting.name)")
            }
            for setting in plugin.settings(instance: plugin.name) where setting.isSecret {
                #expect(!setting.isFlag, "secrets never come from argv")
            }
        }
        let configuration = DesktopConfiguration(file: ["oidc": .object(["work": .object([:])])])
        #expect(try Desktop.names(configuration: configuration).map(\.name).contains("work"))
    }

    @Test("the command line names no provider outside the list: no provider module imported, no provider literal")
    func noProviderNamesInTheCommandLine() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appending(path: "Sources/SesameCommandLine")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 5)
        for file in files {
            let text = try String(contentsOf: folder.appending(path: file), encoding: .utf8)
            for forbidden in [
                "import SesameFacebook", "import SesameOIDC", "import SesameGitHub", #"== "facebook""#, #"== "oidc""#,
                "ProviderID.facebook", ": .facebook", "(.facebook", "FacebookErrorTaxonomy",
                "ProviderID.github", "(.github", "GitHubErrorTaxonomy",
            ] {
                #expect(!text.contains(forbidden), "\(file) contains \(forbidden)")
            }
        }
    }

    @Test("a library app with no app id gets a configuration error unless it asks for the built-in emulator")
    func emulatorIsExplicit() async throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-lib-\(UUID().uuidString)")
        let environment = [
            "XDG_STATE_HOME": root.appending(path: "state").path,
            "XDG_CONFIG_HOME": root.appending(path: "config").path,
            "HOME": root.path,
        ]
        let error = await #expect(throws: DesktopError.self) {
            _ = try await Desktop.facebook(
                overrides: .init(storage: .memory), environment: environment,
                terminal: Terminal(inputIsInteractive: false, errorIsInteractive: false, usesColor: false))
        }
        #expect(error?.status == .config)
        #expect(error?.message.contains("SESAME_FACEBOOK_APP_ID") == true)
    }
}

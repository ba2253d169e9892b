import Foundation
import Sesame
import SesameDesktop
import Testing

@Suite("accounts.json under concurrent writers")
struct AccountStateTests {
    init() { TestProviders.bootstrap() }

    @Test("twenty writers at once, each on its own lock descriptor as processes are, lose no usage entry")
    func concurrentUsage() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let environment = ["XDG_STATE_HOME": state.path, "HOME": state.path]
        let writers = 20
        let perWriter = 5
        // Each writer its own task: every call waits for the lock on a thread of its own, like a
        // separate process would.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    let accounts = AccountState(environment: environment)
                    for index in 0..<perWriter {
                        let key = CredentialKey(provider: "facebook", appID: "1", account: "w\(writer)-\(index)")
                        try await accounts.recordUsage(.object(["call_count": .number(Double(index))]), for: key)
                    }
                    try await accounts.setActiveAccount("w\(writer)", for: ProviderID(rawValue: "p\(writer)"))
                }
            }
            try await group.waitForAll()
        }
        let accounts = AccountState(environment: environment)
        var missing: [String] = []
        for writer in 0..<writers {
            for index in 0..<perWriter {
                let key = CredentialKey(provider: "facebook", appID: "1", account: "w\(writer)-\(index)")
                if await accounts.lastUsage(for: key) == nil { missing.append(key.account) }
            }
            #expect(await accounts.activeAccount(for: ProviderID(rawValue: "p\(writer)")) == "w\(writer)")
        }
        #expect(missing.isEmpty, "lost usage entries: \(missing)")
        #expect(FileManager.default.fileExists(atPath: accounts.url.path + ".lock"))
    }

    @Test("a snapshot answers as the file does; clearing an app's active account leaves the other apps'")
    func snapshotAndClearing() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let accounts = AccountState(environment: ["XDG_STATE_HOME": state.path, "HOME": state.path])
        #expect(await accounts.snapshot().hasActiveAccount(for: "github") == false, "no file yet")
        try await accounts.setActiveAccount("octo", for: "github", appID: "github.com")
        try await accounts.setActiveAccount("work", for: "github", appID: "ghe.example.com")
        let usage = JSONValue.object(["call_count": .number(3)])
        let key = CredentialKey(provider: "github", appID: "github.com", account: "octo")
        try await accounts.recordUsage(usage, for: key)

        let snapshot = await accounts.snapshot()
        #expect(snapshot.hasActiveAccount(for: "github"))
        #expect(!snapshot.hasActiveAccount(for: "git"), "a name that only begins the same is another provider")
        #expect(!snapshot.hasActiveAccount(for: "facebook"))
        #expect(snapshot.activeAccount(for: "github", appID: "github.com") == "octo")
        #expect(snapshot.activeAccount(for: "github", appID: "ghe.example.com") == "work")
        #expect(snapshot.lastUsage(for: key) == usage)

        try await accounts.clearActiveAccount("octo", for: "github", appID: "github.com")
        #expect(await accounts.activeAccount(for: "github", appID: "github.com") == "work", "the provider's entry")
        #expect(await accounts.activeAccount(for: "github", appID: "ghe.example.com") == "work")
        try await accounts.clearActiveAccount("work", for: "github", appID: "ghe.example.com")
        #expect(await accounts.snapshot().hasActiveAccount(for: "github") == false)
        #expect(await accounts.lastUsage(for: key) == usage, "usage is kept")
    }
}

import Foundation
import Sesame
import SesameDesktop
import Testing

@Suite("accounts.json under concurrent writers")
struct AccountStateTests {
    @Test("twenty writers at once, each on its own lock descriptor as processes are, lose no usage entry")
    func concurrentUsage() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let environment = ["XDG_STATE_HOME": state.path, "HOME": state.path]
        let writers = 20
        let perWriter = 5
        // Threads, not tasks: each call blocks in flock like a separate process would.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                        Thread.detachNewThread {
                            do {
                                let accounts = AccountState(environment: environment)
                                for index in 0..<perWriter {
                                    let key = CredentialKey(
                                        provider: "facebook", appID: "1", account: "w\(writer)-\(index)")
                                    try accounts.recordUsage(.object(["call_count": .number(Double(index))]), for: key)
                                }
                                try accounts.setActiveAccount("w\(writer)", for: ProviderID(rawValue: "p\(writer)"))
                                continuation.resume()
                            } catch {
                                continuation.resume(throwing: error)
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let accounts = AccountState(environment: environment)
        var missing: [String] = []
        for writer in 0..<writers {
            for index in 0..<perWriter {
                let key = CredentialKey(provider: "facebook", appID: "1", account: "w\(writer)-\(index)")
                if accounts.lastUsage(for: key) == nil { missing.append(key.account) }
            }
            #expect(accounts.activeAccount(for: ProviderID(rawValue: "p\(writer)")) == "w\(writer)")
        }
        #expect(missing.isEmpty, "lost usage entries: \(missing)")
        #expect(FileManager.default.fileExists(atPath: accounts.url.path + ".lock"))
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

@Suite("RefreshLock: one refresh per credential across processes")
struct RefreshLockTests {
    static func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-locks-\(UUID().uuidString)", isDirectory: true)
    }

    let key = CredentialKey(provider: "oidc", appID: "client/with odd:chars", account: "default")

    @Test("a second holder of the same lock file waits until the first one's body has returned")
    func exclusion() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Two values, as two processes would have them: each opens the file on its own.
        let first = RefreshLock(key: key, directory: directory)
        let second = RefreshLock(key: key, directory: directory)
        let events = Locked<[String]>([])
        let entered = Locked(false)

        let holder = Task {
            try await first.withLock {
                entered.withLock { $0 = true }
                // Stay inside until the kernel shows the other one waiting for this file.
                let waited = await waitUntil { (FileLocks.waiters(on: first.url) ?? 0) >= 1 }
                events.withLock { $0.append(waited ? "first saw a waiter" : "first saw no waiter") }
                events.withLock { $0.append("first leaves") }
            }
        }
        #expect(await waitUntil { entered.withLock { $0 } })
        try await second.withLock { events.withLock { $0.append("second enters") } }
        try await holder.value
        #expect(events.withLock { $0 } == ["first saw a waiter", "first leaves", "second enters"])
    }

    @Test("the lock is released when the body throws")
    func releasedOnThrow() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let lock = RefreshLock(key: key, directory: directory)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await lock.withLock { throw Failure() } }
        #expect(try await lock.withLock { 42 } == 42)
    }

    @Test("the lock file is private (0600 in a 0700 directory) and its name is safe")
    func privateFile() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let lock = RefreshLock(key: key, directory: directory)
        try await lock.withLock {}
        let file = try FileManager.default.attributesOfItem(atPath: lock.url.path)
        let folder = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(lock.url.deletingLastPathComponent().standardizedFileURL == directory.standardizedFileURL)
        #expect(!lock.url.lastPathComponent.contains("/"))
        #expect(!lock.url.lastPathComponent.contains(" "))
        #expect(
            lock.url.lastPathComponent
                != RefreshLock(
                    key: CredentialKey(provider: "oidc", appID: "client_with_odd_chars", account: "default"),
                    directory: directory
                ).url.lastPathComponent)
    }

    @Test("a lock directory that cannot be created is a CredentialStoreError saying what to check")
    func unwritableDirectory() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let blocker = directory.appendingPathComponent("not-a-directory")
        try Data().write(to: blocker)
        let lock = RefreshLock(key: key, directory: blocker.appendingPathComponent("locks"))
        let error = await #expect(throws: CredentialStoreError.self) { try await lock.withLock {} }
        #expect(error?.kind == .cannotCreate)
        #expect(error?.message.contains("could not create the directory") == true, "\(String(describing: error))")
        #expect(error?.message.contains("set XDG_STATE_HOME") == true)
    }

    @Test("a symbolic link in the lock file's place is refused, and its target is not created")
    func symbolicLinkRefused() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let lock = RefreshLock(key: key, directory: directory)
        let target = directory.appendingPathComponent("created-through-the-link")
        try FileManager.default.createSymbolicLink(atPath: lock.url.path, withDestinationPath: target.path)

        let error = await #expect(throws: CredentialStoreError.self) { try await lock.withLock {} }
        #expect(error?.kind == .insecurePermissions)
        #expect(error?.message.contains("symbolic link") == true, "\(error?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: target.path))
    }

    @Test("a lock directory others may write to is made private before the lock is taken")
    func sharedDirectoryRepaired() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        let lock = RefreshLock(key: key, directory: directory)
        #expect(try await lock.withLock { 7 } == 7)
        let folder = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test("the default directory is beside the per-user state")
    func defaultDirectory() {
        let url = RefreshLock.defaultDirectory(environment: ["XDG_STATE_HOME": "/tmp/state", "HOME": "/home/x"])
        #expect(url.path == "/tmp/state/sesame/locks")
    }
}

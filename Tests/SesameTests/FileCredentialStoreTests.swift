import Foundation
import Testing

@testable import Sesame

#if canImport(Glibc)
    import Glibc
#endif

private func scratchDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-store-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func mode(of url: URL) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

private let fullToken = AccessToken(
    tokenString: "EAAB-full-secret", provider: "facebook", appID: "1234", userID: "100001",
    permissions: PermissionSet(granted: ["email", "publish_actions"], declined: ["user_friends"]),
    expirationDate: Date(timeIntervalSince1970: 1_900_000_000.25),
    refreshDate: Date(timeIntervalSince1970: 1_800_000_000.125),
    refreshToken: "refresh-secret", idToken: "id-token-secret",
    providerExtras: ["data_access_expires_at": .number(1_905_000_000.5)])

private let key = CredentialKey(provider: "facebook", appID: "1234", account: "alice")

/// A store at `c.json` in a new scratch directory, holding ``fullToken``; and the directory.
private func savedStore() async throws -> (FileCredentialStore, directory: URL) {
    let directory = try scratchDirectory()
    let store = FileCredentialStore(url: directory.appendingPathComponent("c.json"))
    try await store.save(StoredCredential(key: key, token: fullToken))
    return (store, directory)
}

@Suite("File credential store")
struct FileCredentialStoreTests {
    @Test("the file is created with mode 0600 in a 0700 directory")
    func createsPrivateFile() async throws {
        let directory = try scratchDirectory().appendingPathComponent("state/sesame")
        let store = FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
        try await store.save(StoredCredential(key: key, token: fullToken))
        #expect(try mode(of: store.url) == 0o600)
        #expect(try mode(of: directory) == 0o700)
    }

    @Test("every field round-trips")
    func roundTrip() async throws {
        let store = FileCredentialStore(url: try scratchDirectory().appendingPathComponent("c.json"))
        let credential = StoredCredential(
            key: key, token: fullToken, savedAt: Date(timeIntervalSince1970: 1_850_000_000.75), needsLogin: true)
        try await store.save(credential)
        // A second instance reads from disk, not from memory.
        let reread = try await FileCredentialStore(url: store.url).load(key)
        #expect(reread == credential)
    }

    @Test("a file that group or others can read is refused with the chmod to run")
    func refusesReadableFile() async throws {
        let (store, _) = try await savedStore()
        chmod(store.url.path, 0o644)

        let error = await #expect(throws: CredentialStoreError.self) { try await store.load(key) }
        #expect(error?.kind == .insecurePermissions)
        #expect(error?.message.contains("chmod 600 '\(store.url.path)'") == true)
    }

    @Test("a stale temporary file from an interrupted write leaves the old content intact")
    func staleTempFile() async throws {
        let (store, directory) = try await savedStore()
        // What a crash between write and rename leaves behind: a half-written temporary file.
        let stale = directory.appendingPathComponent(".c.json.tmp-ABC123")
        try Data("{\"version\":1,\"credentials\":[{\"key\":".utf8).write(to: stale)

        #expect(try await store.load(key)?.token == fullToken)
        var second = fullToken
        second.tokenString = "second"
        try await store.save(StoredCredential(key: key, token: second))
        #expect(try await FileCredentialStore(url: store.url).load(key)?.token.tokenString == "second")
    }

    @Test("a save removes the temporary files that killed saves left, and nothing else")
    func removesInterruptedWrites() async throws {
        let (store, directory) = try await savedStore()
        let elsewhere = try scratchDirectory()
        // What a `kill -9` between the write and the rename leaves: a whole, private file.
        let strays = [".c.json.tmp-Ab12Cd", ".c.json.tmp-XXXXXX", ".c.json.tmp-000000"]
        for name in strays {
            #expect(
                FileManager.default.createFile(
                    atPath: directory.appendingPathComponent(name).path, contents: Data("rotated-secret".utf8),
                    attributes: [.posixPermissions: 0o600]))
        }
        // A link with the pattern's name, pointing at a file elsewhere: neither followed nor removed.
        let target = elsewhere.appendingPathComponent("target")
        try Data("target".utf8).write(to: target)
        let link = directory.appendingPathComponent(".c.json.tmp-L1nk00")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: target.path)
        // Names close to the pattern but not in it, and a directory with the pattern's name.
        let others = [
            ".c.json.tmp-ABC12", ".c.json.tmp-ABC1234", ".c.json.tmp-AB-12C", ".d.json.tmp-ABC123",
            "c.json.tmp-ABC123", ".c.json.tmp-ABC123~", ".c.json.lock-ABC123",
        ]
        for name in others {
            try Data("other".utf8).write(to: directory.appendingPathComponent(name))
        }
        let folder = directory.appendingPathComponent(".c.json.tmp-D1rect")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)

        var second = fullToken
        second.tokenString = "second"
        try await store.save(StoredCredential(key: key, token: second))

        let left = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        for name in strays { #expect(!left.contains(name), "\(name) was left") }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path)
        #expect(try Data(contentsOf: target) == Data("target".utf8))
        for name in others {
            #expect(try Data(contentsOf: directory.appendingPathComponent(name)) == Data("other".utf8), "\(name)")
        }
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(try await FileCredentialStore(url: store.url).load(key)?.token.tokenString == "second")
    }

    @Test("a delete removes them too, and a load, which takes no lock, does not")
    func deleteRemovesInterruptedWrites() async throws {
        let (store, directory) = try await savedStore()
        let stray = directory.appendingPathComponent(".c.json.tmp-Zz9Yy8")
        #expect(
            FileManager.default.createFile(
                atPath: stray.path, contents: Data("rotated-secret".utf8), attributes: [.posixPermissions: 0o600]))

        _ = try await store.load(key)
        #expect(FileManager.default.fileExists(atPath: stray.path))
        #expect(try await store.delete(key))
        #expect(!FileManager.default.fileExists(atPath: stray.path))
    }

    @Test("a save that fails before the rename leaves the previous file as it was and no temporary file")
    func failedSaveKeepsOldFile() async throws {
        let directory = try scratchDirectory()
        let url = directory.appendingPathComponent("c.json")
        try await FileCredentialStore(url: url).save(StoredCredential(key: key, token: fullToken))
        let before = try Data(contentsOf: url)
        let sawTemporaryFile = Flag()
        let failing = FileCredentialStore(url: url) { temporaryPath in
            // The new content is fully written here; the crash comes before it replaces the old.
            sawTemporaryFile.set(FileManager.default.fileExists(atPath: temporaryPath))
            throw CredentialStoreError(kind: .ioFailure, message: "disk full (injected)")
        }
        var changed = fullToken
        changed.tokenString = "never-written"

        await #expect(throws: CredentialStoreError.self) {
            try await failing.save(StoredCredential(key: key, token: changed))
        }

        #expect(sawTemporaryFile.value)
        #expect(try Data(contentsOf: url) == before)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.contains(".tmp-")
        }
        #expect(leftovers.isEmpty)
    }

    @Test("a corrupt file is an error and is left in place")
    func corruptFile() async throws {
        let store = FileCredentialStore(url: try scratchDirectory().appendingPathComponent("c.json"))
        let garbage = Data("{ this is not json".utf8)
        _ = FileManager.default.createFile(
            atPath: store.url.path, contents: garbage, attributes: [.posixPermissions: 0o600])

        let loadError = await #expect(throws: CredentialStoreError.self) { try await store.load(key) }
        #expect(loadError?.kind == .corrupt)
        #expect(loadError?.message.contains("left as it is") == true)
        // Saving must not silently replace the corrupt file either.
        await #expect(throws: CredentialStoreError.self) {
            try await store.save(StoredCredential(key: key, token: fullToken))
        }
        #expect(try Data(contentsOf: store.url) == garbage)
    }

    @Test("several accounts are listed, overwritten and deleted independently")
    func listOverwriteDelete() async throws {
        let store = FileCredentialStore(url: try scratchDirectory().appendingPathComponent("c.json"))
        let bob = CredentialKey(provider: "facebook", appID: "1234", account: "bob")
        let work = CredentialKey(provider: "oidc", appID: "cli", account: "work")
        for k in [key, bob, work] { try await store.save(StoredCredential(key: k, token: fullToken)) }
        var replaced = fullToken
        replaced.tokenString = "replaced"
        try await store.save(StoredCredential(key: bob, token: replaced))

        #expect(try await store.list().map(\.key) == [key, bob, work])
        #expect(try await store.list(provider: "facebook").map(\.key) == [key, bob])
        #expect(try await store.load(bob)?.token.tokenString == "replaced")
        #expect(try await store.delete(key))
        #expect(try await store.delete(key) == false)
        #expect(try await store.list().map(\.key) == [bob, work])
    }

    @Test("the default location follows XDG_STATE_HOME, then HOME")
    func defaultLocation() {
        #expect(
            FileCredentialStore.defaultURL(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/h"]).path
                == "/x/state/sesame/credentials.json")
        #expect(
            FileCredentialStore.defaultURL(environment: ["HOME": "/h"]).path
                == "/h/.local/state/sesame/credentials.json")
        // Paths are joined as strings: trailing slashes do not double, a relative XDG variable
        // is ignored (the spec says so), and a home of "/" gives no "//".
        #expect(
            FileCredentialStore.defaultURL(environment: ["XDG_STATE_HOME": "/x/state//", "HOME": "/h"]).path
                == "/x/state/sesame/credentials.json")
        #expect(
            FileCredentialStore.defaultURL(environment: ["XDG_STATE_HOME": "state", "HOME": "/h/"]).path
                == "/h/.local/state/sesame/credentials.json")
        #expect(
            FileCredentialStore.defaultURL(environment: ["HOME": "/"]).path == "/.local/state/sesame/credentials.json")
        #expect(
            FileCredentialStore.defaultURL(environment: ["XDG_STATE_HOME": "/", "HOME": "/h"]).path
                == "/sesame/credentials.json")
        let locks = RefreshLock.defaultDirectory(environment: ["XDG_STATE_HOME": "/x/state/"])
        #expect(locks.path == "/x/state/sesame/locks")
        #expect(locks.hasDirectoryPath)
    }
}

/// A Boolean set from a `@Sendable` closure.
final class Flag: Sendable {
    private let storage = Locked(false)
    func set(_ value: Bool) { storage.withLock { $0 = value } }
    var value: Bool { storage.withLock { $0 } }
}

import Foundation
import Testing

@testable import Sesame

#if canImport(Glibc)
    import Glibc
#endif

private func scratch() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-private-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func permissions(_ path: String) -> Int {
    var info = stat()
    return lstat(path, &info) == 0 ? Int(info.st_mode & 0o777) : -1
}

private let credential = StoredCredential(
    key: CredentialKey(provider: "facebook", appID: "1234", account: "alice"),
    token: AccessToken(tokenString: "EAAB-secret-token", provider: "facebook", appID: "1234", userID: "1"))

@Suite("The file store's directory and lock file under attack")
struct PrivateFilesTests {
    @Test("a dangling symbolic link as the lock file is refused, and its target is not created")
    func danglingLockSymlink() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = directory.appendingPathComponent("planted-by-someone-else").path
        let store = FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
        #expect(symlink(target, store.url.path + ".lock") == 0)
        let error = try await #require(throws: CredentialStoreError.self) { try await store.save(credential) }
        #expect(error.kind == .insecurePermissions)
        #expect(error.message.contains("symbolic link") && error.message.contains("rm '"))
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(!FileManager.default.fileExists(atPath: store.url.path))
    }

    @Test("a symbolic link to an existing file as the lock file is refused too")
    func lockSymlinkToFile() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = directory.appendingPathComponent("victim")
        try Data("keep me".utf8).write(to: target)
        let store = FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
        #expect(symlink(target.path, store.url.path + ".lock") == 0)
        await #expect(throws: CredentialStoreError.self) { try await store.save(credential) }
        #expect(try Data(contentsOf: target) == Data("keep me".utf8))
    }

    @Test("a state directory left at 0777 is made private before a token is written in it")
    func worldWritableDirectory() async throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("sesame")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        #expect(chmod(directory.path, 0o777) == 0)
        let store = FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
        try await store.save(credential)
        #expect(permissions(directory.path) == 0o700)
        #expect(permissions(store.url.path) == 0o600)
        #expect(try await store.load(credential.key)?.token.tokenString == "EAAB-secret-token")
    }

    @Test("a lock file others may write to is tightened to 0600; a directory in its place is refused")
    func lockFileModes() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("x.lock").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o666]))
        #expect(chmod(path, 0o666) == 0)
        let fd = try PrivateFiles.lock(path)
        close(fd)
        #expect(permissions(path) == 0o600)
        let other = directory.appendingPathComponent("d.lock")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: false)
        #expect(throws: CredentialStoreError.self) { _ = try PrivateFiles.lock(other.path) }
    }
}

@Suite("Reading small files and the environment without Foundation's readers")
struct PlainReadsTests {
    @Test("contents(atPath:) reads a file whole, and gives nil for what is not a readable regular file")
    func contents() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("state.json").path
        // Longer than one read, with bytes that are not UTF-8.
        let bytes = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(PrivateFiles.contents(atPath: path) == bytes)
        #expect(PrivateFiles.contents(atPath: path, limit: 9_999) == nil)
        #expect(PrivateFiles.contents(atPath: path + ".missing") == nil)
        #expect(PrivateFiles.contents(atPath: directory.path) == nil)
        try Data().write(to: URL(fileURLWithPath: path))
        #expect(PrivateFiles.contents(atPath: path) == Data())
        // A /proc file says its size is 0 and has bytes all the same.
        let comm = try #require(PrivateFiles.contents(atPath: "/proc/self/comm"))
        #expect(comm.last == UInt8(ascii: "\n") && comm.count > 1)
    }

    @Test("the environment read from environ is the one Foundation reads")
    func environment() {
        let plain = ProcessEnvironment.current()
        #expect(plain == ProcessInfo.processInfo.environment)
        #expect(plain["PATH"] != nil)
    }
}

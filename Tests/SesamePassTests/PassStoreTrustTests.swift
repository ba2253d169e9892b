import CGPGME
import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesamePass

/// What another user, or a killed process, could leave in a password store, against a real
/// GnuPG and the real `pass`: a planted `.gpg-id`, an unsigned one when a signing key is set, a
/// folder others may write, a symbolic link for an entry, a temporary file; and gpg-agent's
/// secure memory running out.
@Suite("The password store trusts only what its user could have written, as pass does")
struct PassStoreTrustTests {
    typealias Fixture = PassStoreTests

    /// `pass insert -m NAME` with `environment` added to `home`'s, as a person would run it.
    static func passInsert(
        _ home: GnuPGHome, _ name: String, environment extra: [String: String] = [:]
    ) async throws -> ProcessResult {
        try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/pass"), ["insert", "-m", name], input: Data("tok\n".utf8),
            environment: home.environment.merging(extra) { $1 })
    }

    /// Writes a `.gpg-id` as `pass init` does: mode 0600, whatever the umask.
    static func writeGPGID(_ text: String, to url: URL) throws {
        try text.write(to: url, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }

    static func mode(_ url: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int)
    }

    @Test(
        "a .gpg-id naming an imported, unvalidated key gets no login, as with pass; certified, the key is used")
    func untrustedRecipient() async throws {
        try await withGnuPGHome { home in
            let attacker = try await home.importForeignKey(userID: "Mallory <mallory@example.invalid>")
            let folder = home.store.appendingPathComponent("sesame/github")
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
            for recipients in [[attacker], [home.fingerprint, attacker]] {
                try Self.writeGPGID(
                    recipients.joined(separator: "\n") + "\n", to: folder.appendingPathComponent(".gpg-id"))
                let refused = await #expect(throws: CredentialStoreError.self) {
                    try await store.save(Fixture.credential())
                }
                #expect(refused?.kind == .untrustedRecipient, "\(String(describing: refused))")
                #expect(refused?.message.contains("gpg --edit-key '\(attacker)' trust") == true)
                #expect(refused?.message.contains(home.fingerprint) == false, "only the key at fault is named")
                let byPass = try await Self.passInsert(home, "sesame/github/by-pass")
                #expect(byPass.status != 0, "pass insert encrypted to \(recipients)")
                #expect(Fixture.entryFiles(home).filter { $0.hasSuffix(".gpg") } == [])
            }
            try await home.gpg(["--batch", "--yes", "--quick-lsign-key", attacker])
            try await store.save(Fixture.credential())
            #expect(try await store.load(Fixture.key)?.token.tokenString == "gho_access-123")
        }
    }

    @Test(
        "with a signing key set, a .gpg-id unsigned, changed or signed by another key is refused, as by pass")
    func signedGPGID() async throws {
        try await withGnuPGHome { home in
            let signing = ["PASSWORD_STORE_SIGNING_KEY": home.fingerprint]
            let store = PassCredentialStore(
                directory: home.store, gnupgHome: home.home.path,
                signingKeys: PassCredentialStore.defaultSigningKeys(environment: signing))
            #expect(store.signingKeys == [home.fingerprint])
            let gpgID = home.store.appendingPathComponent(".gpg-id")

            func expectRefused(_ words: String, _ comment: Comment) async throws {
                let refused = await #expect(throws: CredentialStoreError.self, comment) {
                    try await store.save(Fixture.credential())
                }
                #expect(refused?.kind == .unsignedRecipients, comment)
                #expect(refused?.message.contains(words) == true, "\(String(describing: refused))")
                #expect(refused?.message.contains("PASSWORD_STORE_SIGNING_KEY") == true)
                #expect(try await Self.passInsert(home, "sesame/by-pass", environment: signing).status != 0, comment)
                #expect(Fixture.entryFiles(home).filter { $0.hasSuffix(".gpg") } == [], comment)
            }

            try await expectRefused("has no signature", "unsigned")

            let initialised = try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/pass"), ["init", home.fingerprint],
                environment: home.environment.merging(signing) { $1 })
            #expect(initialised.status == 0, "\(initialised.standardError)")
            #expect(FileManager.default.fileExists(atPath: gpgID.path + ".sig"))
            try await store.save(Fixture.credential())
            #expect(try await store.load(Fixture.key)?.token.tokenString == "gho_access-123")
            #expect(try await store.delete(Fixture.key))

            let attacker = try await home.importForeignKey(userID: "Mallory <mallory@example.invalid>")
            let signed = try String(contentsOf: gpgID, encoding: .utf8)
            try Self.writeGPGID(signed + attacker + "\n", to: gpgID)
            try await expectRefused("is not a good signature", "changed after signing")

            try await home.gpg([
                "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                "Other <other@example.invalid>", "future-default", "default", "never",
            ])
            try await home.gpg([
                "--batch", "--yes", "--local-user", "other@example.invalid", "--detach-sign", "--output",
                gpgID.path + ".sig", gpgID.path,
            ])
            try await expectRefused("is not a good signature", "signed by another key")
        }
    }

    @Test(
        "a folder or .gpg-id others may write is refused, not repaired, by save, load and list alike")
    func foldersOthersMayWrite() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
            try await store.save(Fixture.credential())
            #expect(store.permissionProblem() == nil)
            for folder in ["", "sesame", "sesame/github", "sesame/github/github.com"] {
                let url = folder.isEmpty ? home.store : home.store.appendingPathComponent(folder)
                #expect(chmod(url.path, 0o777) == 0)
                let fix = "chmod go-w '\(url.path)'"
                let saving = await #expect(throws: CredentialStoreError.self) {
                    try await store.save(Fixture.credential(token: "new"))
                }
                #expect(saving?.kind == .insecurePermissions, "\(folder)")
                #expect(saving?.message.contains(fix) == true, "\(String(describing: saving))")
                let loading = await #expect(throws: CredentialStoreError.self) { try await store.load(Fixture.key) }
                #expect(loading?.message.contains(fix) == true, "\(String(describing: loading))")
                let listing = await #expect(throws: CredentialStoreError.self) { try await store.list() }
                #expect(listing?.message.contains(fix) == true, "\(String(describing: listing))")
                #expect(store.permissionProblem()?.message.contains(fix) == true, "\(folder)")
                #expect(try Self.mode(url) == 0o777, "the folder was repaired, and what was planted would be used")
                #expect(chmod(url.path, 0o700) == 0)
            }
            #expect(try await store.load(Fixture.key)?.token.tokenString == "gho_access-123")

            let gpgID = home.store.appendingPathComponent(".gpg-id")
            #expect(chmod(gpgID.path, 0o666) == 0)
            let planted = await #expect(throws: CredentialStoreError.self) {
                try await store.save(Fixture.credential(token: "new"))
            }
            #expect(planted?.kind == .insecurePermissions)
            #expect(planted?.message.contains(gpgID.path) == true, "\(String(describing: planted))")
            #expect(store.permissionProblem()?.message.contains(gpgID.path) == true)
            #expect(try await store.load(Fixture.key)?.token.tokenString == "gho_access-123")
            #expect(chmod(gpgID.path, 0o600) == 0)

            // Another user's folder: only root can make one here.
            if geteuid() == 0 {
                let folder = home.store.appendingPathComponent("sesame/github")
                #expect(chown(folder.path, 65534, 65534) == 0)
                let owned = await #expect(throws: CredentialStoreError.self) { try await store.load(Fixture.key) }
                #expect(owned?.message.contains("belongs to another user (uid 65534)") == true)
                #expect(chown(folder.path, 0, 0) == 0)
            } else {
                print("Not checked: a folder of another user (this test runs as uid \(geteuid()), not root).")
            }
            try await store.save(Fixture.credential(token: "new"))
            #expect(try await store.load(Fixture.key)?.token.tokenString == "new")
        }
    }

    @Test(
        "an entry or folder that is a symbolic link out of the store is refused by load, reported by list")
    func symbolicLinks() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
            try await store.save(Fixture.credential())
            // The attacker's login, encrypted to the user's key, outside the store.
            let outside = home.home.deletingLastPathComponent().appendingPathComponent("outside")
            let planter = PassCredentialStore(directory: outside, gnupgHome: home.home.path, signingKeys: [])
            try FileManager.default.createDirectory(
                at: outside, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try Self.writeGPGID("\(home.fingerprint)\n", to: outside.appendingPathComponent(".gpg-id"))
            try await planter.save(Fixture.credential(Fixture.key.with(account: "mallory"), token: "attacker-token"))
            let mallory = Fixture.key.with(account: "mallory")
            try FileManager.default.createSymbolicLink(
                atPath: home.store.appendingPathComponent("sesame/github/github.com/mallory.gpg").path,
                withDestinationPath: outside.appendingPathComponent("sesame/github/github.com/mallory.gpg").path)

            let refused = await #expect(throws: CredentialStoreError.self) { try await store.load(mallory) }
            #expect(refused?.kind == .insecurePermissions)
            #expect(refused?.message.contains("symbolic link") == true, "\(String(describing: refused))")
            let listing = try await store.listing(provider: nil)
            #expect(listing.credentials.map(\.key) == [Fixture.key])
            #expect(listing.unreadable.map(\.key) == [mallory])
            #expect(store.permissionProblem()?.message.contains("mallory.gpg") == true)

            let gitlab = CredentialKey(provider: "gitlab", appID: "github.com", account: "mallory")
            try FileManager.default.createSymbolicLink(
                atPath: home.store.appendingPathComponent("sesame/gitlab").path,
                withDestinationPath: outside.appendingPathComponent("sesame/github").path)
            let folder = await #expect(throws: CredentialStoreError.self) { try await store.load(gitlab) }
            #expect(folder?.message.contains("sesame/gitlab is a symbolic link") == true)
        }
    }

    @Test("temporary files that killed saves left are ignored by list and removed by the next save in their folder")
    func staleTemporaryFiles() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
            try await store.save(Fixture.credential())
            let folder = home.store.appendingPathComponent("sesame/github/github.com")
            let stale = [".alice.gpg.tmp-AbC123", ".bob.gpg.tmp-Zz9_09"]
            for name in stale + [".notes"] {
                try Data("half-written".utf8).write(to: folder.appendingPathComponent(name))
            }
            let listing = try await store.listing(provider: nil)
            #expect(listing.credentials.map(\.key) == [Fixture.key])
            #expect(listing.unreadable.isEmpty)
            try await store.save(Fixture.credential(token: "new"))
            let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            #expect(left == [".notes", "alice.gpg"])
            #expect(try await store.load(Fixture.key)?.token.tokenString == "new")
        }
    }

    @Test(
        "gpg-agent out of secure memory: decryption retried once after a short pause, then explained")
    func outOfSecureMemory() async throws {
        try await withGnuPGHome { home in
            try await PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
                .save(Fixture.credential())
            let outOfMemory = GPGME.Failure(error: gpgme_error_t(GPG_ERR_ENOMEM.rawValue))
            let badData = GPGME.Failure(error: gpgme_error_t(GPG_ERR_BAD_DATA.rawValue))
            for (failures, failure, attempts) in [(1, outOfMemory, 2), (2, outOfMemory, 2), (1, badData, 1)] {
                let made = Locked(0)
                let pauses = Locked<[Duration]>([])
                var hooks = PassCredentialStore.Hooks()
                hooks.beforeDecrypt = {
                    made.withLock {
                        $0 += 1
                        return $0 <= failures ? failure : nil
                    }
                }
                hooks.pause = { duration in pauses.withLock { $0.append(duration) } }
                let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, hooks: hooks)
                let result: Result<StoredCredential?, any Error>
                do { result = .success(try await store.load(Fixture.key)) } catch { result = .failure(error) }
                #expect(made.withLock { $0 } == attempts, "\(failures) × \(failure.text)")
                if failure.isTransient, failures == 1 {
                    #expect(try result.get()?.token.tokenString == "gho_access-123")
                    let pause = try #require(pauses.withLock { $0 }.first)
                    #expect(pause >= .milliseconds(100) && pause <= .milliseconds(300))
                } else {
                    let error = try #require(result.failure as? CredentialStoreError)
                    #expect(error.kind == .ioFailure)
                    #expect(error.message.contains("auto-expand-secmem") == failure.isTransient, "\(error)")
                    #expect(pauses.withLock { $0 }.count == attempts - 1)
                }
            }
        }
    }

    @Test("twenty loads at once all succeed")
    func concurrentLoads() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path, signingKeys: [])
            try await store.save(Fixture.credential())
            let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<20 { group.addTask { try await store.load(Fixture.key)?.token.tokenString } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(tokens == Array(repeating: "gho_access-123", count: 20))
        }
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesamePass

/// `PassCredentialStore` against a real GnuPG and the real `pass`: a key the test makes, with a
/// passphrase that gpg-agent asks a (scripted) pinentry for.
@Suite("The password store (pass), on GPGME")
struct PassStoreTests {
    static let key = CredentialKey(provider: "github", appID: "github.com", account: "alice")
    static let issuerKey = CredentialKey(
        provider: "oidc", issuer: "https://id.example.com/realms/a b", appID: "desktop", account: "../bob")

    static func credential(_ key: CredentialKey = key, token: String = "gho_access-123") -> StoredCredential {
        let accessToken = AccessToken(
            tokenString: token, provider: key.provider, appID: key.appID, userID: "1234",
            permissions: PermissionSet(granted: ["repo", "read:org"], declined: ["admin"]),
            expirationDate: Date(timeIntervalSince1970: 1_800_000_000),
            refreshDate: Date(timeIntervalSince1970: 1_700_000_000.25),
            refreshToken: "ghr_refresh-456", refreshTokenExpirationDate: Date(timeIntervalSince1970: 1_900_000_000),
            idToken: "eyJ.id.token", providerExtras: ["data_access_expires_at": .number(1_810_000_000)])
        return StoredCredential(key: key, token: accessToken, savedAt: Date(timeIntervalSince1970: 1_700_000_001))
    }

    static func entryFiles(_ home: GnuPGHome) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: home.store.path)
        return (enumerator?.allObjects as? [String] ?? []).filter { !$0.hasPrefix(".git") }.sorted()
    }

    @Test(
        "a login round-trips through an encrypted entry, is listed, and is removed; `pass show` prints the token first")
    func roundTrip() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            let saved = Self.credential()
            try await store.save(saved)
            try await store.save(Self.credential(Self.issuerKey, token: "oidc-token"))
            #expect(try await store.load(Self.key) == saved)
            #expect(try await store.load(Self.issuerKey)?.token.tokenString == "oidc-token")
            #expect(try await store.load(Self.key.with(account: "carol")) == nil)

            // On disk: encrypted (no token in the file), under sesame/, names made safe.
            let files = Self.entryFiles(home)
            #expect(files.contains("sesame/github/github.com/alice.gpg"), "\(files)")
            #expect(
                files.contains("sesame/oidc/https%3A%2F%2Fid.example.com%2Frealms%2Fa%20b/desktop/%2E.%2Fbob.gpg"),
                "\(files)")
            let bytes = try Data(contentsOf: home.store.appendingPathComponent("sesame/github/github.com/alice.gpg"))
            #expect(!String(decoding: bytes, as: UTF8.self).contains("gho_access-123"))

            let shown = try await home.run("pass", ["show", "sesame/github/github.com/alice"])
            let lines = shown.split(separator: "\n").map(String.init)
            #expect(lines.first == "gho_access-123")
            #expect(lines.contains("refresh_token: ghr_refresh-456"))
            #expect(lines.contains("scopes: read:org repo"))
            #expect(lines.contains("expires: 2027-01-15T08:00:00Z"))

            #expect(try await store.list().map(\.key) == [Self.key, Self.issuerKey].sorted())
            #expect(try await store.list(provider: "oidc").map(\.key) == [Self.issuerKey])
            #expect(try await store.containsEntries(provider: "github"))
            #expect(try await store.delete(Self.key))
            #expect(try await !store.delete(Self.key))
            #expect(try await store.load(Self.key) == nil)
            #expect(!FileManager.default.fileExists(atPath: home.store.appendingPathComponent("sesame/github").path))
            #expect(try await !store.containsEntries(provider: "github"))
        }
    }

    @Test(
        "an entry written with `pass insert -m`, edited by hand (keys reordered, notes, no final newline), is read back"
    )
    func readsWhatPassWrote() async throws {
        try await withGnuPGHome { home in
            let text =
                "tok-from-pass\r\nnotes: written by hand\n\nExpires: 2027-01-15T08:00:00Z\nrandom line\n"
                + "refresh_token:   r-tok  \nscopes: repo,gist"
            try await home.run("pass", ["insert", "-m", "sesame/github/github.com/alice"], input: text)
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            let read = try #require(try await store.load(Self.key))
            #expect(read.token.tokenString == "tok-from-pass")
            #expect(read.token.refreshToken == "r-tok")
            #expect(read.token.permissions.granted == ["repo", "gist"])
            #expect(read.token.expirationDate == Date(timeIntervalSince1970: 1_800_000_000))
            #expect(read.key == Self.key)

            // An entry that is not a login: reported, and left in place.
            try await home.run("pass", ["insert", "-m", "sesame/github/github.com/bad"], input: "\nrefresh_token: x\n")
            let listing = try await store.listing(provider: nil)
            #expect(listing.credentials.map(\.key) == [Self.key])
            #expect(listing.unreadable.map(\.key) == [Self.key.with(account: "bad")])
            await #expect(throws: CredentialStoreError.self) { try await store.load(Self.key.with(account: "bad")) }
            #expect(Self.entryFiles(home).contains("sesame/github/github.com/bad.gpg"))
        }
    }

    @Test("a subfolder's .gpg-id wins: its entries are encrypted to its recipients, as pass does")
    func subfolderRecipients() async throws {
        try await withGnuPGHome { home in
            // A second key, with no passphrase, for the sesame/github folder only.
            try await home.gpg([
                "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                "Other <other@example.invalid>", "future-default", "default", "never",
            ])
            try await home.run("pass", ["init", "-p", "sesame/github", "other@example.invalid"])
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            try await store.save(Self.credential())
            let packets = try await home.runAllowingFailure(
                "gpg",
                [
                    "--batch", "--list-packets",
                    home.store.appendingPathComponent("sesame/github/github.com/alice.gpg").path,
                ])
            let keyIDs = try await home.gpg(["--batch", "--with-colons", "--list-keys", "other@example.invalid"])
            let otherSubkey = try #require(
                keyIDs.split(separator: "\n").filter { $0.hasPrefix("sub:") }.first?.split(separator: ":")[4])
            #expect(packets.standardOutput.contains(String(otherSubkey)), "\(packets.standardOutput)")
            #expect(try await store.load(Self.key)?.token.tokenString == "gho_access-123")
        }
    }

    @Test("a save that fails before its rename leaves the old entry and no temporary file")
    func atomicSave() async throws {
        try await withGnuPGHome { home in
            try await PassCredentialStore(directory: home.store, gnupgHome: home.home.path).save(Self.credential())
            struct Injected: Error {}
            let failing = PassCredentialStore(directory: home.store, gnupgHome: home.home.path) { path in
                #expect(FileManager.default.fileExists(atPath: path))
                throw Injected()
            }
            await #expect(throws: Injected.self) { try await failing.save(Self.credential(token: "new-token")) }
            #expect(Self.entryFiles(home).filter { $0.contains(".tmp-") } == [])
            #expect(try await failing.load(Self.key)?.token.tokenString == "gho_access-123")
        }
    }

    @Test("a wrong passphrase and a cancelled prompt are `locked` errors that say so; nothing is lost")
    func passphraseFailures() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            try await store.save(Self.credential())
            try await home.forgetPassphrase()
            try home.setPinentryAnswer("not the passphrase")
            let wrong = await #expect(throws: CredentialStoreError.self) { try await store.load(Self.key) }
            #expect(wrong?.kind == .locked, "\(String(describing: wrong))")
            #expect(wrong?.message.contains("passphrase") == true)
            try home.setPinentryAnswer(nil)
            let cancelled = await #expect(throws: CredentialStoreError.self) { try await store.list() }
            #expect(cancelled?.kind == .locked, "\(String(describing: cancelled))")
            #expect(cancelled?.message.contains("cancelled") == true)
            try home.setPinentryAnswer(GnuPGHome.passphrase)
            #expect(try await store.load(Self.key)?.token.tokenString == "gho_access-123")
        }
    }

    @Test("an entry for a key whose secret key is not here: `noSecretKey`, listed as unreadable, kept")
    func noSecretKey() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            try await store.save(Self.credential())
            try await home.gpg(["--batch", "--yes", "--delete-secret-keys", home.fingerprint])
            let error = await #expect(throws: CredentialStoreError.self) { try await store.load(Self.key) }
            #expect(error?.kind == .noSecretKey, "\(String(describing: error))")
            #expect(error?.message.contains("gpg --import") == true)
            let listing = try await store.listing(provider: nil)
            #expect(listing.unreadable.map(\.key) == [Self.key])
            #expect(Self.entryFiles(home).contains("sesame/github/github.com/alice.gpg"))
        }
    }

    @Test("a store without .gpg-id says `pass init KEYID`; a .gpg-id naming an unknown key says so; nothing written")
    func recipientsFailures() async throws {
        try await withGnuPGHome { home in
            try FileManager.default.removeItem(at: home.store.appendingPathComponent(".gpg-id"))
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            let missing = await #expect(throws: CredentialStoreError.self) { try await store.save(Self.credential()) }
            #expect(missing?.kind == .unavailable)
            #expect(missing?.message.contains("pass init KEYID") == true, "\(String(describing: missing))")
            #expect(!PassCredentialStore.isInitialised(home.store))

            try "nobody@example.invalid\n".write(
                to: home.store.appendingPathComponent(".gpg-id"), atomically: true, encoding: .utf8)
            let unknown = await #expect(throws: CredentialStoreError.self) {
                try await store.checkWritable(for: Self.key)
            }
            #expect(unknown?.kind == .unknownRecipient, "\(String(describing: unknown))")
            #expect(unknown?.message.contains("nobody@example.invalid") == true)
            #expect(Self.entryFiles(home).filter { $0.hasSuffix(".gpg") } == [])
        }
    }

    @Test("a gpg-agent that cannot be started: `unavailable`, saying how to start it; nothing lost")
    func agentNotRunning() async throws {
        try await withGnuPGHome { home in
            let store = PassCredentialStore(directory: home.store, gnupgHome: home.home.path)
            try await store.save(Self.credential())
            await home.stopAgent()
            try "no-autostart\n".write(
                to: home.home.appendingPathComponent("gpg.conf"), atomically: true, encoding: .utf8)
            let error = await #expect(throws: CredentialStoreError.self) { try await store.load(Self.key) }
            #expect(error?.kind == .unavailable, "\(String(describing: error))")
            #expect(error?.message.contains("gpg-agent") == true)
            #expect(Self.entryFiles(home).contains("sesame/github/github.com/alice.gpg"))
        }
    }

    @Test("names are made safe: no slash, no leading dot, no `..`; they decode back")
    func names() {
        for part in ["..", ".", "", "a/b", "%41", "ok-Name_1.2@x+y=z,w", "ünï"] {
            let encoded = PassCredentialStore.encode(part)
            #expect(!encoded.contains("/") && !encoded.hasPrefix(".") && !encoded.isEmpty, "\(encoded)")
            #expect(PassCredentialStore.decode(encoded) == part)
        }
        #expect(PassCredentialStore.key(forEntry: "sesame/github/github.com/alice") == Self.key)
        #expect(PassCredentialStore.key(forEntry: "other/github/github.com/alice") == nil)
    }
}

import Foundation
import SesameTestSupport
import Testing

@Suite("The hot path starts nothing it does not use")
struct HotPathTests {
    init() { TestProviders.bootstrap() }

    @Test("token with a stored login of the built-in emulator prints it without starting the emulator")
    func tokenStartsNoEmulator() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "default", token: "EAAhotpath")
        let token = await cli.run(["token", "facebook"])
        #expect(token.status == 0, "\(token.error)")
        #expect(token.output == "EAAhotpath\n")
        let state = cli.root.appending(path: "state/sesame/emulator.json")
        #expect(!FileManager.default.fileExists(atPath: state.path), "the emulator started (and saved its state)")
    }

    @Test("status lists only the providers whose search finds a login")
    func statusListsOnlyWhatIsThere() async throws {
        let empty = try InProcessCLI()
        let nothing = await empty.run(["status"])
        #expect(nothing.status == 77, "\(nothing.output)\(nothing.error)")
        #expect(empty.store.searches >= 2, "every provider is searched for: \(empty.store.searches)")
        #expect(empty.store.listings == 0, "a provider with nothing stored was listed")

        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "default", token: "EAAlisted")
        let status = await cli.run(["status", "--timeout", "60"])
        #expect(status.output.contains("default"), "\(status.output)\(status.error)")
        #expect(cli.store.listings == 1, "only Facebook has a login: \(cli.store.listings) listings")
    }

    @Test("status with a stored login of the built-in emulator starts it on the first request and asks it")
    func statusStartsEmulatorOnUse() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "default", token: "EAAunknown")
        let status = await cli.run(["status", "--timeout", "60"])
        // The emulator does not know this token: it was asked, and said so.
        #expect(status.status == 77, "\(status.output)\(status.error)")
        #expect(status.output.contains("default"), "\(status.output)")
        #expect(!status.output.contains("sesame-emulator.invalid"), "the placeholder address leaked: \(status.output)")
        let state = cli.root.appending(path: "state/sesame/emulator.json")
        #expect(FileManager.default.fileExists(atPath: state.path), "the emulator was never started")
    }
}

@Suite("libcurl, libmicrohttpd and libcrypto are loaded only by a command that uses them")
struct LazyLibcurlTests {
    init() { TestProviders.bootstrap() }

    /// Runs `sesame arguments` with `LD_DEBUG=files`, under which the dynamic loader reports on
    /// standard error every shared library it opens, including those opened later by dlopen.
    static func run(_ cli: CLIHarness, _ arguments: [String], input: String = "") async throws -> ProcessResult {
        try await cli.run("sesame", arguments, input: Data(input.utf8), environment: ["LD_DEBUG": "files"])
    }

    @Test("--help and token never open libcurl or libcrypto; a command that makes a request does")
    func onlyWhenNeeded() async throws {
        let cli = try CLIHarness()
        let help = try await Self.run(cli, ["--help"])
        #expect(help.status == 0)
        #expect(help.standardError.contains("file=libsecret-1.so.0"), "LD_DEBUG=files reported no libraries")
        #expect(!help.standardError.contains("libcurl"), "sesame --help opened libcurl")
        #expect(!help.standardError.contains("libmicrohttpd"), "sesame --help opened libmicrohttpd")
        #expect(!help.standardError.contains("libgnutls"), "sesame --help opened GnuTLS")
        #expect(!help.standardError.contains("libcrypto"), "sesame --help opened libcrypto")

        let token = try await Self.run(cli, ["token", "facebook"])
        #expect(token.status == 77, "nothing is logged in: \(token.standardError.suffix(400))")
        #expect(!token.standardError.contains("libcurl"), "sesame token opened libcurl")
        #expect(!token.standardError.contains("libmicrohttpd"), "sesame token opened libmicrohttpd")
        #expect(!token.standardError.contains("libcrypto"), "sesame token opened libcrypto")

        // With nothing logged in, status has nothing to check: no built-in emulator starts (the
        // GitHub one did, for every status, until it became one that starts on first use).
        let status = try await Self.run(cli, ["status"])
        #expect(status.status == 77, "nothing is logged in: \(status.standardError.suffix(400))")
        #expect(!status.standardError.contains("libmicrohttpd"), "sesame status started an emulator")
        #expect(!status.standardError.contains("libcurl"), "sesame status opened libcurl with nothing to check")
        #expect(!status.standardError.contains("libcrypto"), "sesame status opened libcrypto")

        // Checking a pasted token asks the built-in emulator's Graph API over HTTP.
        let login = try await Self.run(cli, ["login", "facebook", "--with-token"], input: "EAAnot0a0real0token\n")
        #expect(login.status != 0, "the emulator knows no such token")
        #expect(login.standardError.contains("file=libcurl.so.4"), "\(login.standardError.suffix(600))")
        // The built-in emulator, started in the process for that request, runs on libmicrohttpd.
        #expect(login.standardError.contains("file=libmicrohttpd.so.12"), "\(login.standardError.suffix(600))")
        // The emulator draws its tokens' random bytes from libcrypto, opened then.
        #expect(login.standardError.contains("file=libcrypto.so.3"), "\(login.standardError.suffix(600))")
    }
}

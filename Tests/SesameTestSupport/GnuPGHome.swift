import Foundation

/// A throw-away GnuPG home and password store for tests: a key the test generates, protected by
/// a passphrase; a gpg-agent whose pinentry is a script answering the Assuan protocol from a file
/// (so every decryption goes through the agent's passphrase request, as a person's would); and
/// `pass init` done with that key. The path is short (`/tmp/sg-XXXXXX`): gpg-agent's socket lives
/// in it, and a Unix socket's path is limited to 107 bytes.
///
/// ``stop()`` stops the agent (`gpgconf --kill gpg-agent`) and removes everything; use it through
/// ``withGnuPGHome(_:)``.
public final class GnuPGHome: Sendable {
    /// The GNUPGHOME.
    public let home: URL
    /// The password store (`PASSWORD_STORE_DIR`).
    public let store: URL
    /// The key's fingerprint.
    public let fingerprint: String
    /// The passphrase the key was made with.
    public static let passphrase = "correct horse battery staple"
    /// The key's user id.
    public static let userID = "Sesame Test <sesame-test@example.invalid>"

    private let root: URL

    /// `GNUPGHOME`, `PASSWORD_STORE_DIR` and a `PATH`: the whole environment a `pass` or `sesame`
    /// child needs (add `HOME` and the like).
    public var environment: [String: String] { Self.environment(home: home, store: store) }

    private static func environment(home: URL, store: URL) -> [String: String] {
        [
            "GNUPGHOME": home.path, "PASSWORD_STORE_DIR": store.path, "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8", "HOME": home.deletingLastPathComponent().path,
        ]
    }

    /// Makes the home, the key and the store. Fails (throws) when gpg, gpgconf or pass is missing.
    public init() async throws {
        var template = Array("/tmp/sg-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure("mkdtemp failed: errno \(errno)")
        }
        root = URL(fileURLWithPath: template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        home = root.appendingPathComponent("g")
        store = root.appendingPathComponent("s")
        try FileManager.default.createDirectory(
            at: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let pinentry = root.appendingPathComponent("pinentry")
        try Self.pinentryScript.write(to: pinentry, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: pinentry.path)
        try "pinentry-program \(pinentry.path)\n".write(
            to: home.appendingPathComponent("gpg-agent.conf"), atomically: true, encoding: .utf8)
        try Self.setPinentryAnswer(Self.passphrase, root: root)
        let environment = Self.environment(home: home, store: store)
        _ = try await Self.run(
            "gpg",
            [
                "--batch", "--pinentry-mode", "loopback", "--passphrase", Self.passphrase, "--quick-gen-key",
                Self.userID, "future-default", "default", "never",
            ], environment: environment)
        let listed = try await Self.run(
            "gpg", ["--batch", "--with-colons", "--list-secret-keys"], environment: environment)
        guard let line = listed.split(separator: "\n").first(where: { $0.hasPrefix("fpr:") }),
            let found = line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first
        else { throw Failure("the generated key has no fingerprint: \(listed)") }
        fingerprint = String(found)
        _ = try await Self.run("pass", ["init", fingerprint], environment: environment)
    }

    /// What the pinentry script answers from now on: `passphrase`, or `nil` for "cancelled".
    public func setPinentryAnswer(_ passphrase: String?) throws {
        try Self.setPinentryAnswer(passphrase, root: root)
    }

    private static func setPinentryAnswer(_ passphrase: String?, root: URL) throws {
        let answer = root.appendingPathComponent("answer")
        try (passphrase.map { "D \($0)" } ?? "CANCEL").write(to: answer, atomically: true, encoding: .utf8)
    }

    /// Makes the agent forget the passphrase it cached, so that the next decryption asks again.
    public func forgetPassphrase() async throws { _ = try await run("gpgconf", ["--reload", "gpg-agent"]) }

    /// Makes a key in a GnuPG home of its own (someone else's key, with no passphrase), imports
    /// its public part here as `gpg --import` does (so it is known but not valid: nobody here
    /// certified it), and returns its fingerprint. The other home's agent is stopped before this
    /// returns.
    public func importForeignKey(userID: String) async throws -> String {
        let foreign = root.appendingPathComponent("f-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(
            at: foreign, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        var environment = self.environment
        environment["GNUPGHOME"] = foreign.path
        let exported: String
        do {
            _ = try await Self.run(
                "gpg",
                [
                    "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", userID,
                    "future-default", "default", "never",
                ], environment: environment)
            exported = try await Self.run("gpg", ["--batch", "--armor", "--export", userID], environment: environment)
        } catch {
            _ = try? await Self.runAllowingFailure(
                "gpgconf", ["--kill", "gpg-agent"], input: "", environment: environment)
            throw error
        }
        _ = try? await Self.runAllowingFailure("gpgconf", ["--kill", "gpg-agent"], input: "", environment: environment)
        try await run("gpg", ["--batch", "--import"], input: exported)
        let listed = try await gpg(["--batch", "--with-colons", "--list-keys", userID])
        guard let line = listed.split(separator: "\n").first(where: { $0.hasPrefix("fpr:") }),
            let found = line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first
        else { throw Failure("the imported key has no fingerprint: \(listed)") }
        return String(found)
    }

    /// Stops the agent and waits for it to be gone.
    public func stopAgent() async { _ = try? await run("gpgconf", ["--kill", "gpg-agent"]) }

    /// Stops the agent and removes the home and the store.
    public func stop() async {
        await stopAgent()
        try? FileManager.default.removeItem(at: root)
    }

    /// Runs `gpg` with this home.
    @discardableResult public func gpg(_ arguments: [String]) async throws -> String {
        try await run("gpg", arguments)
    }

    /// Runs a program (`pass`, `gpg`, `gpgconf`) with this home's environment; throws on failure.
    @discardableResult public func run(
        _ program: String, _ arguments: [String], input: String = ""
    ) async throws
        -> String
    {
        try await Self.run(program, arguments, input: input, environment: environment)
    }

    private static func run(
        _ program: String, _ arguments: [String], input: String = "", environment: [String: String]
    ) async throws -> String {
        let result = try await runAllowingFailure(program, arguments, input: input, environment: environment)
        guard result.status == 0 else {
            throw Failure("\(program) \(arguments.first ?? "") failed (\(result.status)): \(result.standardError)")
        }
        return result.standardOutput
    }

    /// Runs a program with this home's environment and returns how it ended.
    public func runAllowingFailure(
        _ program: String, _ arguments: [String], input: String = ""
    ) async throws
        -> ProcessResult
    {
        try await Self.runAllowingFailure(program, arguments, input: input, environment: environment)
    }

    private static func runAllowingFailure(
        _ program: String, _ arguments: [String], input: String, environment: [String: String]
    ) async throws -> ProcessResult {
        guard
            let path = ["/usr/bin/", "/bin/", "/usr/local/bin/"].map({ $0 + program })
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw Failure("\(program) is not installed; run scripts/bootstrap (it installs gnupg and pass)") }
        return try await ProcessRunner.run(
            URL(fileURLWithPath: path), arguments, input: Data(input.utf8),
            environment: environment)
    }

    /// A test-support failure with what went wrong.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// The pinentry: answers each request with OK, and GETPIN with the line in `answer` beside
    /// it (`D <passphrase>`), or with the error of a cancelled prompt when the line is `CANCEL`.
    private static let pinentryScript = #"""
        #!/bin/sh
        answer="$(cat "$(dirname "$0")/answer")"
        echo "OK Pleased to meet you"
        while IFS= read -r line; do
            case "$line" in
                GETPIN*)
                    if [ "$answer" = CANCEL ]; then echo "ERR 83886179 Operation cancelled <Pinentry>"
                    else printf '%s\nOK\n' "$answer"; fi ;;
                BYE*) echo "OK closing connection"; exit 0 ;;
                *) echo OK ;;
            esac
        done
        """#
}

/// Runs `body` with a fresh ``GnuPGHome``, stopping its agent and removing it afterwards.
public func withGnuPGHome<T>(_ body: (GnuPGHome) async throws -> T) async throws -> T {
    try await withStarted({ try await GnuPGHome() }, stop: { await $0.stop() }, body)
}

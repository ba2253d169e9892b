import Foundation
import Sesame
import SesameKeyring
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Whether and how the keyring tests can run here.
///
/// `scripts/with-keyring` runs the tests inside a private D-Bus session with an unlocked,
/// throw-away gnome-keyring and sets `SESAME_TEST_KEYRING=1`. Without it, the tests that need
/// a keyring are skipped with the reason printed; with it, a keyring or tool that is missing
/// makes them fail with a message that says so, never pass.
enum KeyringTestSupport {
    /// Whether the run promises a keyring (`SESAME_TEST_KEYRING=1`).
    static let keyringPromised = ProcessInfo.processInfo.environment["SESAME_TEST_KEYRING"] == "1"

    /// The reason printed when keyring tests are skipped.
    static let keyringSkipReason: Comment =
        "needs a Secret Service: run `scripts/with-keyring swift test --filter SesameKeyringTests`"

    /// The Secret Service the test scripts started: what it is and its default collection's label.
    struct Service: Sendable {
        var kind: SecretServiceProvider.Kind
        var defaultCollection: String
    }

    /// `scripts/with-keepassxc` sets `SESAME_TEST_SECRET_SERVICE=keepassxc`; `scripts/with-keyring`
    /// starts GNOME Keyring.
    static let service: Service =
        ProcessInfo.processInfo.environment["SESAME_TEST_SECRET_SERVICE"] == "keepassxc"
        ? Service(kind: .keePassXC, defaultCollection: "Sesame tests")
        : Service(kind: .gnomeKeyring, defaultCollection: "Login")

    /// The KeePassXC database that serves the Secret Service, under `scripts/with-keepassxc`.
    static let keePassXCDatabase = ProcessInfo.processInfo.environment["SESAME_TEST_KEEPASSXC_DATABASE"]

    /// The reason printed when KeePassXC-only tests are skipped.
    static let keePassXCSkipReason: Comment =
        "needs KeePassXC as the Secret Service: run `scripts/with-keepassxc swift test --filter SesameKeyringTests`"

    /// The database at `path` as XML, every value in clear (`keepassxc-cli export`), history
    /// and Recycle Bin included.
    static func exportDatabase(_ path: String) async throws -> String {
        let password = ProcessInfo.processInfo.environment["SESAME_TEST_KEEPASSXC_PASSWORD"] ?? ""
        let result = try await run(
            "keepassxc-cli", ["export", "-q", "-f", "xml", path], input: Data((password + "\n").utf8))
        try #require(result.status == 0, "keepassxc-cli export failed: \(result.standardError)")
        return result.standardOutput
    }

    /// Exports the database until `condition` holds for the export, for up to 20 seconds;
    /// returns whether it came to hold.
    ///
    /// KeePassXC saves a change a moment after it is made, and skips that save when one is
    /// already under way, so the file may lag behind until the next change: every two seconds
    /// `poke` makes one (a change of its own, unrelated to what is checked).
    static func waitForDatabase(
        _ path: String, poke: () async throws -> Void, until condition: (String) -> Bool
    ) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        var nextPoke = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            if let export = try? await exportDatabase(path), condition(export) { return true }
            if ContinuousClock.now >= nextPoke {
                try? await poke()
                nextPoke = ContinuousClock.now + .seconds(2)
            }
            try? await Task.sleep(for: .milliseconds(300))
        }
        return false
    }

    /// Whether tests that need the given command-line tools should run: when the tools are all
    /// there, or when a keyring was promised (so that a missing tool fails the test).
    static func canRun(needing tools: [String]) -> Bool {
        keyringPromised || tools.allSatisfy { executable($0) != nil }
    }

    /// A reason for skipping tests that need `tools`.
    static func skipReason(needing tools: [String]) -> Comment {
        "needs \(tools.joined(separator: ", ")) on PATH (install them with scripts/bootstrap)"
    }

    /// The full path of `name` on PATH, or nil.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// The full path of `name` on PATH; records a failure naming it when it is missing.
    static func requireExecutable(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        guard let path = executable(name) else {
            let message = "\(name) is not on PATH, and this test needs it; install it (scripts/bootstrap installs "
            Issue.record(Comment(rawValue: message + "every tool the tests use)."), sourceLocation: sourceLocation)
            throw MissingPrerequisite(name: name)
        }
        return path
    }

    /// The test helper that makes one keyring call in its own process.
    static func probe(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        do {
            return try ProcessRunner.builtExecutable("sesame-keyring-probe")
        } catch {
            Issue.record(Comment(rawValue: "\(error)"), sourceLocation: sourceLocation)
            throw error
        }
    }

    /// Runs a tool (secret-tool, gdbus) to completion; one that hangs is killed after a minute
    /// and the test fails.
    static func run(
        _ tool: String, _ arguments: [String], input: Data = Data(), environment: [String: String]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ProcessResult {
        let path = try requireExecutable(tool, sourceLocation: sourceLocation)
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: path), arguments, input: input, environment: environment, killAfter: .seconds(60))
        #expect(
            !result.wasKilled, "\(tool) \(arguments.first ?? "") hung and was killed", sourceLocation: sourceLocation)
        return result
    }

    /// A directory for one test, removed by `remove()`.
    static func scratchDirectory() throws -> URL {
        var template = Array("\(NSTemporaryDirectory())/sesame-keyring-test.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw MissingPrerequisite(name: "a temporary directory")
        }
        return URL(fileURLWithPath: String(cString: made), isDirectory: true)
    }
}

/// Thrown after a failure naming what is missing has been recorded.
struct MissingPrerequisite: Error, CustomStringConvertible {
    var name: String
    var description: String { "missing \(name)" }
}

/// What `sesame-keyring-probe` printed.
typealias ProbeResult = KeyringProbeOutput

/// Runs the probe with `arguments` and `DBUS_SESSION_BUS_ADDRESS` set to `busAddress` (or unset
/// when nil), and decodes what it printed.
func runProbe(
    _ arguments: [String], busAddress: String?, extraEnvironment: [String: String] = [:],
    removing: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
) async throws -> ProbeResult {
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
    for name in removing { environment[name] = nil }
    environment.merge(extraEnvironment) { _, new in new }
    let result = try await ProcessRunner.run(
        try KeyringTestSupport.probe(), arguments, environment: environment, killAfter: .seconds(60))
    #expect(!result.wasKilled, "the probe hung and was killed", sourceLocation: sourceLocation)
    do {
        return try JSONDecoder().decode(ProbeResult.self, from: Data(result.standardOutput.utf8))
    } catch {
        Issue.record(
            "the probe printed no result (exit \(result.status)): \(result.standardOutput) \(result.standardError)",
            sourceLocation: sourceLocation)
        throw error
    }
}

import Foundation
import Sesame
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
struct ProbeResult: Decodable, Sendable {
    var ok: Bool
    var kind: String?
    var message: String?
    var found: Bool?
    var keys: [String]?
    var backend: String?
    var warning: String?
    var status: String?
}

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

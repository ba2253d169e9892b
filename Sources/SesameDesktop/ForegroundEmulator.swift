import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A provider's emulator as `sesame emulator NAME` runs it: in the foreground, on 127.0.0.1,
/// until a signal. A plug-in offers one with ``ProviderPlugin/foregroundEmulator``.
public protocol ForegroundEmulator: Sendable {
    /// One line for `sesame emulator --help`: what it serves.
    var summary: String { get }
    /// A paragraph for `sesame emulator --help`.
    var discussion: String { get }
    /// Its options beyond `--port` (their names must not clash with another emulator's unless
    /// they mean the same).
    var options: [EmulatorOption] { get }
    /// Example command lines with a comment each.
    var examples: [(command: String, comment: String)] { get }

    /// Runs it until one of `request.signals`, printing its banner (addresses, app or client id,
    /// what to try) on `request.write`; returns the signal that stopped it, once it answered the
    /// requests in flight and saved its state.
    ///
    /// - Throws: ``DesktopError`` for an option that is wrong (`.usage`), a port or state file that
    ///   cannot be had; the emulator's own errors.
    func serve(_ request: EmulatorServeRequest) async throws -> Int32
}

extension ForegroundEmulator {
    public var options: [EmulatorOption] { [] }
    public var examples: [(command: String, comment: String)] { [] }
}

/// An option of a foreground emulator (`--scenario NAME`, `--in-memory`).
public struct EmulatorOption: Sendable, Hashable {
    /// The name without the dashes.
    public var name: String
    /// The value's placeholder (`NAME`), or `nil` for a flag.
    public var value: String?
    /// Whether it may be given more than once.
    public var repeatable: Bool
    /// One sentence of help.
    public var help: String

    /// Creates an option.
    public init(_ name: String, value: String? = nil, repeatable: Bool = false, _ help: String) {
        self.name = name
        self.value = value
        self.repeatable = repeatable
        self.help = help
    }
}

/// What `sesame emulator NAME` asks of a foreground emulator.
public struct EmulatorServeRequest: Sendable {
    /// The port on 127.0.0.1; 0 picks a free one.
    public var port: Int
    /// The options given, by name (each value in order; a flag has an empty value).
    public var options: [String: [String]]
    /// The environment (for `XDG_STATE_HOME`).
    public var environment: [String: String]
    /// The signals that stop it.
    public var signals: [Int32]
    /// Writes to standard output.
    public var write: @Sendable (String) -> Void
    /// Writes to standard error.
    public var writeError: @Sendable (String) -> Void

    /// Creates a request.
    public init(
        port: Int, options: [String: [String]], environment: [String: String], signals: [Int32],
        write: @escaping @Sendable (String) -> Void, writeError: @escaping @Sendable (String) -> Void
    ) {
        self.port = port
        self.options = options
        self.environment = environment
        self.signals = signals
        self.write = write
        self.writeError = writeError
    }

    /// The last value of option `name`, if given.
    public func value(_ name: String) -> String? { options[name]?.last }
    /// Whether flag `name` was given.
    public func flag(_ name: String) -> Bool { options[name] != nil }
}

/// Checks on an emulator's state file before it starts, for the plug-ins' emulators.
package enum EmulatorStateFile {
    /// Why `stateFile` cannot be written, or `nil` when its directory takes a new file.
    package static func unwritable(_ stateFile: String) -> String? {
        let directory = URL(fileURLWithPath: stateFile).deletingLastPathComponent()
        do {
            try PrivateFiles.makeDirectories(directory.path)
        } catch {
            return "its directory \(directory.path) cannot be created"
        }
        let probe = directory.appendingPathComponent(".sesame-write-check-\(getpid())").path
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            return "its directory \(directory.path) is not writable (\(String(cString: strerror(errno))))"
        }
        close(descriptor)
        unlink(probe)
        return nil
    }
}

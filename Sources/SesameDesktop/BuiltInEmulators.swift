import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Whether a program allows the built-in emulators: local stand-ins that provider plug-ins bring
/// for providers that need an app registered with them (Facebook, GitHub), used when no app is
/// configured.
///
/// `SesameDesktop` contains no emulator and never starts one by itself: a library app with no
/// app id configured gets a configuration error. The `sesame` command and the examples allow
/// them explicitly with ``sesame``; each plug-in then starts its own
/// (``ProviderPlugin/builtInEmulator``).
public struct BuiltInEmulators: Sendable, Hashable {
    /// Every plug-in's own built-in emulator, started in-process on a free loopback port with
    /// its state under `$XDG_STATE_HOME/sesame/`.
    public static let sesame = BuiltInEmulators()

    /// Set in the environment handed to a plug-in's hooks when the logins are kept in memory
    /// (`--storage memory`): its emulator then keeps its state in memory too, writing no file.
    public static let inMemoryVariable = "SESAME_EMULATOR_IN_MEMORY"

    /// The emulator of `plugin` as a command of `purpose` needs it: for a login, started now (its
    /// approval step, a browser's address); for any other command, one that starts on its first
    /// request when the plug-in can describe it unstarted, so a command that sends none starts
    /// nothing. `nil` when the plug-in has no built-in emulator.
    ///
    /// - Throws: what the plug-in's hooks throw (a bad scenario setting, a port or state file that
    ///   cannot be had).
    ///
    /// With `storage` `memory`, the hooks get ``inMemoryVariable``.
    public func emulator(
        of plugin: any ProviderPlugin, purpose: ConnectionPurpose, environment: [String: String],
        storage: StorageMode? = nil
    ) async throws -> RunningEmulator? {
        guard let hooks = plugin.builtInEmulator else { return nil }
        var environment = environment
        if storage == .memory { environment[Self.inMemoryVariable] = "1" }
        if purpose != .login, let prepare = hooks.prepare, let prepared = try prepare(environment) { return prepared }
        return try await hooks.start(environment)
    }
}

/// How a plug-in starts its built-in emulator (``ProviderPlugin/builtInEmulator``).
public struct BuiltInEmulator: Sendable {
    /// Starts it now.
    public var start: @Sendable (_ environment: [String: String]) async throws -> RunningEmulator
    /// Describes it without starting it (it starts on its first request, see
    /// ``RunningEmulator/route``), or returns `nil` when it cannot (then ``start`` is used).
    public var prepare: (@Sendable (_ environment: [String: String]) throws -> RunningEmulator?)?

    /// Creates the hooks.
    public init(
        start: @escaping @Sendable (_ environment: [String: String]) async throws -> RunningEmulator,
        prepare: (@Sendable (_ environment: [String: String]) throws -> RunningEmulator?)? = nil
    ) {
        self.start = start
        self.prepare = prepare
    }
}

/// An emulator started for one command, as a provider plug-in uses it.
public struct RunningEmulator: Sendable {
    /// Its addresses, by the names its provider's plug-in reads (`base`, `graph`).
    public var endpoints: [String: URL]
    /// The app registered in it.
    public var appID: String
    /// The app's client credential (Facebook's client token), when it has one.
    public var clientCredential: String?
    /// Where it keeps its state.
    public var stateFile: URL
    /// The person it approves logins as.
    public var personName: String
    /// Approves a device login's code.
    public var approveDevice: @Sendable (_ userCode: String) async throws -> Void
    /// Approves a browser login's dialog; returns the redirect to follow.
    public var approveDialog: @Sendable (_ dialog: URL) async throws -> URL
    /// Stops it, saving its state.
    ///
    /// - Throws: when its state could not be saved.
    public var stop: @Sendable () async throws -> Void
    /// Wraps the transport a provider uses to reach it: for an emulator that starts on first use,
    /// a transport that starts it and sends requests for ``endpoints`` to its real address; for a
    /// started one, the transport itself.
    public var route: @Sendable (any HTTPTransport) -> any HTTPTransport

    /// Creates a description of a running emulator.
    public init(
        endpoints: [String: URL], appID: String, clientCredential: String?, stateFile: URL, personName: String,
        approveDevice: @escaping @Sendable (_ userCode: String) async throws -> Void,
        approveDialog: @escaping @Sendable (_ dialog: URL) async throws -> URL,
        stop: @escaping @Sendable () async throws -> Void,
        route: @escaping @Sendable (any HTTPTransport) -> any HTTPTransport = { $0 }
    ) {
        self.endpoints = endpoints
        self.appID = appID
        self.clientCredential = clientCredential
        self.stateFile = stateFile
        self.personName = personName
        self.approveDevice = approveDevice
        self.approveDialog = approveDialog
        self.stop = stop
        self.route = route
    }
}

extension RunningEmulator {
    /// Stops the emulator; when its state could not be saved, says so on `terminal`, naming it
    /// `name` ("built-in emulator").
    ///
    /// - Parameters:
    ///   - name: what to call it in the message.
    ///   - terminal: where to say it.
    public func stop(named name: String, telling terminal: Terminal) async {
        do {
            try await stop()
        } catch {
            terminal.say("The \(name)'s state could not be saved: \(error.sentence)\n")
        }
    }
}

/// A built-in emulator's hold on its state file while it runs in this process: two commands that
/// each start the emulator (`sesame login facebook --account a` and `--account b` at once) would
/// otherwise each read the file, issue their tokens and write it back, the last one losing the
/// other's login. The second waits, saying so, until the first has saved and stopped.
public final class EmulatorStateHold: Sendable {
    private let descriptor: Mutex<Int32?>

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    deinit { release() }

    /// Takes the hold on `stateFile` (a lock file beside it), waiting for another process that
    /// has it; `name` ("the built-in Facebook emulator") is for the message said while waiting.
    ///
    /// - Throws: ``DesktopError`` (73) when the lock file cannot be had.
    public static func take(stateFile: URL, name: String, terminal: Terminal) async throws -> EmulatorStateHold {
        let path = stateFile.path + ".running"
        var said = false
        do {
            try await onOwnThread { try PrivateFiles.ensurePrivateDirectory(stateFile.deletingLastPathComponent()) }
            while true {
                if let descriptor = try PrivateFiles.tryLock(path) { return EmulatorStateHold(descriptor: descriptor) }
                if !said {
                    terminal.say("Waiting for another sesame command that uses \(name) to finish…\n")
                    said = true
                }
                // Another process's hold has no event to wait on; a command with a deadline
                // (`status`) cancels the wait.
                try await Task.sleep(for: .milliseconds(100))
            }
        } catch let error as CredentialStoreError {
            throw DesktopError(
                "\(name.prefix(1).uppercased() + name.dropFirst()) cannot keep its state: \(error.message)",
                status: .cannotCreate)
        }
    }

    /// Writes an emulator's state to `stateFile` with mode 0600, replacing the file at once (a
    /// new file beside it, renamed over it): a reader sees the old state or the new, never part
    /// of one. `name` ("the built-in GitHub emulator") is for the error.
    ///
    /// - Throws: ``DesktopError`` (73) naming the directory to make writable.
    public static func save(_ data: Data, to stateFile: URL, name: String) throws {
        let directory = stateFile.deletingLastPathComponent()
        do {
            try PrivateFiles.ensurePrivateDirectory(directory)
            try PrivateFiles.replace(atPath: stateFile.path, with: data)
        } catch {
            throw DesktopError(
                "\(name.prefix(1).uppercased() + name.dropFirst())'s tokens could not be kept in \(stateFile.path): "
                    + "make \(directory.path) writable, or set XDG_STATE_HOME to a directory that is.",
                status: .cannotCreate)
        }
    }

    /// Lets the next process have it.
    public func release() {
        if let open = descriptor.withLock({ value in
            defer { value = nil }; return value
        }) {
            close(open)
        }
    }
}

import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A provider's emulator as a program hands it in (``Desktop/bootstrap(_:storage:emulators:programName:)``
/// or ``BuiltInEmulators/init(_:)``): each lives in a module of its own beside the emulator
/// (`SesameFacebookEmulatorDesktop`), so that a provider's plug-in links no emulator and an app
/// that names none compiles none.
public protocol EmulatorPlugin: Sendable {
    /// The ``ProviderPlugin/name`` of the provider it stands in for.
    var provider: String { get }
    /// How it starts for one command, when no app is configured; `nil` for none.
    var builtIn: BuiltInEmulator? { get }
    /// What `sesame emulator NAME` runs in the foreground; `nil` for none.
    var foreground: (any ForegroundEmulator)? { get }
}

extension EmulatorPlugin {
    public var builtIn: BuiltInEmulator? { nil }
    public var foreground: (any ForegroundEmulator)? { nil }
}

/// Whether a program allows the built-in emulators: local stand-ins for providers that need an
/// app registered with them (Facebook, GitHub), used when no app is configured.
///
/// `SesameDesktop` contains no emulator and never starts one by itself: a library app with no
/// app id configured gets a configuration error. The `sesame` command allows the emulators it
/// registered with ``sesame``; a library app names its own with ``init(_:)``.
public struct BuiltInEmulators: Sendable {
    /// The emulators allowed; `nil` for those the program registered.
    private let given: [any EmulatorPlugin]?

    /// The emulators the program registered with ``Desktop/bootstrap(_:storage:emulators:programName:)``
    /// (and a plug-in's own ``ProviderPlugin/builtInEmulator``), each started in-process on a
    /// free loopback port with its state under `$XDG_STATE_HOME/sesame/`.
    public static let sesame = BuiltInEmulators(given: nil)

    /// Exactly `emulators`, for an app that does not call ``Desktop/bootstrap(_:storage:emulators:programName:)``:
    /// `Desktop.facebook(emulators: BuiltInEmulators([FacebookEmulatorPlugin()]))`.
    public init(_ emulators: [any EmulatorPlugin]) { given = emulators }

    private init(given: [any EmulatorPlugin]?) { self.given = given }

    /// Set in the environment handed to a plug-in's hooks when the logins are kept in memory
    /// (`--storage memory`): its emulator then keeps its state in memory too, writing no file.
    public static let inMemoryVariable = "SESAME_EMULATOR_IN_MEMORY"

    /// How `plugin`'s emulator starts, when one is allowed.
    func hooks(for plugin: any ProviderPlugin) -> BuiltInEmulator? {
        (given ?? Desktop.emulators).first { $0.provider == plugin.name }?.builtIn ?? plugin.builtInEmulator
    }

    /// The emulator of `plugin` as a command of `purpose` needs it: for a login, started now (its
    /// approval step, a browser's address); for any other command, one that starts on its first
    /// request when the plug-in can describe it unstarted, so a command that sends none starts
    /// nothing. `nil` when no emulator is allowed for the plug-in.
    ///
    /// - Throws: what the emulator's hooks throw (a bad scenario setting, a port or state file that
    ///   cannot be had).
    ///
    /// With `storage` `memory`, the hooks get ``inMemoryVariable``.
    public func emulator(
        of plugin: any ProviderPlugin, purpose: ConnectionPurpose, environment: [String: String],
        storage: StorageMode? = nil
    ) async throws -> RunningEmulator? {
        guard let hooks = hooks(for: plugin) else { return nil }
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
    /// The lock file, removed when the hold is let go: nothing is left beside the state file.
    private let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = Mutex(descriptor)
        self.path = path
    }

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
                if let descriptor = try PrivateFiles.tryLock(path) {
                    // The holder before may have removed the file it locked after this process opened
                    // it: only a lock on the file still at `path` holds.
                    var held = stat()
                    var current = stat()
                    if fstat(descriptor, &held) == 0, stat(path, &current) == 0, held.st_ino == current.st_ino,
                        held.st_dev == current.st_dev
                    {
                        return EmulatorStateHold(descriptor: descriptor, path: path)
                    }
                    close(descriptor)
                    continue
                }
                if !said {
                    terminal.say("Waiting for another \(Desktop.programName) command that uses \(name) to finish…\n")
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

    /// Lets the next process have it, removing the lock file (while still holding it, so that
    /// a process waiting on it sees it gone and opens a new one).
    public func release() {
        if let open = descriptor.withLock({ value in
            defer { value = nil }; return value
        }) {
            unlink(path)
            close(open)
        }
    }
}

import Foundation
import Sesame

/// The built-in emulators a program allows: local stand-ins for providers that need an app
/// registered with them (Facebook), used when no app is configured.
///
/// `SesameDesktop` does not contain an emulator and never starts one by itself: a library app
/// with no app id configured gets a configuration error. The `sesame` command and the examples
/// ask for Sesame's emulators explicitly with `BuiltInEmulators.sesame` (module
/// `SesameDesktopEmulator`), which keeps their zero-setup behaviour.
public struct BuiltInEmulators: Sendable {
    /// Starts the emulator for the provider named by the plug-in (`facebook`), or returns `nil`
    /// when there is none for it.
    public var start: @Sendable (_ provider: String, _ environment: [String: String]) async throws -> RunningEmulator?

    /// Describes the emulator for the provider without starting it, or returns `nil` when it
    /// cannot (then ``start`` is used). The emulator it returns starts on its first request (see
    /// ``RunningEmulator/route``), so a command that only reads the store (`sesame token`) never
    /// binds a port or reads the emulator's state.
    public var prepare: (@Sendable (_ provider: String, _ environment: [String: String]) throws -> RunningEmulator?)?

    /// Creates the hooks.
    public init(
        start:
            @escaping @Sendable (_ provider: String, _ environment: [String: String]) async throws
            -> RunningEmulator?,
        prepare: (@Sendable (_ provider: String, _ environment: [String: String]) throws -> RunningEmulator?)? = nil
    ) {
        self.start = start
        self.prepare = prepare
    }

    /// The emulator for `provider` as a command of `purpose` needs it: for a login, started now
    /// (its approval step, a browser's address); for any other command, one that starts on its
    /// first request when ``prepare`` can describe it, so a command that sends none starts
    /// nothing. `nil` when the program has no emulator for the provider.
    ///
    /// - Throws: what ``prepare`` or ``start`` throws (a bad scenario setting, a port or state
    ///   file that cannot be had).
    public func emulator(
        for provider: String, purpose: ConnectionPurpose, environment: [String: String]
    ) async throws -> RunningEmulator? {
        if purpose != .login, let prepare, let prepared = try prepare(provider, environment) { return prepared }
        return try await start(provider, environment)
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
    func stop(named name: String, telling terminal: Terminal) async {
        do {
            try await stop()
        } catch {
            terminal.say("The \(name)'s state could not be saved: \(error)\n")
        }
    }
}

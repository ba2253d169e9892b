internal import CLibSecret
internal import CLibSecretShim
import Foundation
import Sesame

/// The program that provides the Secret Service on the session bus (the owner of the bus name
/// `org.freedesktop.secrets`), and what to tell its user.
///
/// Advice differs between services: GNOME Keyring is unlocked in Passwords and Keys (seahorse),
/// KeePassXC by opening its database, KWallet in KDE Wallet Manager. Sesame names the service
/// that actually answers, found from the process that owns the bus name.
public struct SecretServiceProvider: Sendable, Hashable, CustomStringConvertible {
    /// The Secret Services Sesame knows by name.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// GNOME Keyring (`gnome-keyring-daemon`).
        case gnomeKeyring
        /// KeePassXC with its Secret Service integration on.
        case keePassXC
        /// KDE's KWallet (`kwalletd5`, `kwalletd6`, `ksecretd`).
        case kWallet
        /// Another program; ``SecretServiceProvider/name`` is its process name.
        case other
    }

    /// Which service it is.
    public let kind: Kind
    /// The owner's process name as the kernel reports it (`/proc/PID/comm`), when it could be read.
    public let processName: String?
    /// The owner's process id, when the bus told it.
    public let processID: Int?

    /// Creates a description of a provider.
    public init(kind: Kind, processName: String?, processID: Int?) {
        self.kind = kind
        self.processName = processName
        self.processID = processID
    }

    /// Recognises the service from the owner's process name (`gnome-keyring-d`, `keepassxc`, `kwalletd6`, …).
    public init(processName: String?, processID: Int?) {
        let name = (processName ?? "").lowercased()
        let kind: Kind
        if name.hasPrefix("gnome-keyring") {
            kind = .gnomeKeyring
        } else if name.hasPrefix("keepassxc") {
            kind = .keePassXC
        } else if name.hasPrefix("kwalletd") || name.hasPrefix("ksecretd") {
            kind = .kWallet
        } else {
            kind = .other
        }
        self.init(kind: kind, processName: processName, processID: processID)
    }

    /// The service's name for people: `GNOME Keyring`, `KeePassXC`, `KWallet`, or the process
    /// name of another one (`the Secret Service` when not even that is known).
    public var name: String {
        switch kind {
        case .gnomeKeyring: "GNOME Keyring"
        case .keePassXC: "KeePassXC"
        case .kWallet: "KWallet"
        case .other: processName.map { "\($0)" } ?? "the Secret Service"
        }
    }

    /// For example `KeePassXC (pid 4242)`.
    public var description: String { processID.map { "\(name) (pid \($0))" } ?? name }

    /// Where and how the person unlocks a locked collection of this service.
    public var unlockAdvice: String {
        switch kind {
        case .gnomeKeyring:
            "unlock the keyring in Passwords and Keys (seahorse), or with `secret-tool search --unlock xdg:schema "
                + "org.sesame.Credential`, or log in to the desktop again"
        case .keePassXC:
            "unlock the database in the KeePassXC window (the one whose group is exposed under Database Settings → "
                + "Secret Service Integration)"
        case .kWallet:
            "open the wallet in KDE Wallet Manager (kwalletmanager), or log in to the desktop again"
        case .other:
            "unlock it in \(name), or with `secret-tool search --unlock xdg:schema org.sesame.Credential`"
        }
    }

    /// How the person gives this service a default collection (where new items are saved).
    public var defaultCollectionAdvice: String {
        switch kind {
        case .gnomeKeyring:
            "create a “Login” keyring in Passwords and Keys (seahorse), or make an existing keyring the default"
        case .keePassXC:
            "open a database in KeePassXC and expose a group of it under Database Settings → Secret Service "
                + "Integration (the first exposed database is the default)"
        case .kWallet:
            "create a wallet in KDE Wallet Manager (kwalletmanager) and make it the default"
        case .other:
            "give \(name) a default collection (its `default` alias), as its documentation says"
        }
    }

    /// Whether searching a locked collection makes this service ask the person to unlock it and
    /// wait for the answer (KeePassXC does, unless told otherwise; a locked KeePassXC database
    /// also shows no items), so that Sesame must not search locked collections without asking.
    var searchOfLockedCollectionPrompts: Bool { kind == .keePassXC }
}

/// What the session bus's Secret Service is and how its default collection stands, for
/// diagnostics such as `sesame doctor`. Read without unlocking or starting anything.
public struct SecretServiceInfo: Sendable, Hashable {
    /// The program that owns `org.freedesktop.secrets`, or nil when nobody does.
    public var provider: SecretServiceProvider?
    /// The label of the collection the `default` alias names, or nil when there is none (or no service).
    public var defaultCollection: String?
    /// Whether that collection is locked.
    public var isLocked: Bool

    /// Creates a description.
    public init(provider: SecretServiceProvider?, defaultCollection: String?, isLocked: Bool) {
        self.provider = provider
        self.defaultCollection = defaultCollection
        self.isLocked = isLocked
    }

    /// Asks the bus who provides the Secret Service and reads its default collection's label
    /// and `Locked` property. Starts nothing (no D-Bus activation) and unlocks nothing.
    ///
    /// - Parameters:
    ///   - busAddress: the bus to ask (a `DBUS_SESSION_BUS_ADDRESS` value); nil for the
    ///     process's session bus.
    ///   - timeout: the longest the whole probe may take.
    /// - Throws: `CredentialStoreError` when the bus cannot be reached or does not answer in time.
    public static func probe(
        busAddress: String? = nil, timeout: Duration = .seconds(3)
    ) async throws
        -> SecretServiceInfo
    {
        let operation = "asking the session bus about the Secret Service"
        do {
            return try await KeyringWorker.shared.run(
                timeout: timeout,
                timeoutError: { stage in KeyringMessages.timedOut(stage: stage, operation, timeout) }
            ) { cancellation in
                cancellation.stage = .bus
                let connection = try BusConnection(address: busAddress, cancellation: cancellation)
                cancellation.stage = .service
                return read(on: connection.pointer, cancellation: cancellation)
            }
        } catch let error as LibSecretError {
            throw KeyringMessages.storeError(error, operation, timeout)
        }
    }

    /// The owner of `org.freedesktop.secrets` on `connection`, or nil when nobody owns it. The
    /// bus is asked for the owner's unique name, unless given, then for its process id.
    static func provider(
        on connection: OpaquePointer, owner known: String? = nil, cancellation: Cancellation
    ) -> SecretServiceProvider? {
        var error: UnsafeMutablePointer<GError>?
        let owner: String
        if let known {
            owner = known
        } else {
            guard
                let asked = sesame_name_owner(connection, "org.freedesktop.secrets", 2000, cancellation.pointer, &error)
            else {
                if let error { g_error_free(error) }
                return nil
            }
            owner = String(cString: asked)
            g_free(asked)
        }
        let pid = sesame_connection_pid(connection, owner, 2000, cancellation.pointer, &error)
        if let error { g_error_free(error) }
        guard pid > 0 else { return SecretServiceProvider(processName: nil, processID: nil) }
        // The kernel's name of the program, ending in a newline. Read and trimmed without
        // Foundation's string machinery, which cost this call more than its D-Bus round trip.
        let name = PrivateFiles.contents(atPath: "/proc/\(pid)/comm", limit: 4096).map { data -> String in
            let bytes = [UInt8](data)
            let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
            guard let first = bytes.firstIndex(where: { !isSpace($0) }),
                let last = bytes.lastIndex(where: { !isSpace($0) })
            else { return "" }
            return String(decoding: bytes[first...last], as: UTF8.self)
        }
        return SecretServiceProvider(processName: name?.isEmpty == false ? name : nil, processID: Int(pid))
    }

    private static func read(on connection: OpaquePointer, cancellation: Cancellation) -> SecretServiceInfo {
        guard let provider = provider(on: connection, cancellation: cancellation) else {
            return SecretServiceInfo(provider: nil, defaultCollection: nil, isLocked: false)
        }
        var error: UnsafeMutablePointer<GError>?
        let reply = sesame_call(
            connection, "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
            "ReadAlias", sesame_variant_string_tuple("default"), "(o)", 2000, cancellation.pointer, &error)
        if let error { g_error_free(error) }
        guard let reply else { return SecretServiceInfo(provider: provider, defaultCollection: nil, isLocked: false) }
        defer { g_variant_unref(reply) }
        let copy = sesame_variant_first_string(reply)
        defer { g_free(copy) }
        let path = copy.map { String(cString: $0) } ?? "/"
        guard path != "/" else { return SecretServiceInfo(provider: provider, defaultCollection: nil, isLocked: false) }
        let collection = "org.freedesktop.Secret.Collection"
        var label = ""
        if let text = sesame_secret_string_property(
            connection, path, collection, "Label", 2000, cancellation.pointer, &error)
        {
            label = String(cString: text)
            g_free(text)
        }
        if let error { g_error_free(error) }
        error = nil
        let locked = sesame_secret_bool_property(
            connection, path, collection, "Locked", 2000, cancellation.pointer, &error)
        if let error { g_error_free(error) }
        return SecretServiceInfo(provider: provider, defaultCollection: label, isLocked: locked == 1)
    }
}

/// A bus connection owned by Swift: the process's session bus, or one opened to an address.
final class BusConnection {
    let pointer: OpaquePointer

    init(address: String?, cancellation: Cancellation) throws(LibSecretError) {
        var error: UnsafeMutablePointer<GError>?
        let connection: OpaquePointer?
        if let address {
            connection = sesame_bus_for_address(address, cancellation.pointer, &error)
        } else {
            connection = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellation.pointer, &error)
        }
        guard let connection else {
            if let error { throw LibSecretError(taking: error, stage: .bus) }
            throw LibSecretError(stage: .bus, failure: .disconnected, message: "no connection")
        }
        if address == nil { g_dbus_connection_set_exit_on_close(connection, 0) }
        pointer = connection
    }

    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }
}

extension SecretServiceInfo {
    /// One line of a diagnosis, such as `sesame doctor` prints.
    public struct Finding: Sendable, Hashable {
        /// How the line reads: fine, worth knowing, or in the way.
        public enum Level: Sendable, Hashable { case ok, warning, problem }

        /// How the line reads.
        public var level: Level
        /// What was found.
        public var text: String
        /// What to do about it, for a line that is not fine.
        public var fix: String?
        /// Whether ``fix`` offers the file store (the `file` storage policy), so that a program
        /// with its own switch for it can name that too (`sesame doctor` adds `--storage file`).
        package var suggestsFileStore = false

        /// Creates a finding.
        public init(_ level: Level, _ text: String, fix: String? = nil) {
            self.level = level
            self.text = text
            self.fix = fix
        }
    }

    /// What this says about the Secret Service, in the terms of the service that provides it:
    /// who that is, and whether its default collection is there and unlocked.
    public var findings: [Finding] {
        guard let provider else {
            var missing = Finding(
                .problem, "No Secret Service on the session bus (nobody owns org.freedesktop.secrets).",
                fix: "start one (GNOME Keyring: `gnome-keyring-daemon --start --components=secrets`; KeePassXC "
                    + "with Tools → Settings → Secret Service Integration on), or choose the `file` storage policy")
            missing.suggestsFileStore = true
            return [missing]
        }
        var findings = [Finding(.ok, "Secret Service (org.freedesktop.secrets) is provided by \(provider).")]
        switch (defaultCollection, isLocked) {
        case (let label?, false):
            findings.append(Finding(.ok, "The default collection “\(label)” of \(provider.name) is unlocked."))
        case (let label?, true):
            findings.append(
                Finding(
                    .warning, "The default collection “\(label)” of \(provider.name) is locked.",
                    fix: provider.unlockAdvice))
        case (nil, _):
            findings.append(
                Finding(
                    .warning, "\(provider.name) has no default collection (or it could not be read).",
                    fix: provider.defaultCollectionAdvice))
        }
        return findings
    }
}

internal import CLibSecret
internal import CLibSecretShim
import Foundation
import Sesame

/// A failure reported by GIO or libsecret, copied out of its `GError`.
struct LibSecretError: Error, Sendable {
    /// What the failure means.
    enum Failure: Sendable {
        case other, cancelled, noService, disconnected, noReply, locked, noSuchObject, accessDenied
    }

    /// The step that failed.
    var stage: KeyringStage
    /// What the failure means.
    var failure: Failure
    /// GLib's message, which never contains a secret.
    var message: String

    init(stage: KeyringStage, failure: Failure, message: String) {
        self.stage = stage
        self.failure = failure
        self.message = message
    }

    /// Copies and frees `error`.
    init(taking error: UnsafeMutablePointer<GError>, stage: KeyringStage) {
        self.stage = stage
        message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        let classification = sesame_classify_error(error).rawValue
        failure =
            switch classification {
            case SESAME_FAILURE_CANCELLED.rawValue: .cancelled
            case SESAME_FAILURE_NO_SERVICE.rawValue: .noService
            case SESAME_FAILURE_DISCONNECTED.rawValue: .disconnected
            case SESAME_FAILURE_NO_REPLY.rawValue: .noReply
            case SESAME_FAILURE_LOCKED.rawValue: .locked
            case SESAME_FAILURE_NO_SUCH_OBJECT.rawValue: .noSuchObject
            case SESAME_FAILURE_ACCESS_DENIED.rawValue: .accessDenied
            default: .other
            }
        g_error_free(error)
    }
}

/// How far a keyring call got, so that a timeout can say what did not answer.
enum KeyringStage: UInt8, Sendable {
    /// Connecting to the D-Bus session bus.
    case bus
    /// Reaching the Secret Service on the bus and opening a session with it.
    case service
    /// Searching, reading, writing or deleting items.
    case call
    /// Waiting for the person to answer an unlock prompt.
    case unlockPrompt
}

/// A reference to a GObject, released when the Swift value goes away. Used only within one
/// call on the keyring worker's queue, so it is not `Sendable`.
final class GObjectReference<Pointee> {
    let pointer: UnsafeMutablePointer<Pointee>

    /// Takes over a reference the caller owns.
    init(taking pointer: UnsafeMutablePointer<Pointee>) { self.pointer = pointer }

    deinit { g_object_unref(pointer) }
}

/// The process's D-Bus session bus connection, kept open between calls.
///
/// GIO shares one session bus connection per process and, by default, raises SIGTERM in the
/// process when that connection closes. A library must not kill its host because a keyring
/// went away, so Sesame turns that off for the connection it uses.
private let sessionBus = Locked<HeldConnection?>(nil)

/// The providers of the Secret Service met so far, by the owner's unique bus name (which is
/// never reused on a bus).
private let knownProviders = Locked<[String: SecretServiceProvider]>([:])

/// A `GDBusConnection` reference kept in `sessionBus`.
///
/// `@unchecked Sendable`: it is only read and replaced under the `sessionBus` mutex, and GDBus
/// connections are themselves safe to use from any thread.
private struct HeldConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// What a client's searches met, for the store to act on. Used within one worker call.
final class SearchNotes {
    /// A search left out a locked collection, because searching it would have made the service
    /// prompt (KeePassXC); the collection may hold matching items that cannot be seen until it
    /// is unlocked.
    var skippedLockedCollection = false
}

/// Synchronous libsecret calls for one keyring operation. Every method blocks, so a client
/// is made and used only inside a ``KeyringWorker`` call, with that call's cancellation.
struct LibSecretClient {
    let service: GObjectReference<SecretService>
    let cancellation: Cancellation
    /// What the searches of this client met.
    let notes = SearchNotes()

    /// The bus connection libsecret uses.
    var connection: OpaquePointer { sesame_proxy_connection(service.pointer) }

    /// The program that provides the Secret Service, or nil when it cannot be told. Found once
    /// per service instance (its unique bus name), then remembered: searches ask on every call.
    func provider() -> SecretServiceProvider? {
        guard let owner = sesame_proxy_name_owner(service.pointer) else {
            return SecretServiceInfo.provider(on: connection, cancellation: cancellation)
        }
        let name = String(cString: owner)
        g_free(owner)
        if let known = knownProviders.withLock({ $0[name] }) { return known }
        let found = SecretServiceInfo.provider(on: connection, owner: name, cancellation: cancellation)
        if let found { knownProviders.withLock { $0[name] = found } }
        return found
    }

    /// The object paths of the service's collections, each with whether it is locked, read
    /// afresh from the service (not from libsecret's cache).
    func collectionLocks() throws(LibSecretError) -> [(path: String, locked: Bool)] {
        var error: UnsafeMutablePointer<GError>?
        guard let paths = sesame_secret_collections(connection, 5000, cancellation.pointer, &error) else {
            throw Self.failure(error, stage: .call)
        }
        defer { g_strfreev(paths) }
        var states: [(path: String, locked: Bool)] = []
        var index = 0
        while let path = paths[index] {
            index += 1
            let locked = sesame_secret_bool_property(
                connection, path, "org.freedesktop.Secret.Collection", "Locked", 5000, cancellation.pointer, &error)
            if locked < 0 {
                let failure = Self.failure(error, stage: .call)
                error = nil
                if failure.failure == .noSuchObject { continue }
                throw failure
            }
            states.append((String(cString: path), locked == 1))
        }
        return states
    }

    /// Asks the service to unlock the collections at `paths`, which may show the person a
    /// prompt (through the Secret Service's Prompt API); returns whether all were unlocked.
    func unlock(paths: [String]) throws(LibSecretError) -> Bool {
        guard !paths.isEmpty else { return true }
        cancellation.stage = .unlockPrompt
        defer { cancellation.stage = .call }
        let copies = paths.map { strdup($0) }
        defer { for pointer in copies { free(pointer) } }
        var strings: [UnsafePointer<gchar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var error: UnsafeMutablePointer<GError>?
        let count = strings.withUnsafeMutableBufferPointer { buffer in
            secret_service_unlock_dbus_paths_sync(
                service.pointer, buffer.baseAddress, cancellation.pointer, &unlocked, &error)
        }
        g_strfreev(unlocked)
        if let error { throw LibSecretError(taking: error, stage: .call) }
        return count == paths.count
    }

    /// Connects to the session bus and to the Secret Service on it, with libsecret's session open
    /// unless `session` is false. The session (a Diffie-Hellman exchange, the costliest step of a
    /// read) is needed only to read or write a secret; libsecret keeps it for the process.
    init(_ cancellation: Cancellation, session: Bool = true) throws(LibSecretError) {
        self.cancellation = cancellation
        // Registers libsecret's D-Bus error names (IsLocked, NoSuchObject) before any reply.
        _ = secret_error_get_quark()

        cancellation.stage = .bus
        // A connection closed under us (the bus went away) is dropped, along with libsecret's
        // cached service on it, so the next call connects afresh.
        sessionBus.withLock { held in
            if let connection = held?.pointer, g_dbus_connection_is_closed(connection) != 0 {
                secret_service_disconnect()
                g_object_unref(UnsafeMutableRawPointer(connection))
                held = nil
            }
        }
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellation.pointer, &error) else {
            throw Self.failure(error, stage: .bus)
        }
        g_dbus_connection_set_exit_on_close(connection, 0)
        let fresh = HeldConnection(pointer: connection)
        sessionBus.withLock { held in
            if held?.pointer == fresh.pointer {
                g_object_unref(UnsafeMutableRawPointer(fresh.pointer))
            } else {
                if let old = held?.pointer { g_object_unref(UnsafeMutableRawPointer(old)) }
                held = fresh
            }
        }

        cancellation.stage = .service
        let flags = session ? SECRET_SERVICE_OPEN_SESSION : SECRET_SERVICE_NONE
        guard let service = secret_service_get_sync(flags, cancellation.pointer, &error) else {
            throw Self.failure(error, stage: .service)
        }
        self.service = GObjectReference(taking: service)
        cancellation.stage = .call
    }

    /// Items with Sesame's schema whose attributes include `attributes`, in every collection,
    /// without their secrets. With `unlock`, locked items are unlocked first, which may show
    /// the person a prompt (libsecret ignores a failed unlock; the items then stay locked).
    func search(
        _ attributes: [String: String], unlock: Bool = false
    ) throws(LibSecretError)
        -> [GObjectReference<SecretItem>]
    {
        let table = Self.attributeTable(attributes)
        defer { g_hash_table_unref(table) }
        var flags = SECRET_SEARCH_ALL.rawValue
        if unlock {
            flags |= SECRET_SEARCH_UNLOCK.rawValue
            cancellation.stage = .unlockPrompt
        }
        defer { cancellation.stage = .call }
        if !unlock, let collections = try collectionsToSearch() {
            sesame_attributes_set(table, KeyringItemFormat.Attribute.schema, KeyringItemFormat.schemaName)
            return try itemObjects(at: paths(in: collections, matching: table))
        }
        var attempt = 0
        while true {
            var error: UnsafeMutablePointer<GError>?
            let list = secret_service_search_sync(
                service.pointer, sesame_credential_schema(), table, SecretSearchFlags(rawValue: flags),
                cancellation.pointer, &error)
            guard let error else { return Self.takeObjects(list) }
            let failure = LibSecretError(taking: error, stage: .call)
            // An item deleted between the search and reading its properties fails the whole
            // search; searching again no longer finds it.
            attempt += 1
            guard failure.failure == .noSuchObject, attempt < 3 else { throw failure }
        }
    }

    /// Whether any item with Sesame's schema has `attributes`, in any collection, locked or not:
    /// one `SearchItems`, which needs no session and makes no item objects. With a service whose
    /// search of a locked collection prompts (KeePassXC), a locked collection counts as holding
    /// some, since it cannot be searched without asking the person.
    func containsItems(_ attributes: [String: String]) throws(LibSecretError) -> Bool {
        if provider()?.searchOfLockedCollectionPrompts == true, try collectionLocks().contains(where: \.locked) {
            return true
        }
        var search = attributes
        search[KeyringItemFormat.Attribute.schema] = KeyringItemFormat.schemaName
        let table = Self.attributeTable(search)
        defer { g_hash_table_unref(table) }
        let found = try servicePaths(matching: table)
        return !found.unlocked.isEmpty || !found.locked.isEmpty
    }

    /// The collections to search one by one, leaving out the locked ones, when the service shows
    /// its unlock dialog for a search that touches a locked collection (KeePassXC) and one is
    /// locked; the notes then say so. `nil` when one search of the whole service will do.
    private func collectionsToSearch() throws(LibSecretError) -> [String]? {
        guard provider()?.searchOfLockedCollectionPrompts == true else { return nil }
        let locks = try collectionLocks()
        guard locks.contains(where: \.locked) else { return nil }
        notes.skippedLockedCollection = true
        return locks.filter { !$0.locked }.map(\.path)
    }

    /// The paths of the items matching `table` in each of the collections at `collections`; a
    /// collection deleted meanwhile is left out.
    private func paths(in collections: [String], matching table: OpaquePointer) throws(LibSecretError) -> [String] {
        var paths: [String] = []
        for collection in collections {
            var error: UnsafeMutablePointer<GError>?
            guard
                let found = sesame_collection_search(connection, collection, table, 5000, cancellation.pointer, &error)
            else {
                let failure = Self.failure(error, stage: .call)
                if failure.failure == .noSuchObject { continue }
                throw failure
            }
            paths += Self.strings(found)
        }
        return paths
    }

    /// The paths of the items matching `table` in the whole service, the unlocked ones and the
    /// locked ones. One `SearchItems`, which needs no session.
    private func servicePaths(
        matching table: OpaquePointer
    ) throws(LibSecretError) -> (unlocked: [String], locked: [String]) {
        var error: UnsafeMutablePointer<GError>?
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        guard
            sesame_service_search_paths(connection, table, 5000, cancellation.pointer, &unlocked, &locked, &error) != 0
        else { throw Self.failure(error, stage: .call) }
        return (Self.strings(unlocked), Self.strings(locked))
    }

    /// libsecret item objects for the items at `paths`; an item deleted meanwhile is left out.
    private func itemObjects(at paths: [String]) throws(LibSecretError) -> [GObjectReference<SecretItem>] {
        var items: [GObjectReference<SecretItem>] = []
        for path in paths {
            var error: UnsafeMutablePointer<GError>?
            guard
                let item = secret_item_new_for_dbus_path_sync(
                    service.pointer, path, SECRET_ITEM_NONE, cancellation.pointer, &error)
            else {
                let failure = Self.failure(error, stage: .call)
                if failure.failure == .noSuchObject { continue }
                throw failure
            }
            items.append(GObjectReference(taking: item))
        }
        return items
    }

    /// The items matching `attributes`, with the secrets of those not locked, read into Swift
    /// values by object path, as `secret-tool lookup` reads: the search, one `Properties.GetAll`
    /// an item, then one `GetSecrets` through libsecret's session. Items deleted meanwhile (by
    /// another program) are left out. (libsecret's item objects cost three more round trips an
    /// item: `sesame token` 1.3 to 1.9 ms slower, 1.42-1.59× `secret-tool lookup` against 1.29-1.50×.)
    func items(_ attributes: [String: String]) throws(LibSecretError) -> [KeyringItem] {
        var attempt = 1
        while true {
            do throws(LibSecretError) {
                var found: [KeyringItem] = []
                for path in try itemPaths(attributes) { if let item = try properties(at: path) { found.append(item) } }
                let secrets = try self.secrets(of: found.filter { !$0.isLocked }.map(\.path))
                for index in found.indices { found[index].secret = secrets[found[index].path] }
                // An unlocked item without its secret has gone since its properties were read.
                return found.filter { $0.isLocked || $0.secret != nil }
            } catch  where error.failure == .noSuchObject && attempt < 3 {
                // An item deleted since the search fails the whole `GetSecrets`; searching again
                // no longer finds it.
                attempt += 1
            }
        }
    }

    /// The paths of the items with Sesame's schema whose attributes include `attributes`: one
    /// `SearchItems` of the service, or of each unlocked collection (see `collectionsToSearch`).
    private func itemPaths(_ attributes: [String: String]) throws(LibSecretError) -> [String] {
        var search = attributes
        search[KeyringItemFormat.Attribute.schema] = KeyringItemFormat.schemaName
        let table = Self.attributeTable(search)
        defer { g_hash_table_unref(table) }
        if let collections = try collectionsToSearch() { return try paths(in: collections, matching: table) }
        let found = try servicePaths(matching: table)
        return found.unlocked + found.locked
    }

    /// The item at `path` without its secret, from one `Properties.GetAll`; nil when it has gone.
    private func properties(at path: String) throws(LibSecretError) -> KeyringItem? {
        var properties = SesameItemProperties()
        var error: UnsafeMutablePointer<GError>?
        guard sesame_item_properties(connection, path, 5000, cancellation.pointer, &properties, &error) != 0 else {
            let failure = Self.failure(error, stage: .call)
            if failure.failure == .noSuchObject { return nil }
            throw failure
        }
        defer {
            g_free(properties.label)
            g_hash_table_unref(properties.attributes)
        }
        var found: [String: String] = [:]
        for name in KeyringItemFormat.Attribute.all {
            if let value = sesame_attributes_get(properties.attributes, name) { found[name] = String(cString: value) }
        }
        return KeyringItem(
            path: path, label: properties.label.map { String(cString: $0) } ?? "", attributes: found,
            isLocked: properties.locked != 0,
            modified: Date(timeIntervalSince1970: TimeInterval(properties.modified)), secret: nil)
    }

    /// The secrets of the unlocked items at `paths`, by path, through libsecret's session, which
    /// is opened first when the service has none yet.
    private func secrets(of paths: [String]) throws(LibSecretError) -> [String: [UInt8]] {
        guard !paths.isEmpty else { return [:] }
        var error: UnsafeMutablePointer<GError>?
        cancellation.stage = .service
        guard secret_service_ensure_session_sync(service.pointer, cancellation.pointer, &error) != 0 else {
            throw Self.failure(error, stage: .service)
        }
        cancellation.stage = .call
        let copies = paths.map { strdup($0) }
        defer { for pointer in copies { free(pointer) } }
        let array: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
        let table = array.withUnsafeBufferPointer { buffer in
            sesame_item_secrets(service.pointer, buffer.baseAddress, 5000, cancellation.pointer, &error)
        }
        guard let table else { throw Self.failure(error, stage: .call) }
        defer { g_hash_table_unref(table) }
        var secrets: [String: [UInt8]] = [:]
        for path in paths {
            guard let value = sesame_secrets_get(table, path) else { continue }
            var length = 0
            if let bytes = secret_value_get(value, &length) {
                secrets[path] = Array(UnsafeRawBufferPointer(start: bytes, count: length))
            }
        }
        return secrets
    }

    /// Swift strings of a NULL-terminated C string array, which this frees.
    private static func strings(_ array: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let array else { return [] }
        defer { g_strfreev(array) }
        var strings: [String] = []
        var index = 0
        while let string = array[index] {
            strings.append(String(cString: string))
            index += 1
        }
        return strings
    }

    /// Copies what Sesame needs from `item` into Swift values.
    func read(_ item: GObjectReference<SecretItem>) -> KeyringItem {
        let pointer = item.pointer
        let label = secret_item_get_label(pointer)
        defer { g_free(label) }
        var attributes: [String: String] = [:]
        if let table = secret_item_get_attributes(pointer) {
            defer { g_hash_table_unref(table) }
            for name in KeyringItemFormat.Attribute.all {
                if let value = sesame_attributes_get(table, name) { attributes[name] = String(cString: value) }
            }
        }
        var secret: [UInt8]?
        if let value = secret_item_get_secret(pointer) {
            var length = 0
            if let bytes = secret_value_get(value, &length) {
                secret = Array(UnsafeRawBufferPointer(start: bytes, count: length))
            }
            secret_value_unref(UnsafeMutableRawPointer(value))
        }
        return KeyringItem(
            path: String(cString: sesame_object_path(pointer)),
            label: label.map { String(cString: $0) } ?? "",
            attributes: attributes,
            isLocked: secret_item_get_locked(pointer) != 0,
            modified: Date(timeIntervalSince1970: TimeInterval(secret_item_get_modified(pointer))),
            secret: secret)
    }

    /// The collection that the `default` alias names (the login keyring on GNOME), or nil when
    /// the alias is not set.
    ///
    /// gnome-keyring has been seen to answer, for a moment while other clients write to it,
    /// that the login collection does not exist; such an answer is checked again (after 20,
    /// 40, 80, 160, 320 and 640 ms, within the call's deadline) before it is believed. On a loaded
    /// machine the moment outlasted 300 ms: a login's write check found no default collection.
    func defaultCollection() throws -> GObjectReference<SecretCollection>? {
        try retryingVanishedObjects { try collectionForDefaultAlias() }
    }

    /// The collection that the `default` alias names, asked once; a missing one is a
    /// `noSuchObject` failure.
    func collectionForDefaultAlias() throws(LibSecretError) -> GObjectReference<SecretCollection> {
        var error: UnsafeMutablePointer<GError>?
        let collection = secret_collection_for_alias_sync(
            service.pointer, "default", SECRET_COLLECTION_NONE, cancellation.pointer, &error)
        if let error { throw LibSecretError(taking: error, stage: .call) }
        guard let collection else {
            throw LibSecretError(stage: .call, failure: .noSuchObject, message: "no default collection")
        }
        return GObjectReference(taking: collection)
    }

    /// Runs `body` again when it fails because an object does not exist, up to six more
    /// times with growing pauses (1.26 s in all); then returns nil.
    func retryingVanishedObjects<T>(_ body: () throws -> T) throws -> T? {
        var pause: useconds_t = 20_000
        for attempt in 0..<7 {
            if attempt > 0 {
                guard !cancellation.isCancelled else { break }
                usleep(pause)
                pause *= 2
            }
            do {
                return try body()
            } catch let error as LibSecretError where error.failure == .noSuchObject {
                continue
            }
        }
        return nil
    }

    /// The collection's label, for messages. When libsecret has none cached (as with
    /// KeePassXC), it is asked for.
    func label(of collection: GObjectReference<SecretCollection>) -> String {
        if let label = secret_collection_get_label(collection.pointer) {
            defer { g_free(label) }
            if label.pointee != 0 { return String(cString: label) }
        }
        var error: UnsafeMutablePointer<GError>?
        guard
            let label = sesame_secret_string_property(
                connection, sesame_object_path(collection.pointer), "org.freedesktop.Secret.Collection", "Label", 5000,
                cancellation.pointer, &error)
        else {
            if let error { g_error_free(error) }
            return ""
        }
        defer { g_free(label) }
        if label.pointee != 0 { return String(cString: label) }
        // No label (a KeePassXC database without a name): the object path's last part.
        let path = String(cString: sesame_object_path(collection.pointer))
        return path.split(separator: "/").last.map(String.init) ?? path
    }

    /// Whether the collection is locked.
    func isLocked(_ collection: GObjectReference<SecretCollection>) -> Bool {
        var error: UnsafeMutablePointer<GError>?
        let locked = sesame_secret_bool_property(
            connection, sesame_object_path(collection.pointer), "org.freedesktop.Secret.Collection", "Locked", 5000,
            cancellation.pointer, &error)
        if let error { g_error_free(error) }
        return locked < 0 ? secret_collection_get_locked(collection.pointer) != 0 : locked == 1
    }

    /// Asks the service to unlock `collection`, which may show the person a prompt; returns
    /// whether it was unlocked (false when the prompt was dismissed or could not be shown).
    func unlock(_ collection: GObjectReference<SecretCollection>) throws(LibSecretError) -> Bool {
        cancellation.stage = .unlockPrompt
        defer { cancellation.stage = .call }
        let objects = g_list_append(nil, UnsafeMutableRawPointer(collection.pointer))
        defer { g_list_free(objects) }
        var unlocked: UnsafeMutablePointer<GList>?
        var error: UnsafeMutablePointer<GError>?
        let count = secret_service_unlock_sync(service.pointer, objects, cancellation.pointer, &unlocked, &error)
        sesame_object_list_free(unlocked)
        if let error { throw LibSecretError(taking: error, stage: .call) }
        return count > 0
    }

    /// Stores `secret` in `collection` under `attributes`, replacing an item with exactly
    /// those attributes; returns the item's object path.
    func create(
        in collection: GObjectReference<SecretCollection>, attributes: [String: String], label: String,
        secret: [UInt8]
    ) throws(LibSecretError) -> String {
        let table = Self.attributeTable(attributes)
        defer { g_hash_table_unref(table) }
        let value = secret.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, $0.count, "text/plain") }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var error: UnsafeMutablePointer<GError>?
        let item = secret_item_create_sync(
            collection.pointer, sesame_credential_schema(), table, label, value, SECRET_ITEM_CREATE_REPLACE,
            cancellation.pointer, &error)
        if let error { throw LibSecretError(taking: error, stage: .call) }
        guard let item else {
            throw LibSecretError(stage: .call, failure: .other, message: "the service created no item")
        }
        let reference = GObjectReference(taking: item)
        return String(cString: sesame_object_path(reference.pointer))
    }

    /// Replaces the secret of `item` with `secret`.
    func overwrite(_ item: GObjectReference<SecretItem>, with secret: [UInt8]) throws(LibSecretError) {
        let value = secret.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, $0.count, "text/plain") }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var error: UnsafeMutablePointer<GError>?
        if secret_item_set_secret_sync(item.pointer, value, cancellation.pointer, &error) == 0 {
            throw Self.failure(error, stage: .call)
        }
    }

    /// Overwrites the secret of `item` with text that holds no token, several times, then
    /// deletes it.
    ///
    /// A Secret Service may keep what is deleted: KeePassXC moves a deleted entry to its Recycle
    /// Bin, with the entry's history, which holds a copy of each earlier secret (ten by
    /// default). Each overwrite pushes one earlier secret out of that history, so after
    /// `KeyringItemFormat.scrubWrites` of them neither the entry nor its history holds a token,
    /// unless the database keeps an unlimited history.
    func scrubAndDelete(_ item: GObjectReference<SecretItem>) throws(LibSecretError) {
        for round in 1...KeyringItemFormat.scrubWrites {
            try overwrite(item, with: KeyringItemFormat.scrubbedSecret(round: round))
        }
        try delete(item)
    }

    /// Deletes `item`.
    func delete(_ item: GObjectReference<SecretItem>) throws(LibSecretError) {
        var error: UnsafeMutablePointer<GError>?
        if secret_item_delete_sync(item.pointer, cancellation.pointer, &error) == 0 {
            throw Self.failure(error, stage: .call)
        }
    }

    private static func attributeTable(_ attributes: [String: String]) -> OpaquePointer {
        let table = sesame_attributes_new()!
        for (name, value) in attributes { sesame_attributes_set(table, name, value) }
        return table
    }

    private static func takeObjects<Pointee>(_ list: UnsafeMutablePointer<GList>?) -> [GObjectReference<Pointee>] {
        var objects: [GObjectReference<Pointee>] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data {
                g_object_ref(data)
                objects.append(GObjectReference(taking: data.assumingMemoryBound(to: Pointee.self)))
            }
            node = current.pointee.next
        }
        sesame_object_list_free(list)
        return objects
    }

    private static func failure(_ error: UnsafeMutablePointer<GError>?, stage: KeyringStage) -> LibSecretError {
        guard let error else { return LibSecretError(stage: stage, failure: .other, message: "no reason given") }
        return LibSecretError(taking: error, stage: stage)
    }
}

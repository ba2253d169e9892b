internal import CLibSecret

/// D-Bus calls sent side by side, so that calls which do not depend on one another cost one
/// round trip together instead of one each: each is sent at once, and ``wait()`` waits for all.
///
/// Used within one keyring worker call, on its thread: the replies are delivered to a GLib main
/// context of the batch's own, which only this thread runs. Each call is bounded by its own
/// timeout and by the worker call's cancellation, so waiting always ends. Going away waits for
/// the calls still in flight, then frees their replies.
final class DBusBatch {
    /// One call's outcome, taken with ``DBusBatch/take(_:stage:)`` once the batch has waited.
    struct Call {
        fileprivate let slot: UnsafeMutablePointer<SesameBatchCall>
    }

    private let batch: UnsafeMutablePointer<SesameBatch>
    private var slots: [UnsafeMutablePointer<SesameBatchCall>] = []

    init() { batch = sesame_batch_new() }

    deinit {
        sesame_batch_free(batch)
        for slot in slots {
            if let reply = slot.pointee.reply { g_variant_unref(reply) }
            if let error = slot.pointee.error { g_error_free(error) }
            slot.deallocate()
        }
    }

    /// A slot for one call's outcome, freed with the batch.
    private func slot() -> UnsafeMutablePointer<SesameBatchCall> {
        let slot = UnsafeMutablePointer<SesameBatchCall>.allocate(capacity: 1)
        slot.initialize(to: SesameBatchCall())
        slots.append(slot)
        return slot
    }

    /// Sends one call with `send`, which hands the shim the call's slot.
    private func call(_ send: (UnsafeMutablePointer<SesameBatchCall>) -> Void) -> Call {
        let slot = slot()
        send(slot)
        return Call(slot: slot)
    }

    /// Sends the bus's `GetNameOwner` for `name`.
    func nameOwner(_ name: String, on connection: OpaquePointer, timeoutMS: Int32, cancellation: Cancellation) -> Call {
        call {
            sesame_batch_call(
                batch, connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                "GetNameOwner", sesame_variant_string_tuple(name), "(s)", timeoutMS, cancellation.pointer, $0)
        }
    }

    /// Sends the bus's `GetConnectionUnixProcessID` for `name`, a unique or a well-known name.
    func connectionPID(
        _ name: String, on connection: OpaquePointer, timeoutMS: Int32, cancellation: Cancellation
    ) -> Call {
        call { sesame_batch_connection_pid(batch, connection, name, timeoutMS, cancellation.pointer, $0) }
    }

    /// Sends an item's `Properties.GetAll` (see `sesame_batch_item_properties`).
    func itemProperties(
        at path: String, on connection: OpaquePointer, timeoutMS: Int32, cancellation: Cancellation
    ) -> Call {
        call { sesame_batch_item_properties(batch, connection, path, timeoutMS, cancellation.pointer, $0) }
    }

    /// Sends `GetSecrets` for the items at `paths` through `service`'s open session, or returns
    /// nil, sending nothing, when it has none.
    func itemSecrets(
        at paths: [String], service: UnsafeMutablePointer<SecretService>, on connection: OpaquePointer,
        timeoutMS: Int32, cancellation: Cancellation
    ) -> Call? {
        let call = slot()
        // The paths are copied into the call's parameters before this returns.
        let sent = withCStringArray(paths) { strings in
            sesame_batch_item_secrets(batch, service, connection, strings, timeoutMS, cancellation.pointer, call)
        }
        return sent != 0 ? Call(slot: call) : nil
    }

    /// Sends the Secret Service's `SearchItems` for the attributes in `table`; read the reply
    /// with `sesame_search_paths_from_reply`.
    func serviceSearch(
        _ table: OpaquePointer, on connection: OpaquePointer, timeoutMS: Int32, cancellation: Cancellation
    ) -> Call {
        call { sesame_batch_service_search(batch, connection, table, timeoutMS, cancellation.pointer, $0) }
    }

    /// Opens `service`'s session (its Diffie-Hellman exchange): this thread makes its key pair
    /// now, then the service answers while the other calls go on. Done, without a reply, once
    /// the session is open; see ``succeed(_:stage:)``.
    func ensureSession(of service: UnsafeMutablePointer<SecretService>, cancellation: Cancellation) -> Call {
        call { sesame_batch_ensure_session(batch, service, cancellation.pointer, $0) }
    }

    /// Sends `OpenSession` for `session`, Sesame's own (see ``ReadingSession``).
    func openSession(
        _ session: ReadingSession, on connection: OpaquePointer, timeoutMS: Int32, cancellation: Cancellation
    ) -> Call? {
        guard let parameters = session.request() else { return nil }
        return call {
            sesame_batch_open_session(batch, connection, parameters, timeoutMS, cancellation.pointer, $0)
        }
    }

    /// Sends `GetSecrets` for the items at `paths` through `session`, which must be ready.
    func sessionSecrets(
        at paths: [String], session: ReadingSession, on connection: OpaquePointer, timeoutMS: Int32,
        cancellation: Cancellation
    ) -> Call {
        // The paths are copied into the call's parameters before this returns.
        call { slot in
            withCStringArray(paths) { strings in
                sesame_batch_session_secrets(
                    batch, connection, session.pointer, strings, timeoutMS, cancellation.pointer, slot)
            }
        }
    }

    /// Waits until every call sent so far has its reply or its error.
    func wait() { sesame_batch_wait(batch) }

    /// The reply of `call`, which the caller now owns (`g_variant_unref`), or its failure.
    /// Waits for that call if need be; the others may still be in flight.
    func take(_ call: Call, stage: KeyringStage) throws(LibSecretError) -> OpaquePointer {
        try succeed(call, stage: stage)
        guard let reply = call.slot.pointee.reply else {
            throw LibSecretError(stage: stage, failure: .other, message: "no reply")
        }
        call.slot.pointee.reply = nil
        return reply
    }

    /// Waits for `call` if need be, and throws its failure if it failed.
    func succeed(_ call: Call, stage: KeyringStage) throws(LibSecretError) {
        sesame_batch_wait_for(batch, call.slot)
        if let error = call.slot.pointee.error {
            call.slot.pointee.error = nil
            throw LibSecretError(taking: error, stage: stage)
        }
    }
}

/// Calls `body` with `strings` as a NULL-terminated array of C strings, valid during the call.
func withCStringArray<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> Result) -> Result
{
    let copies = strings.map { strdup($0) }
    defer { for pointer in copies { free(pointer) } }
    let array: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return array.withUnsafeBufferPointer { body($0.baseAddress) }
}

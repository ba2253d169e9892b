import Dispatch
import Foundation
import Sesame
import SesameEmulator

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads and writes the emulator's state file: JSON, mode 0600 in a 0700 directory (made private
/// when it exists with a looser mode), replaced
/// atomically (a temporary file in the same directory, `fsync`, `rename`), so a crash mid-write
/// keeps the previous state. The blocking file calls run on the writer's own queue, never on
/// Swift's cooperative pool.
final class StateWriter: Sendable {
    let url: URL
    private let queue = DispatchQueue(label: "sesame.emulator.state")

    init(url: URL) { self.url = url }

    /// The saved state, or `nil` when there is no file yet.
    ///
    /// - Throws: `EmulatorError` when the file cannot be read, others may read it, or it is not a
    ///   state file; the file is left as it is.
    static func load(_ url: URL) throws -> PersistedState? {
        try ensurePrivateDirectory(for: url)
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw EmulatorError.stateFile(url, "could not be read (\(String(cString: strerror(errno)))).")
        }
        guard info.st_uid == geteuid() else {
            throw EmulatorError.stateFile(
                url, "belongs to another user (uid \(info.st_uid)); move it aside or delete it to start afresh.")
        }
        if info.st_mode & 0o077 != 0 {
            throw EmulatorError.stateFile(
                url,
                "can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))), and it holds tokens. "
                    + "If it is yours, run: chmod 600 '\(url.path)'")
        }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw EmulatorError.stateFile(url, "could not be read (\(error.localizedDescription)).")
        }
        if data.isEmpty { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let state: PersistedState
        do { state = try decoder.decode(PersistedState.self, from: data) } catch {
            throw EmulatorError.stateFile(
                url, "is not an emulator state file. It was left as it is; move it aside or delete it to start afresh.")
        }
        guard state.version <= PersistedState.formatVersion else {
            throw EmulatorError.stateFile(
                url, "was written by a newer Sesame (format \(state.version)); upgrade Sesame to read it.")
        }
        return state
    }

    /// Queues a replacement of the file with `state` and returns at once; `completion` gets
    /// the outcome. Writes happen in the order they are queued, so a caller that queues while
    /// holding its own lock gets its snapshots written in the order it took them.
    func enqueue(_ state: PersistedState, completion: @escaping @Sendable ((any Error)?) -> Void) {
        let url = self.url
        queue.async {
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                encoder.dateEncodingStrategy = .secondsSince1970
                try Self.replace(url, with: try encoder.encode(state))
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// Calls `body` once every write queued before it has finished.
    func afterQueuedWrites(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }

    /// Makes the state file's directory (and its parents) with mode 0700 when missing; one that
    /// exists must be this user's, and is made private (0700) if group or others may use it, as
    /// the credential files' directory is (``PrivateFiles``).
    ///
    /// - Throws: `EmulatorError` naming the directory and what to do.
    static func ensurePrivateDirectory(for url: URL) throws {
        do {
            try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
        } catch let error as CredentialStoreError {
            throw EmulatorError.stateFile(url, "cannot be kept in its directory: \(error.message)")
        }
    }

    private static func replace(_ url: URL, with data: Data) throws {
        try ensurePrivateDirectory(for: url)
        do {
            try PrivateFiles.replace(atPath: url.path, with: data)
        } catch let error as CredentialStoreError {
            throw EmulatorError.stateFile(url, "could not be written: \(error.message)")
        }
    }
}

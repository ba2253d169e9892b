import Foundation
import Sesame
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A small JSON object in a file of Sesame's state directory (active accounts, remembered
/// settings; never a secret): read whole, and replaced atomically in a private directory.
package struct JSONStateFile: Sendable {
    /// The file's path.
    var path: String

    /// The file.
    package var url: URL { URL(fileURLWithPath: path) }

    package init(path: String) { self.path = path }

    package init(url: URL) { path = url.path }

    /// The object in the file; empty when the file is missing or is not a JSON object, and
    /// when it cannot be trusted (another user's file, or one others may write, left in a
    /// directory that was open to them): that is said once on standard error, and the next
    /// write replaces the file with one of this user's.
    package func read() -> [String: JSONValue] {
        switch PrivateFiles.trustedContents(atPath: path) {
        case .missing: return [:]
        case .untrusted(let reason):
            Self.warnOnce(
                path, "Sesame ignored \(path): it \(reason). Remove it (rm '\(path)'); Sesame writes a fresh one.")
            return [:]
        case .contents(let data): return JSONValue(parsing: data)?.objectValue ?? [:]
        }
    }

    private static let warned = Mutex<Set<String>>([])

    /// Who is told of a state file that was ignored: nobody in a library app (the library never
    /// writes to the app's standard error); the `sesame` command says it on standard error.
    package static let warning = Mutex<(@Sendable (String) -> Void)?>(nil)

    private static func warnOnce(_ path: String, _ message: String) {
        guard warned.withLock({ $0.insert(path).inserted }) else { return }
        warning.withLock { $0 }?(Terminal.printable(message) + "\n")
    }

    /// Replaces the file with `object` (mode 0600 whatever the umask, replaced at once), making
    /// its directory (0700) when missing.
    package func write(_ object: [String: JSONValue]) throws {
        try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
        try PrivateFiles.replace(atPath: path, with: Array(JSONValue.object(object).jsonText.utf8))
    }

    /// Reads, changes and writes the file under an exclusive lock on the file's path with
    /// `.lock` added, the credentials file's discipline, so that concurrent processes each keep
    /// their change.
    package func modify(_ change: (inout [String: JSONValue]) -> Void) throws {
        try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
        let lock = try PrivateFiles.lock(path + ".lock")
        defer { close(lock) }
        var object = read()
        change(&object)
        try write(object)
    }
}

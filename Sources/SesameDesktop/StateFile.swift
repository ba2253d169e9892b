import Foundation
import Sesame

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

    /// The object in the file; empty when the file is missing or is not a JSON object.
    package func read() -> [String: JSONValue] {
        PrivateFiles.contents(atPath: path).flatMap { JSONValue(parsing: $0)?.objectValue } ?? [:]
    }

    /// Replaces the file with `object`, making its directory (0700) when missing.
    package func write(_ object: [String: JSONValue]) throws {
        try PrivateFiles.ensurePrivateDirectory(url.deletingLastPathComponent())
        try Data(JSONValue.object(object).jsonText.utf8).write(to: url, options: .atomic)
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

import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes to standard output and standard error that survive a reader that went away.
///
/// `FileHandle.write(_:)` traps when the write fails, and a process that uses GLib (libsecret)
/// ignores `SIGPIPE`, so `sesame token facebook | true` turns a closed pipe into `EPIPE` and
/// then into a crash. These calls write with `write(2)` directly, retry on `EINTR` and on
/// partial writes, and report failure instead of trapping: the caller decides whether to stop
/// quietly (``closedOutput`` tells it that the reader is gone).
///
/// Every write to the process's own standard streams in Sesame's programs goes through here.
package enum StandardStreams {
    /// Whether a write to standard output has met a closed reader (`EPIPE`).
    package static var closedOutput: Bool { closedOutputFlag.load(ordering: .relaxed) }

    /// Writes `text` to standard output.
    ///
    /// - Returns: `false` when not everything was written (the reader is gone, or another error).
    @discardableResult package static func out(_ text: String) -> Bool { write(Array(text.utf8), to: 1) }

    /// Writes `text` to standard error.
    ///
    /// - Returns: `false` when not everything was written.
    @discardableResult package static func err(_ text: String) -> Bool { write(Array(text.utf8), to: 2) }

    /// Writes `data` to standard output.
    @discardableResult package static func out(_ data: Data) -> Bool { write(Array(data), to: 1) }

    /// Writes `data` to standard error.
    @discardableResult package static func err(_ data: Data) -> Bool { write(Array(data), to: 2) }

    /// Writes `bytes` to `descriptor`, all of them, retrying on `EINTR`.
    ///
    /// - Returns: `false` on any error; `EPIPE` on standard output is remembered in
    ///   ``closedOutput``.
    @discardableResult package static func write(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                #if canImport(Glibc)
                    Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #elseif canImport(Musl)
                    Musl.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                    Darwin.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
            }
            if written > 0 {
                offset += written
                continue
            }
            if written < 0, errno == EINTR { continue }
            if written < 0, errno == EPIPE, descriptor == 1 { closedOutputFlag.store(true, ordering: .relaxed) }
            return false
        }
        return true
    }

    private static let closedOutputFlag = Atomic<Bool>(false)
}

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
/// quietly.
///
/// Every write to the process's own standard streams in Sesame's programs goes through here.
package enum StandardStreams {
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
    /// - Returns: `false` on any error.
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
            if descriptor == 1, !(written < 0 && errno == EPIPE) {
                // A full disk (`> /dev/full`), an I/O error: the output is lost, which the
                // command must say; a reader that went away is not an error.
                _ = outputErrorCode.compareExchange(
                    expected: 0, desired: written < 0 ? errno : EIO, ordering: .relaxed)
            }
            return false
        }
        if descriptor == 1, !bytes.isEmpty, outputWasClosed.load(ordering: .relaxed) {
            // Standard output was closed (`>&-`) and /dev/null holds its place: nothing was written.
            _ = outputErrorCode.compareExchange(expected: 0, desired: EBADF, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Reads `descriptor` until its end or until more than `limit` bytes have come, whichever is
    /// first: at most `limit + 1` bytes, so that a caller refuses input longer than `limit`
    /// without reading the rest of it (`</dev/zero` has no end, and 300 MB would be held whole).
    /// Every read of standard input in Sesame's programs goes through here or ``readLine(_:upTo:)``.
    /// Retries on `EINTR`; a read error ends the input. Blocking: call it off the cooperative pool.
    package static func read(_ descriptor: Int32, upTo limit: Int) -> [UInt8] {
        read(descriptor, upTo: limit, endingAtLine: false)
    }

    /// Reads a terminal's `descriptor` up to and including a line end (`\n`), its end, or more
    /// than `limit` bytes, whichever is first (at most `limit + 1` bytes, as ``read(_:upTo:)``).
    /// In canonical mode each read returns at most one line, so nothing after it is consumed; from
    /// a pipe a read may take more than the line.
    package static func readLine(_ descriptor: Int32, upTo limit: Int) -> [UInt8] {
        read(descriptor, upTo: limit, endingAtLine: true)
    }

    private static func read(_ descriptor: Int32, upTo limit: Int, endingAtLine: Bool) -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: min(65536, limit + 1))
        while data.count <= limit, !(endingAtLine && data.last == UInt8(ascii: "\n")) {
            let wanted = min(buffer.count, limit + 1 - data.count)
            let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, wanted) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    private static func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.read(descriptor, buffer, count)
        #elseif canImport(Musl)
            Musl.read(descriptor, buffer, count)
        #else
            Darwin.read(descriptor, buffer, count)
        #endif
    }

    /// Why a write to standard output failed, other than a reader that went away (`EPIPE`):
    /// the `errno` of the first such failure, or `nil` when every write so far succeeded.
    package static var outputError: Int32? {
        let code = outputErrorCode.load(ordering: .relaxed)
        return code == 0 ? nil : code
    }

    /// Gives descriptors 0, 1 and 2, when the program was started with them closed (`>&-`),
    /// `/dev/null`, so that no file or socket the program opens later takes their place and
    /// receives its output; a closed standard output is remembered, and writing to it is then
    /// reported through ``outputError``. Call once, first thing in `main`.
    package static func holdStandardDescriptors() {
        for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            let opened = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
            if descriptor == 1 { outputWasClosed.store(true, ordering: .relaxed) }
            if opened >= 0, opened != descriptor {
                _ = dup2(opened, descriptor)
                close(opened)
            }
        }
    }

    private static let outputErrorCode = Atomic<Int32>(0)
    private static let outputWasClosed = Atomic<Bool>(false)
}

import Foundation
import Sesame
import SesameDesktop

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The `sesame` command's secret prompt: a terminal presenter the command installs, kept out of
/// the library, which never writes to an app's standard error by itself.
extension Terminal {
    /// Reads a secret (a token) from standard input.
    ///
    /// On a terminal: `prompt` on standard error, echo off while the person types or pastes, and
    /// Enter ends it (Ctrl-D too); echo is restored afterwards, even when reading fails. From a
    /// pipe or a file: everything up to the end, as scripts expect (`wl-paste | sesame login
    /// facebook --with-token`). Blocking: call it off the cooperative pool.
    ///
    /// - Returns: the bytes read, without the terminal's line end.
    static func readSecretBlocking(prompt: String) -> [UInt8] {
        guard isatty(STDIN_FILENO) == 1 else { return readToEnd(STDIN_FILENO) }
        var saved = termios()
        let haveTerminal = tcgetattr(STDIN_FILENO, &saved) == 0
        if haveTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL | ICANON)
            // Echo goes off, and what was typed before, unasked, is dropped (as getpass(3) does),
            // before the prompt shows: a paste that answers the prompt at once is all kept.
            _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        StandardStreams.err(prompt)
        defer {
            if haveTerminal {
                var restore = saved
                _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &restore)
            }
        }
        // Canonical mode: each read returns at most one line; a line ends at Enter.
        var line: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            line.append(contentsOf: buffer[0..<count])
            if line.last == UInt8(ascii: "\n") { break }
        }
        if !haveTerminal || line.last != UInt8(ascii: "\n") { StandardStreams.err("\n") }
        while let last = line.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { line.removeLast() }
        return line
    }

    private static func readToEnd(_ descriptor: Int32) -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }
}

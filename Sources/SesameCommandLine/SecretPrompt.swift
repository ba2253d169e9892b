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
    /// facebook --with-token`). Either way reading stops once more than `limit` bytes have come,
    /// so that endless input (`</dev/zero`) ends. Blocking: call it off the cooperative pool.
    ///
    /// - Returns: the bytes read, without the terminal's line end: more than `limit` of them
    ///   (`limit + 1`) when the input was longer, which the caller refuses.
    static func readSecretBlocking(prompt: String, limit: Int = 64 * 1024) -> [UInt8] {
        guard isatty(STDIN_FILENO) == 1 else { return StandardStreams.read(STDIN_FILENO, upTo: limit) }
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
        var line = StandardStreams.readLine(STDIN_FILENO, upTo: limit)
        if !haveTerminal || line.last != UInt8(ascii: "\n") { StandardStreams.err("\n") }
        while let last = line.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { line.removeLast() }
        return line
    }
}

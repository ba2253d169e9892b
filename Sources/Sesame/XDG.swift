import Foundation

/// The XDG base directories Sesame uses: the one place that reads `XDG_STATE_HOME`,
/// `XDG_CONFIG_HOME` and `HOME` for the store, the emulator's state and the desktop's config.
package enum XDG {
    /// `$variable` when it is an absolute path, else `~/fallback`.
    package static func directory(_ variable: String, fallback: String, environment: [String: String]) -> URL {
        if let value = environment[variable], value.hasPrefix("/") {
            return URL(fileURLWithPath: value, isDirectory: true)
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(fallback, isDirectory: true)
    }

    /// `$XDG_STATE_HOME/sesame`, or `~/.local/state/sesame`.
    package static func stateDirectory(environment: [String: String]) -> URL {
        directory("XDG_STATE_HOME", fallback: ".local/state", environment: environment)
            .appendingPathComponent("sesame", isDirectory: true)
    }
}

import Foundation

/// The XDG base directories Sesame uses: the one place that reads `XDG_STATE_HOME`,
/// `XDG_CONFIG_HOME` and `HOME` for the store, the emulator's state and the desktop's config.
///
/// Paths are joined as strings and made into a URL once: `appendingPathComponent` costs about
/// ten times as much as one `URL(fileURLWithPath:)`, and a command's start makes a dozen of them.
///
/// Public so that a provider's plug-in in another package (its emulator's state file) keeps its
/// files where Sesame's own are.
public enum XDG {
    /// `$XDG_STATE_HOME/sesame`, or `~/.local/state/sesame`.
    public static func stateDirectory(environment: [String: String]) -> URL {
        URL(fileURLWithPath: stateDirectoryPath(environment: environment), isDirectory: true)
    }

    /// `relative` (a file name, or names joined with `/`) in Sesame's state directory.
    public static func stateFile(_ relative: String, isDirectory: Bool = false, environment: [String: String]) -> URL {
        URL(fileURLWithPath: stateFilePath(relative, environment: environment), isDirectory: isDirectory)
    }

    /// ``stateFile(_:isDirectory:environment:)``'s path. A start-up path that only opens the file
    /// keeps it a string: a URL's first `path` in a process instantiates the metadata of
    /// FoundationEssentials' percent-decoding sets, a fifth of a millisecond of `sesame token`.
    package static func stateFilePath(_ relative: String, environment: [String: String]) -> String {
        stateDirectoryPath(environment: environment) + "/" + relative
    }

    /// The path of `relative` in the directory that `variable` names when it is an absolute path,
    /// else in `~/fallback`; a string, for the reason ``stateFilePath(_:environment:)`` gives.
    package static func filePath(
        _ relative: String, in variable: String, fallback: String, environment: [String: String]
    ) -> String {
        directoryPath(variable, fallback: fallback, environment: environment) + "/" + relative
    }

    private static func stateDirectoryPath(environment: [String: String]) -> String {
        directoryPath("XDG_STATE_HOME", fallback: ".local/state", environment: environment) + "/sesame"
    }

    /// The directory's path without a trailing slash, to which `/name` is added: empty for `/`.
    private static func directoryPath(_ variable: String, fallback: String, environment: [String: String]) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return withoutTrailingSlashes(value) }
        return withoutTrailingSlashes(environment["HOME"] ?? NSHomeDirectory()) + "/" + fallback
    }

    private static func withoutTrailingSlashes(_ path: String) -> String {
        var path = Substring(path)
        while path.last == "/" { path.removeLast() }
        return String(path)
    }
}

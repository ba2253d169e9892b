internal import CCurl

/// libcurl's process-wide state: opened (dlopen) and initialised (`curl_global_init`) once,
/// on first use, never torn down. A program that makes no HTTP request never loads libcurl.
enum CurlGlobal {
    /// Why libcurl cannot be used in this process, or `nil` when it is loaded and initialised.
    /// Swift runs this initialiser exactly once, thread-safely; the loader is itself run once.
    static let failure: String? = sesame_curl_failure().map { String(cString: $0) }

    /// Loads and initialises libcurl if nothing has yet. Without libcurl the process cannot make
    /// an HTTP request through Sesame's transport, which is a broken installation rather than
    /// anything a caller could recover from, so it stops with the reason and the way to fix it.
    static func initialize() {
        if let failure { fatalError("Sesame's HTTP transport cannot start: \(failure)") }
    }

    /// libcurl's version number, such as `7.88.1`.
    static let versionNumber: String = {
        initialize()
        guard let version = sesame_curl_version_number() else { return "unknown" }
        return String(cString: version)
    }()
}

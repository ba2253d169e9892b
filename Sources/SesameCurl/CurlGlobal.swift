internal import CCurl

/// libcurl's process-wide state: initialised once, before the first handle, never torn down.
enum CurlGlobal {
    /// `curl_global_init`'s result; Swift runs this initialiser exactly once, thread-safely.
    private static let initialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// Initialises libcurl if nothing has yet; a failure here means the process cannot use it.
    static func initialize() {
        precondition(
            initialization == CURLE_OK,
            "curl_global_init failed (\(initialization.rawValue)); libcurl cannot be used in this process")
    }

    /// libcurl's version number, such as `7.88.1`.
    static let versionNumber: String = {
        initialize()
        guard let version = sesame_curl_version_number() else { return "unknown" }
        return String(cString: version)
    }()
}

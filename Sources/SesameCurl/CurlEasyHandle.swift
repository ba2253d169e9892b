internal import CCurl
import Foundation

/// A libcurl easy handle and its error buffer, owned by the engine thread, freed in `deinit`.
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let raw = sesame_curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        sesame_curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// libcurl's message for the last failure, or `nil` when it left none.
    var errorMessage: String? {
        let message = String(cString: errorBuffer).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.isEmpty ? nil : message
    }
}

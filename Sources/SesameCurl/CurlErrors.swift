internal import CCurl
import Sesame

/// Turns a libcurl result into a `TransportError` that names the request (without its
/// query, where tokens travel), carries libcurl's own message, and says what to do.
enum CurlErrors {
    static func error(for code: CURLcode, message curlMessage: String?, transfer: CurlTransfer) -> TransportError {
        let request = "\(transfer.method) \(transfer.redactedURL)"
        if transfer.exceededBodyLimit || code == CURLE_FILESIZE_EXCEEDED {
            return TransportError(
                kind: .bodyTooLarge,
                message: "The response to \(request) is larger than the \(byteCount(transfer.bodyLimit)) limit, so "
                    + "the transfer was stopped. If a body this large is expected, raise "
                    + "CurlTransport.Configuration.maximumResponseBodySize.",
                host: transfer.host)
        }
        if transfer.exceededHeaderLimit {
            return TransportError(
                kind: .other,
                message: "The response to \(request) has more than \(byteCount(CurlTransfer.headerLimit)) of "
                    + "headers, so the transfer was stopped; the server is misbehaving.",
                host: transfer.host)
        }
        let kind = kind(of: code)
        let detail = curlMessage ?? String(cString: sesame_curl_easy_strerror(code))
        return TransportError(
            kind: kind,
            message: "\(request) failed: \(detail) (libcurl error \(code.rawValue)). \(advice(for: kind, code: code))",
            host: transfer.host)
    }

    /// The kind for a libcurl result given as its number (for tests, which do not see CCurl).
    static func kind(ofCode code: Int) -> TransportError.Kind { kind(of: CURLcode(UInt32(code))) }

    /// The `TransportError.Kind` of a libcurl result.
    static func kind(of code: CURLcode) -> TransportError.Kind {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            .dnsFailure
        case CURLE_COULDNT_CONNECT, CURLE_PROXY:
            .connectionFailed
        case CURLE_OPERATION_TIMEDOUT:
            .timedOut
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2,
            CURLE_HTTP2_STREAM:
            .connectionLost
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS:
            .certificateRejected
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CRL_BADFILE, CURLE_USE_SSL_FAILED:
            .tlsFailure
        case CURLE_FILESIZE_EXCEEDED:
            .bodyTooLarge
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT, CURLE_BAD_FUNCTION_ARGUMENT:
            .invalidRequest
        default:
            .other
        }
    }

    private static func advice(for kind: TransportError.Kind, code: CURLcode) -> String {
        switch kind {
        case .dnsFailure:
            "Check the host name, the network connection and any proxy settings."
        case .connectionFailed:
            "Check that the server is running and reachable at that address, and any proxy settings."
        case .connectionLost:
            "The connection closed before a full response arrived; trying again may work."
        case .timedOut:
            "The server did not answer in time; try again later, or raise the timeout if it is known to be slow."
        case .certificateRejected:
            "The server's certificate is not trusted (libcurl's message above says why: self-signed, expired, "
                + "issued for another host name, or by an unknown CA). Trying again will not help: check the URL, "
                + "the system clock and the CA certificates (Debian: ca-certificates), or give the server's CA "
                + "file in the transport's configuration."
        case .tlsFailure:
            "The secure connection could not be set up or the server's certificate is not trusted; check the "
                + "system clock, the CA certificates (Debian: ca-certificates) and the server's certificate."
        case .invalidRequest:
            "Check the URL and the request."
        default:
            code == CURLE_TOO_MANY_REDIRECTS
                ? "The server redirects in a loop or too often; check the URL."
                : "This may be a bug in the server or in Sesame."
        }
    }

    private static func byteCount(_ bytes: Int) -> String {
        if bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0 { return "\(bytes / (1024 * 1024)) MiB" }
        if bytes >= 1024 && bytes % 1024 == 0 { return "\(bytes / 1024) KiB" }
        return "\(bytes)-byte"
    }
}

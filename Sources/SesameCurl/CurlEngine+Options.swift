internal import CCurl
internal import CSesameSystem
import Foundation
import Sesame

// MARK: libcurl options

extension CurlEngine {
    /// A new easy handle with the options every request of this engine shares already set.
    func makeHandle() -> CurlEasyHandle? {
        let easy = CurlEasyHandle()
        let handle = easy.raw
        var result = CURLE_OK
        func check(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        func set(_ option: CURLoption, _ value: Int) { check(sesame_easy_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, _ value: String) { check(sesame_easy_setopt_string(handle, option, value)) }

        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_NOSIGNAL, 1)
        // Removing a transfer still resolving a name must not wait, with the lock held, for the
        // resolver thread to finish (libcurl 7.87+; not checked, so an older libcurl still works).
        _ = sesame_easy_setopt_long(handle, CURLOPT_QUICK_EXIT, 1)
        check(sesame_easy_setopt_pointer(handle, CURLOPT_SHARE, share))
        check(sesame_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(easy.errorBuffer)))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, CurlTransfer.writeCallback))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, CurlTransfer.headerCallback))
        // Connections' sockets are opened and closed through the engine, which so knows that a
        // number in its epoll set still names the same socket (see `dormant`). Unretained: the
        // engine outlives the multi handle, and every connection is closed by the time
        // `tearDown` frees it.
        let unretained = Unmanaged.passUnretained(self).toOpaque()
        check(sesame_easy_setopt_open_socket_callback(handle, Self.openSocketCallback))
        check(sesame_easy_setopt_pointer(handle, CURLOPT_OPENSOCKETDATA, unretained))
        check(sesame_easy_setopt_close_socket_callback(handle, Self.closeSocketCallback))
        check(sesame_easy_setopt_pointer(handle, CURLOPT_CLOSESOCKETDATA, unretained))
        set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        set(CURLOPT_CONNECTTIMEOUT_MS, CurlTransfer.milliseconds(configuration.connectTimeout))
        check(
            sesame_easy_setopt_off_t(
                handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(max(0, configuration.maximumResponseBodySize))))
        set(CURLOPT_USERAGENT, configuration.userAgent)
        if configuration.acceptsCompressedResponses { set(CURLOPT_ACCEPT_ENCODING, "") }
        set(CURLOPT_MAXREDIRS, configuration.redirects.maximumRedirects)

        check(Self.setNetworkOptions(handle, configuration))
        return result == CURLE_OK ? easy : nil
    }

    /// Sets the certificate checks and the proxy of `configuration` on `handle`.
    static func setNetworkOptions(
        _ handle: UnsafeMutableRawPointer, _ configuration: CurlTransport.Configuration
    )
        -> CURLcode
    {
        var result = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) {
            if result == CURLE_OK { result = sesame_easy_setopt_long(handle, option, value) }
        }
        func set(_ option: CURLoption, _ value: String) {
            if result == CURLE_OK { result = sesame_easy_setopt_string(handle, option, value) }
        }
        switch configuration.tlsVerification.mode {
        case .system:
            break  // libcurl's defaults: VERIFYPEER 1, VERIFYHOST 2, the distribution's CA bundle
        case .certificateAuthorities(let file, let directory):
            if let file { set(CURLOPT_CAINFO, file) }
            if let directory { set(CURLOPT_CAPATH, directory) }
        case .disabled:
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }

        switch configuration.proxy.mode {
        case .environment:
            break
        case .direct:
            set(CURLOPT_PROXY, "")
        case .url(let proxy, let noProxy):
            set(CURLOPT_PROXY, proxy)
            set(CURLOPT_NOPROXY, noProxy ?? "")
        }
        return result
    }

    /// Sets the options that differ between requests. Every one of them is set for every
    /// request, so nothing carries over from the handle's previous request.
    func configure(_ easy: CurlEasyHandle, for transfer: CurlTransfer) -> CURLcode {
        let handle = easy.raw
        var result = CURLE_OK
        func check(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        func set(_ option: CURLoption, _ value: Int) { check(sesame_easy_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) {
            check(sesame_easy_setopt_pointer(handle, option, pointer))
        }

        easy.errorBuffer[0] = 0
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        check(sesame_easy_setopt_string(handle, CURLOPT_URL, transfer.url))
        set(CURLOPT_WRITEDATA, pointer: context)
        set(CURLOPT_HEADERDATA, pointer: context)
        set(CURLOPT_TIMEOUT_MS, transfer.timeoutMilliseconds)
        // HTTP/2 over TLS: wait to share a connection rather than open another. Never for http:,
        // which is always HTTP/1.1 here: libcurl would hold every other request to the host
        // until the first one's answer shows the connection cannot be shared, so one slow first
        // answer would delay them all, to their timeouts.
        set(CURLOPT_PIPEWAIT, transfer.isHTTPS ? 1 : 0)
        check(sesame_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, transfer.headerList))

        // The method and body: back to a plain GET first (POSTFIELDS before HTTPGET, as setting
        // it selects POST), then whatever this request needs.
        set(CURLOPT_POSTFIELDS, pointer: nil)
        check(sesame_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, -1))
        set(CURLOPT_HTTPGET, 1)
        set(CURLOPT_CUSTOMREQUEST, pointer: nil)
        if transfer.method == .head {
            set(CURLOPT_NOBODY, 1)
        } else if let body = transfer.requestBody {
            set(CURLOPT_POST, 1)
            check(sesame_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(transfer.requestBodyCount)))
            set(CURLOPT_POSTFIELDS, pointer: body.baseAddress)
        }
        if transfer.method != .get && transfer.method != .head && transfer.method != .post
            || (transfer.method == .get && transfer.requestBody != nil)
        {
            check(sesame_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, transfer.method.rawValue))
        }

        // Redirects: never from https down to http.
        set(CURLOPT_FOLLOWLOCATION, transfer.followsRedirects ? 1 : 0)
        if transfer.followsRedirects {
            check(
                sesame_easy_setopt_string(
                    handle, CURLOPT_REDIR_PROTOCOLS_STR, transfer.isHTTPS ? "https" : "http,https"))
        }
        return result
    }
}

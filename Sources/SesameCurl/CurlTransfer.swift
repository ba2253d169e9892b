internal import CCurl
import Foundation
import Sesame
import Synchronization

/// One request on its way through the engine: the C strings and buffers libcurl reads, the bytes
/// it writes back, and the continuation of the task waiting for it.
///
/// Life cycle: built on the caller's thread; from ``CurlEngine/start(_:)`` until it is finished,
/// its mutable state is touched only with the engine's lock held (by libcurl's callbacks on
/// whichever thread runs libcurl, and by the engine); once finished, it is read by the caller.
/// The lock, and the continuation's resumption, order those accesses; `cancelRequested` is
/// atomic because the cancellation handler may set it at any time.
final class CurlTransfer: @unchecked Sendable {  // guarded by CurlEngine's lock, see above
    // Set on the caller's thread before submission; read-only afterwards.
    let method: HTTPMethod
    let requestURL: URL
    let url: String
    let isHTTPS: Bool
    let timeoutMilliseconds: Int
    let followsRedirects: Bool
    let bodyLimit: Int
    /// The header list for CURLOPT_HTTPHEADER, freed in deinit.
    private(set) var headerList: UnsafeMutablePointer<curl_slist>?
    /// The request body for CURLOPT_POSTFIELDS (`nil` when the method sends none), freed in deinit.
    private(set) var requestBody: UnsafeMutableRawBufferPointer?

    let cancelRequested = Atomic<Bool>(false)

    /// Who got there first, the outcome or the waiting caller: 0 neither, 1 the caller is parked
    /// on `continuation`, 2 the outcome is in `result`. An atomic rather than the engine's lock,
    /// so that a caller going to sleep never waits for the engine thread.
    private let handoff = Atomic<Int>(0)
    private var continuation: UnsafeContinuation<Void, any Error>?

    // Guarded by the engine's lock until `isFinished`.
    var easy: CurlEasyHandle?
    /// Whether nothing else was in flight when it started.
    var isLone = false
    /// Whether its caller's inline wait was given to the engine thread (a second request, the
    /// inline budget spent, no socket to wait on) rather than ended by its answer.
    var wasHandedOver = false
    /// When it started, in CLOCK_MONOTONIC nanoseconds.
    var startedAt: UInt64 = 0
    /// The outcome, once `isFinished`.
    private(set) var result: Result<Void, any Error>?
    var responseHeaderBytes: [UInt8] = []
    var responseBody = Data()
    var status = 0
    var exceededBodyLimit = false
    var exceededHeaderLimit = false

    /// Whether the outcome is in ``result``.
    var isFinished: Bool { handoff.load(ordering: .acquiring) == 2 }

    /// Records the outcome (once, with the engine's lock held) and returns the parked caller's
    /// continuation to resume, if there is one.
    func finish(with outcome: Result<Void, any Error>) -> UnsafeContinuation<Void, any Error>? {
        result = outcome
        guard handoff.exchange(2, ordering: .acquiringAndReleasing) == 1 else { return nil }
        defer { continuation = nil }
        return continuation
    }

    /// Parks the caller on `waiting` until ``finish(with:)``; `false` when the outcome is
    /// already in ``result`` (and nothing was parked).
    func park(_ waiting: UnsafeContinuation<Void, any Error>) -> Bool {
        continuation = waiting
        guard handoff.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged else {
            continuation = nil
            return false
        }
        return true
    }

    /// Response headers above this size stop the transfer; libcurl's own per-line limit is 100 KiB.
    static let headerLimit = 1024 * 1024
    /// The room made for a response's header lines at its status line: one allocation for most
    /// header blocks, where growing from empty took one at every doubling (six for 500 bytes).
    static let headerBytesReserved = 1024

    init(request: HTTPRequest, configuration: CurlTransport.Configuration) throws(TransportError) {
        method = request.method
        requestURL = request.url
        url = request.url.absoluteString
        let scheme = request.url.scheme?.lowercased()
        isHTTPS = scheme == "https"
        guard scheme == "http" || scheme == "https" else {
            throw TransportError(
                kind: .invalidRequest,
                message: "\(request.method) \(Self.redact(request.url)): CurlTransport sends only absolute http and "
                    + "https URLs; check how the URL was built.",
                host: request.url.host())
        }
        timeoutMilliseconds = Self.milliseconds(request.timeout ?? configuration.timeout)
        followsRedirects = configuration.redirects.follows(request.method)
        bodyLimit = max(0, configuration.maximumResponseBodySize)

        let sendsBody = request.body != nil || [.post, .put, .patch].contains(request.method)
        if sendsBody {
            let body = request.body ?? Data()
            // Never a null pointer, even for an empty body: libcurl would then read the body from stdin.
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(body.count, 1), alignment: 1)
            body.copyBytes(to: buffer)
            requestBody = buffer
            requestBodyCount = body.count
        } else {
            requestBodyCount = 0
        }

        var list: UnsafeMutablePointer<curl_slist>?
        var sawContentType = false
        var sawExpect = false
        for field in request.headers {
            try Self.validate(field, request: request)
            let line: String
            if field.value.isEmpty {
                line = "\(field.name);"  // libcurl's way to send a header with an empty value
            } else {
                line = "\(field.name): \(field.value)"
            }
            list = Self.append(line, to: list)
            if HTTPHeaders.sameName(field.name, "Content-Type") { sawContentType = true }
            if HTTPHeaders.sameName(field.name, "Expect") { sawExpect = true }
        }
        // libcurl would add `Content-Type: application/x-www-form-urlencoded` to a body the caller
        // did not label, and `Expect: 100-continue` (one round trip of waiting) to large ones.
        if sendsBody && !sawContentType { list = Self.append("Content-Type:", to: list) }
        if sendsBody && !sawExpect { list = Self.append("Expect:", to: list) }
        headerList = list
    }

    /// The number of bytes in `requestBody` (which may be a one-byte buffer for an empty body).
    let requestBodyCount: Int

    deinit {
        if let headerList { sesame_curl_slist_free_all(headerList) }
        if let requestBody { requestBody.deallocate() }
    }

    private static func append(
        _ line: String, to list: UnsafeMutablePointer<curl_slist>?
    )
        -> UnsafeMutablePointer<curl_slist>?
    {
        guard let appended = sesame_curl_slist_append(list, line) else {
            fatalError("curl_slist_append ran out of memory")
        }
        return appended
    }

    /// Whether `byte` may be in an HTTP token (a header name).
    static func isTokenByte(_ byte: UInt8) -> Bool { HTTPToken.isTokenByte(byte) }

    /// Header names are HTTP tokens; values carry no line breaks or NULs (which would smuggle
    /// extra headers). The message never includes the value, which may be a secret.
    private static func validate(_ field: HTTPHeaders.Field, request: HTTPRequest) throws(TransportError) {
        // On each string's UTF-8 buffer: iterating `utf8` byte by byte cost a microsecond a call.
        var name = field.name
        let nameIsToken = name.withUTF8 { bytes in !bytes.isEmpty && bytes.allSatisfy(Self.isTokenByte) }
        guard nameIsToken else {
            throw TransportError(
                kind: .invalidRequest,
                message:
                    "\(request.method) \(redact(request.url)): the header name \"\(field.name)\" is not a valid HTTP field name "
                    + "(letters, digits and !#$%&'*+-.^_`|~ only); fix the header.",
                host: request.url.host())
        }
        var value = field.value
        guard !value.withUTF8({ bytes in bytes.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 } }) else {
            throw TransportError(
                kind: .invalidRequest,
                message:
                    "\(request.method) \(redact(request.url)): the value of header \"\(field.name)\" contains a line break or NUL, "
                    + "which would inject extra headers; remove it from the value.",
                host: request.url.host())
        }
    }

    /// The host the request is for, for error messages.
    var host: String? { requestURL.host() }

    /// `scheme://host[:port]/path` of the request, for error messages.
    var redactedURL: String { Self.redact(requestURL) }

    /// `scheme://host[:port]/path`, without the query or fragment (where tokens travel) or any
    /// user and password: safe for error messages.
    static func redact(_ url: URL) -> String {
        var text = "\(url.scheme ?? "")://\(url.host(percentEncoded: true) ?? "")"
        if let port = url.port { text += ":\(port)" }
        return text + url.path(percentEncoded: true)
    }

    /// `duration` in whole milliseconds for libcurl, at least 1 (0 would mean "no timeout").
    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 1 }
        guard seconds < Int64(Int32.max) else { return Int(Int32.max) }
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    /// The response, parsed on the caller's thread once the transfer has finished.
    func response() -> HTTPResponse {
        // The acquire in `isFinished` pairs with the release in ``finish(with:)``, so what libcurl's
        // callbacks wrote is visible here however the caller learnt that the transfer ended:
        // inline, or resumed through its continuation. The continuation orders it too, but
        // ThreadSanitizer does not see every hand-over inside the concurrency runtime, and it
        // once reported a race here on a caller the engine thread had resumed.
        precondition(isFinished, "the response of a transfer that has not finished")
        return HTTPResponse(status: status, headers: Self.parseHeaders(responseHeaderBytes), body: responseBody)
    }

    /// Parses the header block of the last response (libcurl hands over every line, and the
    /// header callback starts over at each status line, so redirects and 100 Continue are gone).
    /// Obsolete line folding is joined with a space; trailers after the body are kept.
    static func parseHeaders(_ bytes: [UInt8]) -> HTTPHeaders {
        // The lines counted, then one pass that makes one String per name and value: no array
        // of line slices, and the fields' array allocated once.
        bytes.withUnsafeBufferPointer { buffer in
            var lines = 0
            for byte in buffer where byte == UInt8(ascii: "\n") { lines += 1 }
            var fields: [HTTPHeaders.Field] = []
            fields.reserveCapacity(lines)
            var lineStart = 0
            while lineStart < buffer.count {
                var lineEnd = lineStart
                while lineEnd < buffer.count && buffer[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
                defer { lineStart = lineEnd + 1 }
                var end = lineEnd
                if end > lineStart && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                guard end > lineStart else { continue }
                let first = buffer[lineStart]
                if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                    if var last = fields.popLast() {
                        last.value += " " + trimmed(buffer, lineStart, end)
                        fields.append(last)
                    }
                    continue
                }
                var colon = lineStart
                while colon < end && buffer[colon] != UInt8(ascii: ":") { colon += 1 }
                guard colon < end else { continue }  // the status line
                let name = trimmed(buffer, lineStart, colon)
                guard !name.isEmpty else { continue }
                fields.append(HTTPHeaders.Field(name: name, value: trimmed(buffer, colon + 1, end)))
            }
            return HTTPHeaders(fields)
        }
    }

    /// `buffer[start..<end]` without the spaces and tabs around it, as a String.
    private static func trimmed(_ buffer: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> String {
        var start = start
        var end = end
        while start < end && (buffer[start] == 0x20 || buffer[start] == 0x09) { start += 1 }
        while end > start && (buffer[end - 1] == 0x20 || buffer[end - 1] == 0x09) { end -= 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<end]), as: UTF8.self)
    }
}

// MARK: libcurl callbacks (with the engine's lock held)

extension CurlTransfer {
    /// CURLOPT_WRITEFUNCTION: appends body bytes, or stops the transfer past the limit.
    static let writeCallback: sesame_curl_data_callback = { data, size, count, userdata in
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
        let length = size * count
        guard length > 0, let data else { return length }
        if transfer.responseBody.count + length > transfer.bodyLimit {
            transfer.exceededBodyLimit = true
            return 0  // libcurl ends the transfer with CURLE_WRITE_ERROR
        }
        data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            transfer.responseBody.append(bytes, count: length)
        }
        return length
    }

    /// CURLOPT_HEADERFUNCTION: collects header lines, starting over at every status line.
    static let headerCallback: sesame_curl_data_callback = { data, size, count, userdata in
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
        let length = size * count
        guard length > 0, let data else { return length }
        data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            let line = UnsafeBufferPointer(start: bytes, count: length)
            if line.starts(with: "HTTP/".utf8) {
                transfer.responseHeaderBytes.removeAll(keepingCapacity: true)
                transfer.responseHeaderBytes.reserveCapacity(headerBytesReserved)
            }
            transfer.responseHeaderBytes.append(contentsOf: line)
        }
        if transfer.responseHeaderBytes.count > headerLimit {
            transfer.exceededHeaderLimit = true
            return 0
        }
        return length
    }
}

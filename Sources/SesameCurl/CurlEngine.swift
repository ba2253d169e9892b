internal import CCurl
import Foundation
import Sesame
import Synchronization

/// A libcurl easy handle and its error buffer, owned by the engine thread, freed in `deinit`.
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let raw = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// libcurl's message for the last failure, or `nil` when it left none.
    var errorMessage: String? {
        let message = String(cString: errorBuffer).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.isEmpty ? nil : message
    }
}

/// The thread that drives one libcurl multi handle for a ``CurlTransport``.
///
/// Callers hand transfers in through `inbox` and wake the thread with `curl_multi_wakeup`; the
/// thread adds them to the multi handle, runs `curl_multi_perform` / `curl_multi_poll`, and
/// resumes each caller when its transfer is done. Idle easy handles are kept for the next
/// requests; the multi handle keeps the connections, and a share handle the DNS answers and
/// TLS sessions.
final class CurlEngine: @unchecked Sendable {  // `inbox` is a Mutex; every other var is engine-thread-only
    private struct Inbox {
        var additions: [CurlTransfer] = []
        var cancellations: [CurlTransfer] = []
        var stopping = false
    }

    private let inbox = Mutex(Inbox())
    /// Set when the inbox gets work; cleared by the engine thread when it empties the inbox.
    private let hasWork = Atomic<Bool>(false)
    /// Set by the engine thread while it is (about to be) blocked in `curl_multi_poll`.
    private let sleeping = Atomic<Bool>(false)
    private let configuration: CurlTransport.Configuration
    private let multi: UnsafeMutableRawPointer
    private let share: UnsafeMutableRawPointer
    private var thread = pthread_t()

    // Engine thread only.
    private var idleHandles: [CurlEasyHandle] = []
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    /// Idle easy handles kept for reuse; more than this in flight at once are freed when done.
    private static let idleHandleLimit = 64

    init(configuration: CurlTransport.Configuration) {
        CurlGlobal.initialize()
        self.configuration = configuration
        guard let multi = curl_multi_init(), let share = curl_share_init() else {
            fatalError("curl_multi_init or curl_share_init failed: out of memory")
        }
        self.multi = multi
        self.share = share
        // Only the engine thread ever uses the share handle, so it needs no lock callbacks.
        _ = sesame_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        _ = sesame_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        _ = sesame_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))

        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { context in
                let engine = Unmanaged<CurlEngine>.fromOpaque(context!).takeRetainedValue()
                engine.run()
                return nil
            }, context)
        guard created == 0 else {
            fatalError("CurlTransport could not start its thread: pthread_create returned \(created)")
        }
    }

    // MARK: Any thread

    /// Queues `transfer` for the engine thread, or fails it at once when its task is already cancelled.
    func submit(_ transfer: CurlTransfer) {
        let accepted = inbox.withLock { inbox in
            if inbox.stopping || transfer.cancelRequested.load(ordering: .relaxed) { return false }
            inbox.additions.append(transfer)
            return true
        }
        if accepted {
            wake()
        } else {
            transfer.continuation?.resume(throwing: CancellationError())
        }
    }

    /// Asks the engine thread to abort `transfer`; harmless if it has finished or not started.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .relaxed)
        let wake = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            inbox.cancellations.append(transfer)
            return true
        }
        if wake { self.wake() }
    }

    /// Tells the engine thread there is work: a flag it sees if it is awake (spinning or
    /// running), and `curl_multi_wakeup` only if it is, or is about to be, asleep in
    /// `curl_multi_poll`. The two sequentially consistent atomics make sure one side sees the
    /// other, so no wake-up is lost.
    private func wake() {
        hasWork.store(true, ordering: .sequentiallyConsistent)
        if sleeping.load(ordering: .sequentiallyConsistent) { curl_multi_wakeup(multi) }
    }

    /// Stops the thread, waits for it to free every handle, and returns.
    func shutDown() {
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
        if pthread_equal(thread, pthread_self()) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    // MARK: Engine thread

    private func run() {
        Thread.current.name = "sesame-curl"
        while true {
            hasWork.store(false, ordering: .sequentiallyConsistent)
            let (additions, cancellations, stopping) = inbox.withLock { inbox in
                var additions: [CurlTransfer] = []
                var cancellations: [CurlTransfer] = []
                swap(&additions, &inbox.additions)
                swap(&cancellations, &inbox.cancellations)
                return (additions, cancellations, inbox.stopping)
            }
            if stopping { break }
            for transfer in additions { start(transfer) }
            for transfer in cancellations { abort(transfer) }

            var stillRunning: Int32 = 0
            _ = curl_multi_perform(multi, &stillRunning)
            var finished = 0
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard sesame_multi_message_is_done(message) != 0 else { continue }
                finish(sesame_multi_message_handle(message), result: sesame_multi_message_result(message))
                finished += 1
            }

            // A caller that just got its answer often sends the next request within
            // microseconds; waiting briefly for it saves the engine a sleep and a wake-up.
            if finished > 0 && running.isEmpty && awaitWork(forNanoseconds: Self.idleSpin) { continue }

            sleeping.store(true, ordering: .sequentiallyConsistent)
            if !hasWork.load(ordering: .sequentiallyConsistent) {
                // libcurl shortens the wait to its own next timeout; curl_multi_wakeup ends it early.
                _ = curl_multi_poll(multi, nil, 0, 10_000, nil)
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
        }
        tearDown()
    }

    /// How long the idle engine waits for new work before it sleeps: 50 µs.
    private static let idleSpin: UInt64 = 50_000

    /// Yields the processor until work arrives or `nanoseconds` pass; whether work arrived.
    private func awaitWork(forNanoseconds nanoseconds: UInt64) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + nanoseconds
        repeat {
            if hasWork.load(ordering: .sequentiallyConsistent) { return true }
            sched_yield()
        } while DispatchTime.now().uptimeNanoseconds < deadline
        return hasWork.load(ordering: .sequentiallyConsistent)
    }

    private func start(_ transfer: CurlTransfer) {
        if transfer.cancelRequested.load(ordering: .relaxed) {
            complete(transfer, with: .failure(CancellationError()))
            return
        }
        guard let easy = idleHandles.popLast() ?? makeHandle() else {
            complete(
                transfer,
                with: .failure(
                    TransportError(
                        kind: .invalidRequest,
                        message: "CurlTransport's configuration was refused by libcurl \(CurlTransport.libcurlVersion) "
                            + "(an option it does not support, or a malformed proxy or CA path); check the "
                            + "configuration.",
                        host: transfer.host)))
            return
        }
        let configured = configure(easy, for: transfer)
        guard configured == CURLE_OK else {
            recycle(easy)
            complete(transfer, with: .failure(CurlErrors.error(for: configured, message: nil, transfer: transfer)))
            return
        }
        let added = curl_multi_add_handle(multi, easy.raw)
        guard added == CURLM_OK else {
            recycle(easy)
            let message = String(cString: curl_multi_strerror(added))
            complete(
                transfer,
                with: .failure(
                    TransportError(
                        kind: .other,
                        message: "\(transfer.method) \(transfer.redactedURL) could not start: \(message).",
                        host: transfer.host)))
            return
        }
        transfer.easy = easy
        running[easy.raw] = transfer
    }

    /// A new easy handle with the options every request of this engine shares already set.
    private func makeHandle() -> CurlEasyHandle? {
        let easy = CurlEasyHandle()
        let handle = easy.raw
        var result = CURLE_OK
        func check(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        func set(_ option: CURLoption, _ value: Int) { check(sesame_easy_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, _ value: String) { check(sesame_easy_setopt_string(handle, option, value)) }

        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_NOSIGNAL, 1)
        check(sesame_easy_setopt_pointer(handle, CURLOPT_SHARE, share))
        check(sesame_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(easy.errorBuffer)))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, CurlTransfer.writeCallback))
        check(sesame_easy_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, CurlTransfer.headerCallback))
        set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        set(CURLOPT_PIPEWAIT, 1)  // HTTP/2: wait to share a connection rather than open another
        set(CURLOPT_CONNECTTIMEOUT_MS, CurlTransfer.milliseconds(configuration.connectTimeout))
        check(
            sesame_easy_setopt_off_t(
                handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(max(0, configuration.maximumResponseBodySize))))
        set(CURLOPT_USERAGENT, configuration.userAgent)
        if configuration.acceptsCompressedResponses { set(CURLOPT_ACCEPT_ENCODING, "") }
        set(CURLOPT_MAXREDIRS, configuration.redirects.maximumRedirects)

        switch configuration.tlsVerification.mode {
        case .system:
            break  // libcurl's defaults: VERIFYPEER 1, VERIFYHOST 2, the distribution's CA bundle
        case .certificateAuthorities(let path):
            set(CURLOPT_CAINFO, path)
        case .disabled:
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }

        switch configuration.proxy.mode {
        case .environment:
            break
        case .direct:
            set(CURLOPT_PROXY, "")
        case .url(let proxy):
            set(CURLOPT_PROXY, proxy)
            set(CURLOPT_NOPROXY, "")
        }
        return result == CURLE_OK ? easy : nil
    }

    /// Sets the options that differ between requests. Every one of them is set for every
    /// request, so nothing carries over from the handle's previous request.
    private func configure(_ easy: CurlEasyHandle, for transfer: CurlTransfer) -> CURLcode {
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

    private func finish(_ handle: UnsafeMutableRawPointer?, result: CURLcode) {
        guard let handle, let transfer = running.removeValue(forKey: handle), let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, handle)
        transfer.easy = nil
        if result == CURLE_OK {
            var status = 0
            _ = sesame_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            transfer.status = status
            recycle(easy)
            complete(transfer, with: .success(()))
        } else {
            let error = CurlErrors.error(for: result, message: easy.errorMessage, transfer: transfer)
            recycle(easy)
            complete(transfer, with: .failure(error))
        }
    }

    /// Removes a cancelled transfer from the multi handle (closing its connection) and resumes its caller.
    private func abort(_ transfer: CurlTransfer) {
        // A transfer that never started, or has finished, has no easy handle.
        guard let easy = transfer.easy, running.removeValue(forKey: easy.raw) != nil else { return }
        curl_multi_remove_handle(multi, easy.raw)
        transfer.easy = nil
        recycle(easy)
        complete(transfer, with: .failure(CancellationError()))
    }

    private func complete(_ transfer: CurlTransfer, with result: Result<Void, any Error>) {
        guard !transfer.isFinished else { return }
        transfer.isFinished = true
        let continuation = transfer.continuation
        transfer.continuation = nil
        continuation?.resume(with: result)
    }

    private func recycle(_ easy: CurlEasyHandle) {
        if idleHandles.count < Self.idleHandleLimit { idleHandles.append(easy) }
    }

    /// Fails whatever is left (nothing, in practice: a caller keeps the transport alive while it
    /// waits) and frees the handles: easy handles first, then the multi, then the share handle.
    private func tearDown() {
        let shutDownError = TransportError(
            kind: .other, message: "The CurlTransport was shut down while this request was in flight.")
        for (handle, transfer) in running {
            curl_multi_remove_handle(multi, handle)
            transfer.easy = nil
            complete(transfer, with: .failure(shutDownError))
        }
        running.removeAll()
        let leftovers = inbox.withLock { inbox in
            defer { inbox.additions.removeAll() }
            return inbox.additions
        }
        for transfer in leftovers { complete(transfer, with: .failure(shutDownError)) }
        idleHandles.removeAll()
        curl_multi_cleanup(multi)
        curl_share_cleanup(share)
    }
}

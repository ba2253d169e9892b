import Foundation
import Sesame
import SesameCurl

/// A transport made on its first request: commands that never reach the network (`sesame token`
/// with a valid stored token) do not initialise libcurl or start its engine.
final class LazyTransport: HTTPTransport {
    private let make: @Sendable () -> any HTTPTransport
    private let made = Locked<(any HTTPTransport)?>(nil)
    private let preparing = Locked(Preparing())

    private struct Preparing {
        var started = false
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    init(_ make: @escaping @Sendable () -> any HTTPTransport) { self.make = make }

    /// A ``CurlTransport`` with the configuration `configure` makes, both made when first used
    /// (a configuration's default user agent names libcurl's version, which loads libcurl).
    static func curl(
        _ configure: @escaping @Sendable () -> CurlTransport.Configuration = { .init() }
    ) -> LazyTransport {
        LazyTransport { CurlTransport(configuration: configure()) }
    }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await transport().send(request)
    }

    /// Makes the transport now, on a thread of its own, so that the first request does not wait
    /// for it: `sesame status` calls this when a login is stored, and libcurl's libraries (several
    /// milliseconds of `dlopen`, which would hold a thread of the cooperative pool) load while the
    /// keyring opens its session. Does nothing once made, or once called. A command that calls it
    /// awaits ``finishPreparing()`` before it returns.
    func prepare() {
        let start = preparing.withLock { preparing in
            defer { preparing.started = true }
            return !preparing.started
        }
        guard start else { return }
        detachThread {
            _ = self.transport()
            releaseThreadLibraryState()  // before the command may go on to exit
            let waiters = self.preparing.withLock { preparing in
                preparing.done = true
                defer { preparing.waiters = [] }
                return preparing.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Returns once a ``prepare()`` under way has made the transport (at once when none was
    /// started). The process must not exit while that thread is still loading libcurl and
    /// initialising OpenSSL: `exit` runs their clean-up handlers under it. A command whose
    /// requests never came (its logins were for another app) would otherwise race its own exit.
    func finishPreparing() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = preparing.withLock { preparing in
                guard preparing.started, !preparing.done else { return true }
                preparing.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func transport() -> any HTTPTransport {
        made.withLock { made in
            if let made { return made }
            let transport = make()
            made = transport
            return transport
        }
    }
}

import Foundation
import Sesame
import SesameCurl

/// A transport made on its first request: commands that never reach the network (`sesame token`
/// with a valid stored token) do not initialise libcurl or start its engine.
final class LazyTransport: HTTPTransport {
    private let make: @Sendable () -> any HTTPTransport
    private let made = Locked<(any HTTPTransport)?>(nil)

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
    /// keyring opens its session. Does nothing once made.
    func prepare() {
        Thread.detachNewThread { _ = self.transport() }
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

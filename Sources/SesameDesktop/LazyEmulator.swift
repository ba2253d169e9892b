import Foundation
import Sesame

/// An emulator that starts on first use, once, however many callers ask at the same time.
public actor LazyEmulator {
    /// The origin a prepared emulator's endpoints use until it runs; `.invalid` never resolves
    /// (RFC 6761), so nothing sent there by mistake leaves the machine.
    public static let placeholderOrigin = URL(string: "http://sesame-emulator.invalid")!

    private let start: @Sendable () async throws -> RunningEmulator
    private var starting: Task<RunningEmulator, any Error>?

    /// An emulator that `start` starts when it is first asked for.
    public init(start: @escaping @Sendable () async throws -> RunningEmulator) { self.start = start }

    /// The running emulator, started by the first caller.
    ///
    /// - Throws: what starting it throws.
    public func running() async throws -> RunningEmulator {
        if let starting { return try await starting.value }
        let task = Task { try await start() }
        starting = task
        return try await task.value
    }

    /// Stops it if it was started; nothing otherwise.
    ///
    /// - Throws: when its state could not be saved.
    public func stopIfStarted() async throws {
        guard let starting else { return }
        self.starting = nil
        guard let emulator = try? await starting.value else { return }
        try await emulator.stop()
    }

    /// `url` with the placeholder origin replaced by the running emulator's; other URLs as they are.
    public static func resolve(_ url: URL, in running: RunningEmulator) -> URL {
        guard url.host == placeholderOrigin.host, let base = running.endpoints["base"],
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        components.scheme = base.scheme
        components.host = base.host
        components.port = base.port
        return components.url ?? url
    }
}

/// Sends requests for a prepared emulator's placeholder origin to the emulator, starting it first.
public struct LazyEmulatorTransport: HTTPTransport {
    let emulator: LazyEmulator
    let transport: any HTTPTransport

    /// Sends through `transport`, to `emulator` once it runs.
    public init(emulator: LazyEmulator, transport: any HTTPTransport) {
        self.emulator = emulator
        self.transport = transport
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard request.url.host == LazyEmulator.placeholderOrigin.host else { return try await transport.send(request) }
        var request = request
        request.url = LazyEmulator.resolve(request.url, in: try await emulator.running())
        return try await transport.send(request)
    }
}

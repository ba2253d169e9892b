import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A plain TCP connection that speaks HTTP/1.1 by hand, so that tests can send exactly the
/// bytes they mean (malformed lines, huge headers, two requests on one connection) and see
/// exactly what comes back. Blocking socket calls run on a thread of their own, never on the
/// cooperative pool; every read gives up after `readTimeout` so a broken server fails a test
/// instead of hanging it.
// Used by one task at a time; `buffer` is touched only inside `blocking`, one call at a time.
package final class RawHTTPConnection: @unchecked Sendable {
    package struct Response: Sendable {
        package var status: Int
        package var headers: [(String, String)]
        package var body: Data

        package func header(_ name: String) -> String? {
            headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
        }
        package var text: String { String(decoding: body, as: UTF8.self) }
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String

        /// A failure saying `description`.
        package init(description: String) { self.description = description }
    }

    /// What a read found.
    package enum Outcome: Sendable {
        case response(Response)
        /// The server closed the connection (or reset it) before a full response.
        case closed
    }

    package let descriptor: Int32
    private var buffer = Data()

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Connects to `host`:`port` (IPv4 or IPv6 literal).
    package static func connect(
        host: String = "127.0.0.1", port: Int, readTimeout: Int = 20
    ) async throws -> RawHTTPConnection {
        try await blocking { try connectBlocking(host: host, port: port, readTimeout: readTimeout) }
    }

    /// Connects on the calling thread (a loopback connect does not wait).
    package static func connectBlocking(
        host: String = "127.0.0.1", port: Int, readTimeout: Int = 20
    ) throws
        -> RawHTTPConnection
    {
        do {
            let isIPv6 = host.contains(":")
            let descriptor = socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { throw Failure(description: "socket() failed") }
            var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            guard Sockets.connect(descriptor, host: host, port: port) else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw Failure(description: "connect to \(host):\(port) failed: \(reason)")
            }
            return RawHTTPConnection(descriptor: descriptor)
        }
    }

    /// Closes both directions now (the descriptor itself is closed on deinit).
    package func shutDown() { _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// Sends raw bytes.
    package func send(_ bytes: Data) async throws {
        try await Self.blocking { [self] in
            var offset = 0
            while offset < bytes.count {
                let sent = bytes.withUnsafeBytes {
                    Glibc.send(descriptor, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                guard sent > 0 else { throw Failure(description: "send failed: \(String(cString: strerror(errno)))") }
                offset += sent
            }
        }
    }

    /// Sends text as UTF-8.
    package func send(_ text: String) async throws { try await send(Data(text.utf8)) }

    /// Sends a simple request and reads its answer.
    package func request(
        _ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: Data = Data()
    ) async throws -> Response {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try await send(Data(head.utf8) + body)
        guard case .response(let response) = try await read() else {
            throw Failure(description: "the server closed the connection instead of answering \(method) \(target)")
        }
        return response
    }

    /// Reads one response, or finds the connection closed.
    package func read() async throws -> Outcome {
        try await Self.blocking { [self] in try readBlocking() }
    }

    /// Reads only a response head (for HEAD requests, whose answers have no body).
    package func readHead() async throws -> Response {
        try await Self.blocking { [self] in
            let separator = Data("\r\n\r\n".utf8)
            var headEnd = buffer.range(of: separator)
            while headEnd == nil {
                guard try fill() else { throw Failure(description: "closed before a response head") }
                headEnd = buffer.range(of: separator)
            }
            let head = String(decoding: buffer[buffer.startIndex..<headEnd!.lowerBound], as: UTF8.self)
            buffer = Data(buffer[headEnd!.upperBound...])
            return try Self.parseHead(head)
        }
    }

    package static func parseHead(_ head: String) throws -> Response {
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw Failure(description: "not an HTTP status line: \(head.prefix(80))")
        }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Response(status: status, headers: headers, body: Data())
    }

    /// Reads until the server closes the connection; true when it did (false: the read timed out).
    package func waitForClose() async throws -> Bool {
        try await Self.blocking { [self] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &chunk, chunk.count, 0)
                if count == 0 { return true }
                if count < 0 { return errno == ECONNRESET }
            }
        }
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = recv(descriptor, &chunk, chunk.count, 0)
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        if count == 0 || errno == ECONNRESET { return false }
        throw Failure(description: "reading the response failed: \(String(cString: strerror(errno)))")
    }

    private func readBlocking() throws -> Outcome {
        let separator = Data("\r\n\r\n".utf8)
        var headEnd = buffer.range(of: separator)
        while headEnd == nil {
            guard try fill() else { return .closed }
            headEnd = buffer.range(of: separator)
        }
        let head = String(decoding: buffer[buffer.startIndex..<headEnd!.lowerBound], as: UTF8.self)
        buffer = Data(buffer[headEnd!.upperBound...])
        let response = try Self.parseHead(head)
        // These never have a body (RFC 9112 §6.3).
        if response.status == 204 || response.status == 304 || (100..<200).contains(response.status) {
            return .response(response)
        }
        if let length = response.header("Content-Length").flatMap(Int.init) {
            while buffer.count < length { guard try fill() else { return .closed } }
            var complete = response
            complete.body = Data(buffer.prefix(length))
            buffer = Data(buffer.dropFirst(length))
            return .response(complete)
        }
        if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            var body = Data()
            while true {
                var lineEnd = buffer.range(of: Data("\r\n".utf8))
                while lineEnd == nil {
                    guard try fill() else { return .closed }
                    lineEnd = buffer.range(of: Data("\r\n".utf8))
                }
                let sizeText = String(decoding: buffer[buffer.startIndex..<lineEnd!.lowerBound], as: UTF8.self)
                let size = Int(sizeText.split(separator: ";")[0], radix: 16) ?? 0
                buffer = Data(buffer[lineEnd!.upperBound...])
                while buffer.count < size + 2 { guard try fill() else { return .closed } }
                body.append(buffer.prefix(size))
                buffer = Data(buffer.dropFirst(size + 2))
                if size == 0 { break }
            }
            var complete = response
            complete.body = body
            return .response(complete)
        }
        // No length: the body runs to the end of the connection.
        while try fill() {}
        var complete = response
        complete.body = buffer
        buffer = Data()
        return .response(complete)
    }

    /// Runs a blocking call on a thread of its own and waits for it.
    package static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try body() })
            }
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }
}

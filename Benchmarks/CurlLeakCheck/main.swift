import Foundation
import Sesame
import SesameCurl

// sesame-curl-leakcheck: a thousand requests through CurlTransport (successes, every failure
// path, cancellations), then the transport is released, for running under valgrind:
//
//   swift build -c release --product sesame-curl-leakcheck
//   valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
//       --error-exitcode=1 .build/release/sesame-curl-leakcheck
//
// The main function is synchronous and every task runs on one thread of its own (a task
// executor), because valgrind 3.19 (Debian 12) crashes as soon as libdispatch starts its
// worker threads, which an async main or the global executor would do.

/// A task executor with one plain thread.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {  // `jobs` is guarded by `condition`
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    init() {
        let thread = Thread { [unowned self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }
}

/// A small HTTP/1.1 keep-alive server on 127.0.0.1, one thread per connection.
/// `/ok` answers a small JSON, `/echo` the request body, `/big` 64 KiB, `/redirect` a 302 to
/// `/ok`, and `/silent` nothing at all.
final class TinyServer: Sendable {
    let port: Int
    private let listenSocket: Int32

    init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 && listen(fd, 128) == 0
            }
        }
        precondition(bound, "could not listen on 127.0.0.1: errno \(errno)")
        listenSocket = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            while true {
                let connection = accept(listenSocket, nil, nil)
                guard connection >= 0 else { return }
                Thread { TinyServer.serve(connection) }.start()
            }
        }.start()
    }

    func stop() { shutdown(listenSocket, Int32(SHUT_RDWR)) }

    private static func serve(_ connection: Int32) {
        defer { close(connection) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            // The head.
            var headEnd: Int?
            while headEnd == nil {
                headEnd = pending.indices.dropLast(3).first { pending[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }
                if headEnd != nil { break }
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                pending += buffer[0..<count]
            }
            let head = String(decoding: pending[0..<headEnd!], as: UTF8.self)
            pending.removeFirst(headEnd! + 4)
            let lines = head.split(separator: "\r\n")
            let target = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            let length =
                lines.first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            while pending.count < length {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                pending += buffer[0..<count]
            }
            let body = Array(pending[0..<length])
            pending.removeFirst(length)

            let path = target.split(separator: "?").first.map(String.init) ?? target
            var status = "200 OK"
            var extra = ""
            var answer: [UInt8]
            switch path {
            case "/echo": answer = body
            case "/big": answer = [UInt8](repeating: 0x61, count: 64 * 1024)
            case "/redirect":
                status = "302 Found"
                extra = "Location: /ok\r\n"
                answer = []
            case "/silent":
                while recv(connection, &buffer, buffer.count, 0) > 0 {}
                return
            default: answer = Array(#"{"id":"1","name":"Ada"}"#.utf8)
            }
            let response =
                Array(
                    "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\n\(extra)Content-Length: \(answer.count)\r\n\r\n"
                        .utf8)
                + answer
            var offset = 0
            while offset < response.count {
                let written = response.withUnsafeBytes {
                    send(connection, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
                }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}

/// A port on 127.0.0.1 that nothing listens on: bound, then closed again.
func unusedPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

struct Tally: Sendable {
    var ok = 0
    var failures: [String: Int] = [:]
    var cancelled = 0

    mutating func add(_ result: Result<HTTPResponse, any Error>) {
        switch result {
        case .success: ok += 1
        case .failure(let error as TransportError): failures[error.kind.rawValue, default: 0] += 1
        case .failure(is CancellationError): cancelled += 1
        case .failure(let error): failures["\(type(of: error))", default: 0] += 1
        }
    }

    static func + (left: Tally, right: Tally) -> Tally {
        var sum = left
        sum.ok += right.ok
        sum.cancelled += right.cancelled
        sum.failures.merge(right.failures, uniquingKeysWith: +)
        return sum
    }
}

func send(_ transport: CurlTransport, _ request: HTTPRequest) async -> Result<HTTPResponse, any Error> {
    do { return .success(try await transport.send(request)) } catch { return .failure(error) }
}

func exercise(server: TinyServer) async -> Tally {
    let base = "http://127.0.0.1:\(server.port)"
    let transport = CurlTransport(configuration: .init(maximumResponseBodySize: 16 * 1024))
    var tally = Tally()
    // 500 sequential keep-alive GETs.
    for index in 0..<500 { tally.add(await send(transport, HTTPRequest(url: URL(string: "\(base)/ok?i=\(index)")!))) }
    // 200 GETs, 20 at a time.
    for _ in 0..<10 {
        tally =
            tally
            + (await withTaskGroup(of: Tally.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        var tally = Tally()
                        tally.add(await send(transport, HTTPRequest(url: URL(string: "\(base)/ok?c=\(index)")!)))
                        return tally
                    }
                }
                return await group.reduce(Tally(), +)
            })
    }
    // 100 POSTs and DELETEs with bodies and headers.
    for index in 0..<100 {
        let request = HTTPRequest(
            method: index.isMultiple(of: 2) ? .post : .delete, url: URL(string: "\(base)/echo")!,
            headers: ["Content-Type": "application/json", "Authorization": "Bearer t\(index)"],
            body: Data(#"{"n":\#(index)}"#.utf8))
        tally.add(await send(transport, request))
    }
    // 50 redirects followed, 50 bodies over the limit, 50 refused connections.
    for _ in 0..<50 { tally.add(await send(transport, HTTPRequest(url: URL(string: "\(base)/redirect")!))) }
    for _ in 0..<50 { tally.add(await send(transport, HTTPRequest(url: URL(string: "\(base)/big")!))) }
    let refused = unusedPort()
    for _ in 0..<50 { tally.add(await send(transport, HTTPRequest(url: URL(string: "http://127.0.0.1:\(refused)/")!))) }
    // 25 timeouts and 25 cancellations against a server that never answers.
    for _ in 0..<25 {
        tally.add(await send(transport, HTTPRequest(url: URL(string: "\(base)/silent")!, timeout: .milliseconds(50))))
    }
    for _ in 0..<25 {
        let task = Task { await send(transport, HTTPRequest(url: URL(string: "\(base)/silent")!)) }
        try? await Task.sleep(for: .milliseconds(20))
        task.cancel()
        tally.add(await task.value)
    }
    return tally
}

let executor = ThreadExecutor()
let server = TinyServer()
let done = DispatchSemaphore(value: 0)
let result = Locked<Tally?>(nil)
Task(executorPreference: executor) {
    let tally = await exercise(server: server)
    result.withLock { $0 = tally }
    done.signal()
}
done.wait()
server.stop()
let tally = result.withLock { $0 }!
let total = tally.ok + tally.cancelled + tally.failures.values.reduce(0, +)
print(
    "sesame-curl-leakcheck: \(total) requests: \(tally.ok) answered, \(tally.cancelled) cancelled, failures "
        + tally.failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
// The transport was released at the end of exercise(), which joined its thread after it freed
// every handle; curl_global_cleanup is left to process exit, as libcurl allows.
let expected = ["bodyTooLarge": 50, "connectionFailed": 50, "timedOut": 25]
guard total == 1000, tally.ok == 850, tally.cancelled == 25, tally.failures == expected else {
    print("sesame-curl-leakcheck: unexpected outcome")
    exit(1)
}

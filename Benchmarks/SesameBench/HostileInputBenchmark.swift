import Foundation
import Sesame
import SesameCurl
import SesameFacebookEmulator
import SesameHTTPServer

#if canImport(Glibc)
    import Glibc
#endif

/// `sesame-bench json`: the time `JSONValue(parsing:)` takes per nesting depth and on
/// megabyte bodies, beside Foundation's `JSONSerialization` and the `Decodable` path, and the
/// old `try?` cascade for comparison (issue 17, item 1).
let jsonBenchmark = Benchmark(
    name: "json",
    summary: "JSONValue parsing per nesting depth and on 1 MB hostile bodies"
) { _ in
    func nested(_ depth: Int) -> Data {
        Data((String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)).utf8)
    }
    /// The median of `runs` timings of `body`, in milliseconds.
    func milliseconds(runs: Int, _ body: () -> Void) -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let started = ContinuousClock.now
            body()
            let elapsed = ContinuousClock.now - started
            times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
        }
        return times.sorted()[times.count / 2]
    }
    /// The median of `runs` measurements of `body`'s CPU time on this thread, in milliseconds:
    /// unlike the wall clock, it does not count the time the thread waited for a CPU, so it
    /// reads the same on a machine busy with other work.
    func cpuMilliseconds(runs: Int, _ body: () -> Void) -> Double {
        func now() -> Double {
            var time = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
            return Double(time.tv_sec) * 1e3 + Double(time.tv_nsec) / 1e6
        }
        var times: [Double] = []
        for _ in 0..<runs {
            let started = now()
            body()
            times.append(now() - started)
        }
        return times.sorted()[times.count / 2]
    }
    func format(_ value: Double) -> String { String(format: "%10.3f", value) }

    print("JSON parsing, median ms (refused: the parser returned nil)")
    print("depth   bytes  JSONValue(parsing:)  JSONSerialization  JSONDecoder  old try? cascade")
    for depth in [16, 32, 64, 128, 129, 256, 511] {
        let data = nested(depth)
        var accepted = false
        let parsed = milliseconds(runs: 21) { accepted = JSONValue(parsing: data) != nil }
        let foundation = milliseconds(runs: 21) { _ = try? JSONSerialization.jsonObject(with: data) }
        let decoded = milliseconds(runs: 5) { _ = try? JSONDecoder().decode(JSONValue.self, from: data) }
        let old =
            depth <= 128
            ? format(milliseconds(runs: 3) { _ = try? JSONDecoder().decode(CascadeJSON.self, from: data) })
            : "  (skipped)"
        print(
            "\(String(depth).padding(toLength: 5, withPad: " ", startingAt: 0))\(String(format: "%8d", data.count))"
                + "  \(format(parsed))\(accepted ? "" : " refused")  \(format(foundation))  \(format(decoded))  \(old)")
    }

    print("\n1 MB bodies, median ms")
    let megabyte = 1 << 20
    let flat = Data(("[" + (0..<90_000).map { #"{"n":\#($0)}"# }.joined(separator: ",") + "]").utf8)
    let cases: [(String, Data)] = [
        ("1 MB of [", Data(repeating: UInt8(ascii: "["), count: megabyte)),
        (#"1 MB of {"a":"#, Data(String(repeating: #"{"a":"#, count: megabyte / 5).utf8)),
        (
            "1 MB of arrays 128 deep",
            Data(
                ("[" + String(repeating: String(decoding: nested(127), as: UTF8.self) + ",", count: 4_000) + "1]").utf8)
        ),
        ("\(flat.count / 1024) KB flat array of objects", flat),
        ("1 MB string", Data(("\"" + String(repeating: "x", count: megabyte - 2) + "\"").utf8)),
    ]
    print("(wall: elapsed time; cpu: this thread's CPU time, which a busy machine does not inflate)")
    print("body                              JSONValue wall  JSONValue cpu       JSONSerialization wall")
    for (name, data) in cases {
        var accepted = false
        let time = milliseconds(runs: 5) { accepted = JSONValue(parsing: data) != nil }
        let cpu = cpuMilliseconds(runs: 5) { _ = JSONValue(parsing: data) }
        let foundation = milliseconds(runs: 5) { _ = try? JSONSerialization.jsonObject(with: data) }
        print(
            "\(name.padding(toLength: 34, withPad: " ", startingAt: 0))\(format(time))  \(format(cpu))"
                + "\(accepted ? "        " : " refused")  \(format(foundation))")
    }
}

/// The `Decodable` initialiser `JSONValue` had before issue 17: every type tried in turn with
/// `try?`, re-decoding whole subtrees. Kept here only to show the difference.
private enum CascadeJSON: Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([CascadeJSON])
    case object([String: CascadeJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([CascadeJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: CascadeJSON].self))
        }
    }
}

/// `sesame-bench slowclients [count]`: how long a normal request waits while `count` (default
/// 2,000) slow connections sit on the emulator, and 200 on a server configured as the login
/// receiver is (issue 17, item 2). Each slow connection sends part of a request head and then
/// nothing; they come from eight loopback addresses for the emulator (as from several hosts) and
/// from 127.0.0.1 for the receiver (every local program shares the browser's address).
let slowClientsBenchmark = Benchmark(
    name: "slowclients",
    summary: "a normal request's latency beside 2,000 slow connections (emulator) and 200 (receiver)"
) { arguments in
    let count = arguments.first.flatMap { Int($0) } ?? 2_000
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < rlim_t(2 * count + 512) {
        limit.rlim_cur = min(limit.rlim_max, rlim_t(2 * count + 512))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        print("soft descriptor limit raised to \(limit.rlim_cur)")
    }

    func connectFrom(_ source: String, port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok =
            withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            } == 0
            && withUnsafePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            } == 0
        guard ok else {
            close(fd)
            return -1
        }
        _ = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        return fd
    }

    /// Opens `count` slow connections; the sources cycle through `addresses`.
    func openSlow(_ count: Int, port: Int, addresses: [String]) -> [Int32] {
        (0..<count).compactMap { index in
            let fd = connectFrom(addresses[index * addresses.count / count], port: port)
            return fd >= 0 ? fd : nil
        }
    }

    func measure(_ url: URL) async -> (median: Duration, worst: Duration, failures: Int) {
        let transport = CurlTransport(configuration: .init(timeout: .seconds(10)))
        var times: [Duration] = []
        var failures = 0
        for _ in 0..<21 {
            let started = ContinuousClock.now
            do {
                _ = try await transport.send(HTTPRequest(url: url))
                times.append(ContinuousClock.now - started)
            } catch {
                failures += 1
            }
        }
        times.sort()
        return (times.isEmpty ? .zero : times[times.count / 2], times.last ?? .zero, failures)
    }

    let emulator = try Emulator(configuration: EmulatorConfiguration())
    let endpoints = try await emulator.start()
    let baseline = await measure(endpoints.baseURL.appendingPathComponent("__sesame/health"))
    let slow = openSlow(count, port: endpoints.baseURL.port!, addresses: (2...9).map { "127.0.0.\($0)" })
    let loaded = await measure(endpoints.baseURL.appendingPathComponent("__sesame/health"))
    print(
        "emulator, GET /__sesame/health: alone median \(baseline.median), with \(slow.count) slow connections "
            + "median \(loaded.median), worst \(loaded.worst), failed \(loaded.failures) of 21")
    slow.forEach { close($0) }
    await emulator.stop()

    // The login receiver's server settings (LoopbackRedirectReceiver).
    let receiverLike = HTTPServer(
        configuration: .init(
            maxConnections: 512, maxHeaderBytes: 16 * 1024, maxBodyBytes: 64 * 1024,
            connectionIdleTimeout: .seconds(30), stopGracePeriod: .seconds(2), requestHeadTimeout: .seconds(10))
    ) { _ in .text("signed in") }
    try receiverLike.start()
    let held = openSlow(200, port: receiverLike.port, addresses: ["127.0.0.1"])
    let redirect = await measure(receiverLike.url("/callback?code=c&state=s"))
    print(
        "receiver-configured server, GET /callback with \(held.count) slow local connections: median "
            + "\(redirect.median), worst \(redirect.worst), failed \(redirect.failures) of 21")
    held.forEach { close($0) }
    await receiverLike.stop()
}

/// `sesame-bench tokens`: the emulator's token table, time per token issued past its limit, at
/// 100,000 and 1,000,000 tokens (issue 17, item 3: it used to sort the whole table each time).
let tokenTableBenchmark = Benchmark(
    name: "tokens",
    summary: "the emulator's token table: time per token issued past its limit, at 100k and 1M tokens"
) { _ in
    for limit in [100_000, 1_000_000] {
        let mean = TokenTableBenchmark.meanInsertionPastLimit(limit: limit, sample: 100_000)
        print("\(limit) tokens: \(mean) per token issued past the limit (mean of 100,000)")
    }
}

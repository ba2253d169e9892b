import CCurl
import Foundation
import Sesame
import SesameCurl

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// sesame-bench transport: CurlTransport against URLSession and a raw libcurl loop, all talking
// to one nginx on loopback in the same run. See Benchmarks/README.md.

extension TransportBenchmark {
    static let benchmark = Benchmark(
        name: "transport",
        summary: "CurlTransport vs URLSession vs raw libcurl, keep-alive GETs against a local nginx",
        run: { arguments in try await TransportBenchmark(arguments: arguments).run() })
}

struct TransportBenchmark {
    struct Options {
        var json = false
        var seconds = 3.0
        var rounds = 3
        var concurrency = 32
        var clients = Client.allCases
        var modes = Mode.allCases
    }

    /// One way of sending requests.
    enum Client: String, CaseIterable {
        case rawCurl
        case curlTransport
        case urlSession

        var label: String {
            switch self {
            case .rawCurl: "raw libcurl"
            case .curlTransport: "CurlTransport"
            case .urlSession: "URLSession"
            }
        }
    }

    enum Mode: String, CaseIterable {
        case sequential
        case concurrent
    }

    /// The requests one run made and how long each took.
    struct Run {
        var latencies: [UInt64]  // nanoseconds
        var elapsed: UInt64  // nanoseconds
        var cpu: UInt64 = 0  // nanoseconds of this process's CPU time (all threads, user + system)
        var rps: Double { Double(latencies.count) / (Double(elapsed) / 1e9) }
        var cpuMicrosecondsPerRequest: Double { Double(cpu) / 1e3 / Double(max(1, latencies.count)) }
    }

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    let options: Options

    init(arguments: [String]) throws {
        var options = Options()
        var remaining = arguments[...]
        func value(_ name: String) throws -> String {
            guard let value = remaining.popFirst() else { throw UsageError(description: "\(name) needs a value") }
            return value
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--json": options.json = true
            case "--seconds":
                guard let seconds = Double(try value(argument)), seconds > 0 else {
                    throw UsageError(description: "--seconds takes a positive number")
                }
                options.seconds = seconds
            case "--rounds":
                guard let rounds = Int(try value(argument)), rounds > 0 else {
                    throw UsageError(description: "--rounds takes a positive whole number")
                }
                options.rounds = rounds
            case "--concurrency":
                guard let concurrency = Int(try value(argument)), concurrency > 0 else {
                    throw UsageError(description: "--concurrency takes a positive whole number")
                }
                options.concurrency = concurrency
            case "--clients":
                let names = try value(argument).split(separator: ",").map(String.init)
                options.clients = try names.map { name in
                    guard let client = Client(rawValue: name) else {
                        throw UsageError(description: "--clients takes rawCurl, curlTransport, urlSession")
                    }
                    return client
                }
            case "--modes":
                let names = try value(argument).split(separator: ",").map(String.init)
                options.modes = try names.map { name in
                    guard let mode = Mode(rawValue: name) else {
                        throw UsageError(description: "--modes takes sequential, concurrent")
                    }
                    return mode
                }
            default:
                throw UsageError(
                    description: "unknown option \(argument)\n"
                        + "usage: sesame-bench transport [--json] [--seconds S (3)] [--rounds R (3)] "
                        + "[--concurrency N (32)] [--clients rawCurl,curlTransport,urlSession] [--modes sequential,concurrent]"
                )
            }
        }
        self.options = options
    }

    func run() async throws {
        let server = try NginxServer.start()
        defer { server.stop() }
        let url = server.url
        let expectedBytes = server.bodySize
        progress(
            "transport: GET \(url) (\(expectedBytes)-byte JSON) from \(server.version) (1 worker), "
                + "libcurl \(CurlTransport.libcurlVersion)")

        let transport = CurlTransport()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.httpMaximumConnectionsPerHost = options.concurrency
        sessionConfiguration.urlCache = nil
        let session = URLSession(configuration: sessionConfiguration)
        let fetchers = Fetchers(transport: transport, session: session, url: url, expectedBytes: expectedBytes)

        // Warm up every client: connections open, code paths faulted in.
        for client in options.clients {
            _ = try await measure(client, .sequential, seconds: 0.3, fetchers: fetchers)
            _ = try await measure(client, .concurrent, seconds: 0.3, fetchers: fetchers)
        }

        var runs: [String: [Run]] = [:]
        for round in 1...options.rounds {
            for mode in options.modes {
                for client in options.clients {
                    let run = try await measure(client, mode, seconds: options.seconds, fetchers: fetchers)
                    runs["\(client.rawValue).\(mode.rawValue)", default: []].append(run)
                    progress(
                        "  round \(round)/\(options.rounds) \(mode.rawValue) \(client.label): "
                            + "\(Int(run.rps.rounded())) rps, "
                            + "\(String(format: "%.1f", run.cpuMicrosecondsPerRequest)) µs CPU per request")
                }
            }
        }
        session.invalidateAndCancel()
        report(runs, server: server)
    }

    private func progress(_ line: String) {
        if !options.json { print(line) }
    }

    // MARK: Measuring

    private func measure(_ client: Client, _ mode: Mode, seconds: Double, fetchers: Fetchers) async throws -> Run {
        let cpuBefore = processCPUNanoseconds()
        var run = try await measureWallClock(client, mode, seconds: seconds, fetchers: fetchers)
        run.cpu = processCPUNanoseconds() - cpuBefore
        return run
    }

    private func measureWallClock(
        _ client: Client, _ mode: Mode, seconds: Double, fetchers: Fetchers
    )
        async throws -> Run
    {
        let workers = mode == .sequential ? 1 : options.concurrency
        let duration = UInt64(seconds * 1e9)
        switch client {
        case .rawCurl:
            return try await RawCurlLoop.run(
                url: fetchers.url, workers: workers, duration: duration, expectedBytes: fetchers.expectedBytes)
        case .curlTransport, .urlSession:
            let fetch: @Sendable () async throws -> Void =
                client == .curlTransport ? fetchers.viaCurlTransport : fetchers.viaURLSession
            let start = monotonicNanoseconds()
            let deadline = start + duration
            let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for _ in 0..<workers {
                    group.addTask {
                        var latencies: [UInt64] = []
                        latencies.reserveCapacity(Int(seconds * 20_000))
                        var now = monotonicNanoseconds()
                        while now < deadline {
                            try await fetch()
                            let done = monotonicNanoseconds()
                            latencies.append(done - now)
                            now = done
                        }
                        return latencies
                    }
                }
                var all: [UInt64] = []
                for try await latencies in group { all += latencies }
                return all
            }
            return Run(latencies: latencies, elapsed: monotonicNanoseconds() - start)
        }
    }

    // MARK: Reporting

    private func report(_ runs: [String: [Run]], server: NginxServer) {
        var figures: [String: Double] = [:]
        for (key, list) in runs {
            let rates = list.map(\.rps).sorted()
            let latencies = list.flatMap(\.latencies).sorted()
            figures["\(key).rps"] = rates[rates.count / 2]
            figures["\(key).p50Ms"] = percentile(latencies, 0.50)
            figures["\(key).p99Ms"] = percentile(latencies, 0.99)
            figures["\(key).requests"] = Double(latencies.count)
            figures["\(key).cpuUsPerRequest"] =
                Double(list.map(\.cpu).reduce(0, +)) / 1e3 / Double(max(1, latencies.count))
        }
        for mode in options.modes {
            let curl = figures["curlTransport.\(mode.rawValue).rps"] ?? 0
            figures["ratios.\(mode.rawValue).curlTransportToRawCurl"] =
                curl / (figures["rawCurl.\(mode.rawValue).rps"] ?? .nan)
            figures["ratios.\(mode.rawValue).curlTransportToURLSession"] =
                curl / (figures["urlSession.\(mode.rawValue).rps"] ?? .nan)
        }

        if options.json {
            var object: [String: Any] = figures.mapValues { ($0 * 1000).rounded() / 1000 }
            object["server"] = server.version
            object["libcurl"] = CurlTransport.libcurlVersion
            object["concurrency"] = options.concurrency
            object["seconds"] = options.seconds
            object["rounds"] = options.rounds
            let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }

        print(
            "\n\(options.rounds) rounds of \(formatted(options.seconds)) s per client and mode, interleaved; "
                + "rps is the median round, latencies are over all rounds.")
        for mode in options.modes {
            let title =
                mode == .sequential
                ? "sequential (one at a time, keep-alive)" : "concurrent (\(options.concurrency) in flight)"
            print("\n\(title)")
            print(
                "  \("client".padded(16)) \("rps".leftPadded(9)) \("p50 ms".leftPadded(9)) \("p99 ms".leftPadded(9)) "
                    + "\("CPU µs/req".leftPadded(12))")
            for client in options.clients {
                let key = "\(client.rawValue).\(mode.rawValue)"
                let rps = figures["\(key).rps", default: .nan]
                print(
                    "  \(client.label.padded(16)) \(String(format: "%.0f", rps).leftPadded(9)) "
                        + "\(String(format: "%.3f", figures["\(key).p50Ms", default: .nan]).leftPadded(9)) "
                        + "\(String(format: "%.3f", figures["\(key).p99Ms", default: .nan]).leftPadded(9)) "
                        + "\(String(format: "%.1f", figures["\(key).cpuUsPerRequest", default: .nan]).leftPadded(12))")
            }
        }
        print("\nratios (CurlTransport rps divided by the other's)")
        for mode in options.modes {
            let raw = figures["ratios.\(mode.rawValue).curlTransportToRawCurl", default: .nan]
            let session = figures["ratios.\(mode.rawValue).curlTransportToURLSession", default: .nan]
            let targets = mode == .sequential ? "  (targets: ≥ 0.9 and ≥ 4)" : "  (target: well above 1 vs URLSession)"
            print(
                "  \(mode.rawValue.padded(11)) vs raw libcurl \(String(format: "%.2f", raw)), "
                    + "vs URLSession \(String(format: "%.2f", session))\(targets)")
        }
    }

    private func percentile(_ sorted: [UInt64], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.down)))
        return Double(sorted[index]) / 1e6
    }

    private func formatted(_ seconds: Double) -> String {
        seconds.rounded() == seconds ? String(Int(seconds)) : String(seconds)
    }
}

/// The three ways of fetching the URL once, each checking the status and the body size.
struct Fetchers: Sendable {
    let transport: CurlTransport
    let session: URLSession
    let url: URL
    let expectedBytes: Int

    struct WrongAnswer: Error, CustomStringConvertible {
        var description: String
    }

    func viaCurlTransport() async throws {
        let response = try await transport.send(HTTPRequest(url: url))
        guard response.status == 200, response.body.count == expectedBytes else {
            throw WrongAnswer(description: "CurlTransport got \(response.status), \(response.body.count) bytes")
        }
    }

    func viaURLSession() async throws {
        let (data, response) = try await session.data(from: url)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200, data.count == expectedBytes else {
            throw WrongAnswer(description: "URLSession got \(status), \(data.count) bytes")
        }
    }
}

/// The floor: libcurl easy handles on plain threads, options set once, `curl_easy_perform` in a loop.
enum RawCurlLoop {
    final class Worker: @unchecked Sendable {  // used by one thread at a time; handed over by Thread start/exit
        var latencies: [UInt64] = []
        var received = 0
        var failure: String?
    }

    static func run(
        url: URL, workers count: Int, duration: UInt64, expectedBytes: Int
    ) async throws
        -> TransportBenchmark.Run
    {
        let workers = (0..<count).map { _ in Worker() }
        let start = monotonicNanoseconds()
        let deadline = start + duration
        await withTaskGroup(of: Void.self) { group in
            for worker in workers {
                group.addTask {
                    await onThread {
                        loop(worker, url: url.absoluteString, until: deadline, expectedBytes: expectedBytes)
                    }
                }
            }
        }
        let elapsed = monotonicNanoseconds() - start
        if let failure = workers.compactMap(\.failure).first {
            throw Fetchers.WrongAnswer(description: "raw libcurl: \(failure)")
        }
        return TransportBenchmark.Run(latencies: workers.flatMap(\.latencies), elapsed: elapsed)
    }

    private static func loop(_ worker: Worker, url: String, until deadline: UInt64, expectedBytes: Int) {
        guard let easy = sesame_curl_easy_init() else {
            worker.failure = "curl_easy_init failed"
            return
        }
        defer { sesame_curl_easy_cleanup(easy) }
        let context = Unmanaged.passUnretained(worker).toOpaque()
        _ = sesame_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = sesame_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = sesame_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = sesame_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { _, size, count, context in
            Unmanaged<Worker>.fromOpaque(context!).takeUnretainedValue().received += size * count
            return size * count
        }
        worker.latencies.reserveCapacity(100_000)
        var now = monotonicNanoseconds()
        while now < deadline {
            worker.received = 0
            let result = sesame_curl_easy_perform(easy)
            var status = 0
            _ = sesame_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            guard result == CURLE_OK, status == 200, worker.received == expectedBytes else {
                worker.failure =
                    "curl_easy_perform: \(String(cString: sesame_curl_easy_strerror(result))), status \(status)"
                return
            }
            let done = monotonicNanoseconds()
            worker.latencies.append(done - now)
            now = done
        }
    }
}

/// Runs `body` on a new thread (blocking C calls stay off the cooperative pool) and awaits it.
func onThread(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let thread = Thread {
            body()
            continuation.resume()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

func processCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The CPU time of this process's threads so far, in nanoseconds, summed by thread name
/// (`/proc/self/task/*/comm` and the first field of `schedstat`): to tell which thread a loop's
/// requests cost, when one thread is on every request's path.
func threadCPUNanosecondsByName() -> [String: UInt64] {
    var byName: [String: UInt64] = [:]
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    for task in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
            let schedstat = try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8),
            let running = schedstat.split(separator: " ").first.flatMap({ UInt64($0) })
        else { continue }
        byName[comm.trimmingCharacters(in: .whitespacesAndNewlines), default: 0] += running
    }
    return byName
}

func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

extension String {
    fileprivate func padded(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

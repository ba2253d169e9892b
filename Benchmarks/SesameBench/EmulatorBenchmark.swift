import Foundation
import SesameFacebookEmulator
import SesameHTTPServer

/// `sesame-bench emulator [--seconds N] [--connections N] [--nginx-workers N|auto] [--json]`:
/// an authenticated `GET /v19.0/me` on the emulator under `wrk`, with the process's resident
/// memory before and after, beside nginx serving a static file of the same size in the same run.
let emulatorBenchmark = Benchmark(
    name: "emulator",
    summary: "emulator GET /me under wrk: req/s, errors, RSS before/after, beside nginx"
) { arguments in
    var seconds = 10
    var connections = 32
    var nginxWorkers = "auto"
    var json = false
    var engineOnly = false
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--seconds": seconds = Int(rest.popFirst() ?? "") ?? seconds
        case "--connections": connections = Int(rest.popFirst() ?? "") ?? connections
        case "--nginx-workers": nginxWorkers = rest.popFirst() ?? nginxWorkers
        case "--json": json = true
        case "--engine-only": engineOnly = true
        default: throw BenchmarkError("unknown option \(argument)")
        }
    }
    guard let wrk = findExecutable("wrk") else {
        throw BenchmarkError("wrk is not installed (apt-get install wrk); it generates the load")
    }

    let emulator = try Emulator()
    let endpoints = try await emulator.start()
    let token = try await emulator.issueToken(permissions: ["email"], longLived: true)
    let url = endpoints.graphURL.absoluteString + "/v19.0/me?fields=id,name,email"
    func load(
        _ url: String, seconds: Int, headers: [String]
    ) async throws -> (requestsPerSecond: Double, p50: String, p99: String, errors: Int) {
        var command = [wrk, "-t", "2", "-c", "\(connections)", "-d", "\(seconds)s", "--latency"]
        for header in headers { command += ["-H", header] }
        command.append(url)
        return parseWrk(try await runCommand(command))
    }
    let authorization = "Authorization: Bearer \(token)"
    // The engine alone, without HTTP: what the emulator itself costs per request.
    let engineRequest = EmulatorRequest(
        method: .get, path: "/v19.0/me", query: [("fields", "id,name,email")],
        headers: ["Authorization": "Bearer \(token)", "Host": endpoints.baseURL.host ?? ""])
    let iterations = Int(ProcessInfo.processInfo.environment["SESAME_BENCH_ITERATIONS"] ?? "") ?? 200_000
    let clock = ContinuousClock()
    let engineTime = await clock.measure {
        for _ in 0..<iterations { _ = await emulator.respond(to: engineRequest) }
    }
    let engineMicroseconds =
        (Double(engineTime.components.seconds) * 1e6 + Double(engineTime.components.attoseconds) / 1e12)
        / Double(iterations)
    if engineOnly {
        await emulator.stop()
        print("engine: \(String(format: "%.2f", engineMicroseconds)) µs per GET /me without HTTP")
        return
    }
    // A short warm-up, so the measured memory is the steady state rather than first allocations.
    _ = try await load(url, seconds: 2, headers: [authorization])
    let rssBefore = residentKilobytes()
    let cpuBefore = processCPUSeconds(getpid())
    let emulatorFigures = try await load(url, seconds: seconds, headers: [authorization])
    let emulatorCPU = processCPUSeconds(getpid()) - cpuBefore
    let rssAfter = residentKilobytes()
    // Check the answer is what was measured.
    let sample = try await runCommand(["/usr/bin/curl", "-s", "-H", authorization, url])

    // The same engine behind the HTTP layer as it was before it answered on the server's threads:
    // one libmicrohttpd thread and an async handler (a task per request); and answering now, on
    // one thread.
    func engineServer(threads: Int, now: Bool) -> HTTPServer {
        var configuration = HTTPServer.Configuration(maxConnections: 1024)
        configuration.threads = threads
        if now {
            return HTTPServer(
                configuration: configuration,
                answering: { .now(Emulator.response(emulator.engineOutcome(for: Emulator.emulatorRequest($0)))) })
        }
        return HTTPServer(configuration: configuration) {
            Emulator.response(await emulator.respond(to: Emulator.emulatorRequest($0)))
        }
    }
    let graphPath = "/v19.0/me?fields=id,name,email"
    /// Each measured server's CPU µs a request, in the order measured.
    var serverCosts: [Double] = []
    /// Starts `server`, warms it up for 2 s, measures `path` under wrk, and stops it.
    func measure(
        _ server: HTTPServer, path: String, headers: [String]
    ) async throws -> (requestsPerSecond: Double, p50: String, p99: String, errors: Int) {
        try server.start()
        let target = server.url(path).absoluteString
        _ = try await load(target, seconds: 2, headers: headers)
        let cpuBefore = processCPUSeconds(getpid())
        let figures = try await load(target, seconds: seconds, headers: headers)
        let cpu = processCPUSeconds(getpid()) - cpuBefore
        await server.stop()
        let requests = figures.requestsPerSecond * Double(seconds)
        serverCosts.append(requests > 0 ? cpu * 1e6 / requests : 0)
        return figures
    }
    let asyncEngineFigures = try await measure(
        engineServer(threads: 1, now: false), path: graphPath, headers: [authorization])
    let oneThreadFigures = try await measure(
        engineServer(threads: 1, now: true), path: graphPath, headers: [authorization])
    await emulator.stop()

    // The same bytes from a bare HTTPServer: the ceiling the emulator's HTTP layer sets, with
    // the answer given on the server's thread (as the emulator does) and from an async handler.
    let sampleBody = Data(sample.utf8)
    let bareFigures = try await measure(
        HTTPServer(configuration: .init(maxConnections: 1024), answering: { _ in .now(.json(sampleBody)) }),
        path: "/me", headers: [])
    let asyncFigures = try await measure(
        HTTPServer(configuration: .init(maxConnections: 1024)) { _ in .json(sampleBody) }, path: "/me", headers: [])

    let nginx = try NginxServer.start(body: sampleBody, workers: nginxWorkers)
    defer { nginx.stop() }
    _ = try await load(nginx.url.absoluteString, seconds: 2, headers: [])
    let nginxCPUBefore = treeCPUSeconds(nginx.process.processIdentifier)
    let nginxFigures = try await load(nginx.url.absoluteString, seconds: seconds, headers: [])
    let nginxCPU = treeCPUSeconds(nginx.process.processIdentifier) - nginxCPUBefore

    // CPU time per answered request, the servers' own (user and system, every thread or worker),
    // read from /proc around the measured load: what a server spends on a request, which another
    // tenant's load on the host changes less than it changes req/s.
    func microsecondsPerRequest(
        _ cpu: Double, _ figures: (requestsPerSecond: Double, p50: String, p99: String, errors: Int)
    ) -> Double {
        let requests = figures.requestsPerSecond * Double(seconds)
        return requests > 0 ? cpu * 1e6 / requests : 0
    }
    let emulatorCost = microsecondsPerRequest(emulatorCPU, emulatorFigures)
    let nginxCost = microsecondsPerRequest(nginxCPU, nginxFigures)
    let costRatio = emulatorCost > 0 ? nginxCost / emulatorCost : 0

    let ratio =
        nginxFigures.requestsPerSecond > 0 ? emulatorFigures.requestsPerSecond / nginxFigures.requestsPerSecond : 0
    if json {
        let object: [String: Any] = [
            "benchmark": "emulator", "seconds": seconds, "connections": connections,
            "emulator": [
                "requestsPerSecond": emulatorFigures.requestsPerSecond, "latencyP50": emulatorFigures.p50,
                "latencyP99": emulatorFigures.p99, "errors": emulatorFigures.errors, "rssBeforeKB": rssBefore,
                "rssAfterKB": rssAfter, "engineMicrosecondsPerRequest": engineMicroseconds,
            ],
            "nginx": [
                "requestsPerSecond": nginxFigures.requestsPerSecond, "latencyP50": nginxFigures.p50,
                "latencyP99": nginxFigures.p99, "errors": nginxFigures.errors, "workers": nginxWorkers,
            ],
            "httpServer": figuresObject(bareFigures),
            "emulatorAsyncOneThread": figuresObject(asyncEngineFigures),
            "emulatorNowOneThread": figuresObject(oneThreadFigures),
            "httpServerAsync": figuresObject(asyncFigures),
            "ratio": ratio, "bodyBytes": sample.utf8.count,
            "cpuMicrosecondsPerRequest": ["emulator": emulatorCost, "nginx": nginxCost],
            "cpuRatio": costRatio,
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    } else {
        print("GET /v19.0/me (authenticated, \(sample.utf8.count) bytes), wrk -t2 -c\(connections) -d\(seconds)s")
        print(
            "  emulator: \(Int(emulatorFigures.requestsPerSecond)) req/s, p50 \(emulatorFigures.p50), "
                + "p99 \(emulatorFigures.p99), errors \(emulatorFigures.errors)")
        print(
            "  before:   \(Int(asyncEngineFigures.requestsPerSecond)) req/s, p50 \(asyncEngineFigures.p50), "
                + "p99 \(asyncEngineFigures.p99), errors \(asyncEngineFigures.errors) "
                + "(the same engine from an async handler on one server thread, as before)")
        print(
            "  1 thread: \(Int(oneThreadFigures.requestsPerSecond)) req/s, p50 \(oneThreadFigures.p50), "
                + "p99 \(oneThreadFigures.p99), errors \(oneThreadFigures.errors) (answered now, one server thread)")
        print(
            "  nginx:    \(Int(nginxFigures.requestsPerSecond)) req/s, p50 \(nginxFigures.p50), "
                + "p99 \(nginxFigures.p99), errors \(nginxFigures.errors) (static file, \(nginxWorkers) workers)")
        print(
            "  bare:     \(Int(bareFigures.requestsPerSecond)) req/s, p50 \(bareFigures.p50), "
                + "p99 \(bareFigures.p99), errors \(bareFigures.errors) (HTTPServer answering the same bytes now)")
        print(
            "  async:    \(Int(asyncFigures.requestsPerSecond)) req/s, p50 \(asyncFigures.p50), "
                + "p99 \(asyncFigures.p99), errors \(asyncFigures.errors) (the same from an async handler, in a task)")
        print("  ratio:    \(String(format: "%.2f", ratio)) of nginx")
        print(
            "  CPU µs a request of the others, in the order above: "
                + serverCosts.map { String(format: "%.1f", $0) }.joined(separator: ", ")
                + " (before, 1 thread, bare, async)")
        print(
            "  CPU:      \(String(format: "%.1f", emulatorCost)) µs a request, nginx \(String(format: "%.1f", nginxCost)) µs: "
                + "\(String(format: "%.2f", costRatio)) of nginx's requests per CPU second")
        print("  engine:   \(String(format: "%.1f", engineMicroseconds)) µs per request without HTTP")
        print("  RSS:      \(rssBefore) KB before, \(rssAfter) KB after (\(rssAfter - rssBefore) KB)")
    }
}

/// One server's wrk figures as a JSON object.
private func figuresObject(
    _ figures: (requestsPerSecond: Double, p50: String, p99: String, errors: Int)
) -> [String: Any] {
    [
        "requestsPerSecond": figures.requestsPerSecond, "latencyP50": figures.p50, "latencyP99": figures.p99,
        "errors": figures.errors,
    ]
}

/// This process's resident set size, in KB, from `/proc/self/status`.
private func residentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// The user and system CPU seconds of process `pid` so far (every thread), from /proc/PID/stat.
private func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After the command name in parentheses: state is field 3, utime 14 and stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The CPU seconds of `pid` and its children (nginx's master and its workers).
private func treeCPUSeconds(_ pid: Int32) -> Double {
    var total = processCPUSeconds(pid)
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries {
        guard let child = Int32(entry), child != pid,
            let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // The parent's pid is field 4: the second after the command name.
        if fields.count > 1, Int32(fields[1]) == pid { total += processCPUSeconds(child) }
    }
    return total
}

import Foundation
import SesameEmulator
import SesameHTTPServer

#if canImport(Glibc)
    import Glibc
#endif

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
    ) throws -> (requestsPerSecond: Double, p50: String, p99: String, errors: Int) {
        var command = [wrk, "-t", "2", "-c", "\(connections)", "-d", "\(seconds)s", "--latency"]
        for header in headers { command += ["-H", header] }
        command.append(url)
        return parseWrk(try runCommand(command))
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
    _ = try load(url, seconds: 2, headers: [authorization])
    let rssBefore = residentKilobytes()
    let emulatorFigures = try load(url, seconds: seconds, headers: [authorization])
    let rssAfter = residentKilobytes()
    // Check the answer is what was measured.
    let sample = try runCommand(["/usr/bin/curl", "-s", "-H", authorization, url])
    await emulator.stop()

    // The same bytes from a bare HTTPServer: the ceiling the emulator's HTTP layer sets.
    let sampleBody = Data(sample.utf8)
    let bare = HTTPServer(configuration: .init(maxConnections: 1024)) { _ in .json(sampleBody) }
    try bare.start()
    _ = try load(bare.url("/me").absoluteString, seconds: 2, headers: [])
    let bareFigures = try load(bare.url("/me").absoluteString, seconds: seconds, headers: [])
    await bare.stop()

    let nginx = try BenchNginx.start(body: Data(sample.utf8), workers: nginxWorkers)
    defer { nginx.stop() }
    _ = try load(nginx.url, seconds: 2, headers: [])
    let nginxFigures = try load(nginx.url, seconds: seconds, headers: [])

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
            "httpServer": [
                "requestsPerSecond": bareFigures.requestsPerSecond, "latencyP50": bareFigures.p50,
                "latencyP99": bareFigures.p99, "errors": bareFigures.errors,
            ],
            "ratio": ratio, "bodyBytes": sample.utf8.count,
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    } else {
        print("GET /v19.0/me (authenticated, \(sample.utf8.count) bytes), wrk -t2 -c\(connections) -d\(seconds)s")
        print(
            "  emulator: \(Int(emulatorFigures.requestsPerSecond)) req/s, p50 \(emulatorFigures.p50), "
                + "p99 \(emulatorFigures.p99), errors \(emulatorFigures.errors)")
        print(
            "  nginx:    \(Int(nginxFigures.requestsPerSecond)) req/s, p50 \(nginxFigures.p50), "
                + "p99 \(nginxFigures.p99), errors \(nginxFigures.errors) (static file, \(nginxWorkers) workers)")
        print(
            "  bare:     \(Int(bareFigures.requestsPerSecond)) req/s, p50 \(bareFigures.p50), "
                + "p99 \(bareFigures.p99), errors \(bareFigures.errors) (HTTPServer answering the same bytes at once)")
        print("  ratio:    \(String(format: "%.2f", ratio)) of nginx")
        print("  engine:   \(String(format: "%.1f", engineMicroseconds)) µs per request without HTTP")
        print("  RSS:      \(rssBefore) KB before, \(rssAfter) KB after (\(rssAfter - rssBefore) KB)")
    }
}

/// This process's resident set size, in KB, from `/proc/self/status`.
private func residentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// nginx serving one file on 127.0.0.1 from a temporary directory, as a child process.
private struct BenchNginx {
    let process: Process
    let directory: URL
    let url: String

    static func start(body: Data, workers: String) throws -> BenchNginx {
        guard
            let nginx = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].first(where: FileManager.default.isExecutableFile)
                ?? findExecutable("nginx")
        else {
            throw BenchmarkError("nginx is not installed (apt-get install nginx-light); it is the comparison")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-bench-emulator-nginx-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        let root = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
        let file = root.appendingPathComponent("me.json")
        try body.write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        let port = try freeLoopbackPort()
        let configuration = """
            worker_processes \(workers);
            daemon off;
            pid \(directory.path)/nginx.pid;
            error_log \(directory.path)/error.log warn;
            events { worker_connections 1024; }
            http {
                access_log off;
                default_type application/json;
                keepalive_requests 10000000;
                client_body_temp_path \(directory.path)/body;
                proxy_temp_path \(directory.path)/proxy;
                fastcgi_temp_path \(directory.path)/fastcgi;
                uwsgi_temp_path \(directory.path)/uwsgi;
                scgi_temp_path \(directory.path)/scgi;
                server { listen 127.0.0.1:\(port); root \(root.path); }
            }

            """
        try Data(configuration.utf8).write(to: directory.appendingPathComponent("nginx.conf"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nginx)
        process.arguments = [
            "-e", directory.appendingPathComponent("error.log").path, "-p", directory.path, "-c", "nginx.conf",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let server = BenchNginx(process: process, directory: directory, url: "http://127.0.0.1:\(port)/me.json")
        // Wait until it answers.
        for _ in 0..<100 {
            if (try? runCommand(["/usr/bin/curl", "-sf", "-o", "/dev/null", server.url])) != nil { return server }
            guard process.isRunning else { break }
            usleep(50_000)
        }
        server.stop()
        let log = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        throw BenchmarkError("nginx did not start: \(log)")
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A TCP port free on 127.0.0.1 now (bound to port 0, read back, released).
private func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BenchmarkError("socket() failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0 else { throw BenchmarkError("bind() failed") }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

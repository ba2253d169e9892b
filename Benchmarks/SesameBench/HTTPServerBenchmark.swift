import Foundation
import Sesame
import SesameHTTPServer

/// `sesame-bench httpserver [--seconds N] [--connections N] [--json]`: requests per second and
/// latency of `HTTPServer` under `wrk`, with keep-alive and with a new connection per request,
/// for a handler that answers at once and one that awaits (a suspension, as a real handler
/// has).
let httpServerBenchmark = Benchmark(
    name: "httpserver",
    summary: "HTTPServer requests/s and latency under wrk (keep-alive and not)"
) { arguments in
    var seconds = 5
    var connections = 32
    var json = false
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--seconds": seconds = Int(rest.popFirst() ?? "") ?? seconds
        case "--connections": connections = Int(rest.popFirst() ?? "") ?? connections
        case "--json": json = true
        default: throw BenchmarkError("unknown option \(argument)")
        }
    }
    guard let wrk = findExecutable("wrk") else {
        throw BenchmarkError("wrk is not installed (apt-get install wrk); it generates the load")
    }
    let body = Data(#"{"id":"100001","name":"Test User"}"#.utf8)
    let server = HTTPServer(configuration: .init(maxConnections: 1024)) { request in
        if request.path == "/await" { await Task.yield() }
        return .json(body)
    }
    try server.start()
    var results: [[String: Any]] = []
    for (path, keepAlive) in [("/", true), ("/await", true), ("/", false)] {
        var command = [wrk, "-t", "2", "-c", "\(connections)", "-d", "\(seconds)s", "--latency"]
        if !keepAlive { command += ["-H", "Connection: close"] }
        command.append(server.url(path).absoluteString)
        let output = try await runCommand(command)
        let figures = parseWrk(output)
        results.append([
            "path": path, "keepAlive": keepAlive, "connections": connections, "seconds": seconds,
            "requestsPerSecond": figures.requestsPerSecond, "latencyP50": figures.p50, "latencyP99": figures.p99,
            "errors": figures.errors,
        ])
        if !json {
            print(
                "HTTPServer \(path.padding(toLength: 7, withPad: " ", startingAt: 0)) "
                    + "\(keepAlive ? "keep-alive " : "close each ") \(connections) conns: "
                    + "\(Int(figures.requestsPerSecond)) req/s, p50 \(figures.p50), p99 \(figures.p99), "
                    + "errors \(figures.errors)")
        }
    }
    await server.stop()
    if json {
        let data = try JSONSerialization.data(
            withJSONObject: ["benchmark": "httpserver", "results": results], options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func findExecutable(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Runs a command and returns its standard output (read before waiting, so a full pipe cannot
/// block it), on a thread of its own: a wrk run lasts seconds, and the server under test needs
/// every cooperative-pool thread meanwhile. Spawned with Sesame's `ChildProcess`, not
/// Foundation's `Process` (see ChildProcess for why).
func runCommand(_ command: [String]) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            let pipe = Pipe()
            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: command[0]), arguments: Array(command.dropFirst()),
                standardInput: .null, standardOutput: .pipe(pipe), standardError: .null)
            do {
                try process.run()
            } catch {
                return continuation.resume(throwing: error)
            }
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            let status = process.waitUntilExit()
            guard status == 0 else {
                return continuation.resume(throwing: BenchmarkError("\(command[0]) exited with status \(status)"))
            }
            continuation.resume(returning: String(decoding: data, as: UTF8.self))
        }
    }
}

/// Requests/s, latency percentiles and error count from wrk's text output.
func parseWrk(_ output: String) -> (requestsPerSecond: Double, p50: String, p99: String, errors: Int) {
    var requestsPerSecond = 0.0
    var p50 = "?"
    var p99 = "?"
    var errors = 0
    for line in output.split(separator: "\n") {
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        if line.hasPrefix("Requests/sec:"), let value = words.last { requestsPerSecond = Double(value) ?? 0 }
        if words.first == "50%", words.count > 1 { p50 = String(words[1]) }
        if words.first == "99%", words.count > 1 { p99 = String(words[1]) }
        if line.contains("Socket errors:") || line.contains("Non-2xx") {
            errors += words.compactMap { Int($0.trimmingCharacters(in: .punctuationCharacters)) }.reduce(0, +)
        }
    }
    return (requestsPerSecond, p50, p99, errors)
}

import CBenchSupport
import Foundation

/// Where the graph benchmark's threads run.
///
/// The emulator answers in the benchmark's own process, so its server threads and the client
/// loops share this machine's CPUs. Shared, the scheduler divides the CPUs by thread: the raw
/// libcurl loop's eight threads take more of them from the server than the transport's one
/// engine thread can, and the ratio measures that as much as either client's cost. Isolated, the
/// server's threads run on one half of the CPUs this process may use and every other thread (the
/// client loops, the transport's engine, Swift's pool) on the other half, so that both clients
/// get the same CPUs and the same server.
struct CPUPlacement {
    /// The CPUs this process may use, lowest first.
    let allowed: [Int32]

    init() throws {
        var cpus = [Int32](repeating: 0, count: 1024)
        let count = sesame_bench_allowed_cpus(&cpus, Int32(cpus.count))
        guard count > 0 else {
            throw BenchmarkError("sched_getaffinity failed: \(String(cString: strerror(errno)))")
        }
        allowed = Array(cpus[..<Int(count)])
    }

    /// Isolation needs a CPU for each side.
    var canIsolate: Bool { allowed.count >= 2 }

    /// The server's CPUs when isolated: the upper half (rounded down).
    var serverCPUs: [Int32] { Array(allowed[half...]) }
    /// Everyone else's CPUs when isolated: the lower half (rounded up).
    var clientCPUs: [Int32] { Array(allowed[..<half]) }

    private var half: Int { (allowed.count + 1) / 2 }

    /// Every thread of this process may run on every allowed CPU again.
    func share() throws { try place { _ in allowed } }

    /// The server's threads on ``serverCPUs``, every other thread on ``clientCPUs``.
    func isolate() throws {
        precondition(canIsolate, "isolation needs two CPUs")
        try place { Self.isServerThread($0) ? serverCPUs : clientCPUs }
    }

    /// libmicrohttpd's threads (`MHD-…`) and the HTTP server's own (`sesame-httpserver-…`,
    /// which Linux cuts to 15 characters).
    static func isServerThread(_ name: String) -> Bool {
        name.hasPrefix("MHD") || name.hasPrefix("sesame-httpserv")
    }

    private func place(_ cpus: (String) -> [Int32]) throws {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
        for task in tasks {
            guard let tid = Int32(task) else { continue }
            let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            let set = cpus(name.trimmingCharacters(in: .whitespacesAndNewlines))
            if sesame_bench_pin_thread(tid, set, Int32(set.count)) != 0 && errno != ESRCH {
                throw BenchmarkError("sched_setaffinity(\(tid)) failed: \(String(cString: strerror(errno)))")
            }
        }
    }
}

extension CPUPlacement {
    /// The CPU time of this process so far, less its server threads' (which live as long as the
    /// emulator): the clients' share, including threads that have exited.
    static func clientCPUNanoseconds() -> UInt64 {
        let server = threadCPUNanosecondsByName().filter { isServerThread($0.key) }.values.reduce(0, +)
        return processCPUNanoseconds() &- server
    }
}

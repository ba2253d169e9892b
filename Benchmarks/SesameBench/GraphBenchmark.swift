import Foundation
import Sesame
import SesameCurl
import SesameFacebook
import SesameFacebookEmulator

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// sesame-bench graph: `GET /me` through the whole provider stack (FacebookSession → GraphClient
// → CurlTransport) beside a raw libcurl loop and URLSession, all against one emulator on
// loopback in the same run; then a batch of 50 against 50 sequential calls. See
// Benchmarks/README.md.

let graphBenchmark = Benchmark(
    name: "graph",
    summary: "GET /me via FacebookSession+GraphClient vs raw libcurl vs URLSession; batch of 50 vs 50 calls"
) { arguments in
    var seconds = 3.0
    var rounds = 3
    var slices = 1
    var concurrency = 8
    var batches = 20
    var json = false
    var stackOnly = false
    var only: String?
    var placements = GraphBenchmark.Placement.allCases
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--stack-only": stackOnly = true
        case "--only": only = rest.popFirst()
        case "--seconds": seconds = Double(rest.popFirst() ?? "") ?? seconds
        case "--rounds": rounds = Int(rest.popFirst() ?? "") ?? rounds
        case "--slices": slices = max(1, Int(rest.popFirst() ?? "") ?? slices)
        case "--concurrency": concurrency = Int(rest.popFirst() ?? "") ?? concurrency
        case "--batches": batches = Int(rest.popFirst() ?? "") ?? batches
        case "--json": json = true
        case "--placement":
            let value = rest.popFirst() ?? ""
            if value == "both" {
                placements = GraphBenchmark.Placement.allCases
            } else if let placement = GraphBenchmark.Placement(rawValue: value) {
                placements = [placement]
            } else {
                throw BenchmarkError("--placement takes shared, isolated or both, not \(value)")
            }
        default:
            throw BenchmarkError(
                "unknown option \(argument); options: --seconds N --rounds N --slices N --concurrency N --batches N --json "
                    + "--placement shared|isolated|both --stack-only --only LOOP"
            )
        }
    }
    try await GraphBenchmark(
        seconds: seconds, rounds: rounds, slices: slices, concurrency: concurrency, batches: batches, json: json,
        placements: placements, stackOnly: stackOnly, only: only
    ).run()
}

struct GraphBenchmark {
    let seconds: Double
    let rounds: Int
    /// How many turns the raw loop and the two stack loops take in each round (1, the default:
    /// one each, back to back). With more, each loop runs `seconds / slices` at a time, in
    /// rotation, so that all three see the host in the same seconds: a shared 2-core machine's
    /// speed drifts by a third within a minute.
    let slices: Int
    let concurrency: Int
    let batches: Int
    let json: Bool
    /// Where the goal's three loops run in each round, in this order (both, by default).
    let placements: [Placement]
    /// Only the provider stack over canned answers, for `seconds`.
    var stackOnly = false
    /// Only one loop (`raw`, `stack` or `transport`), for `seconds`, with its CPU time a request.
    var only: String?

    /// The figures' keys of the goal's three loops, in ``goalLoops(round:place:raw:stack:executor:)``'s
    /// order: raw libcurl, the stack on Swift's pool, the stack on the transport's executor.
    static let goalLoopKeys = ["rawCurl", "provider", "providerOnExecutor"]

    /// Where the threads of the goal's three loops run (see ``CPUPlacement``).
    enum Placement: String, CaseIterable {
        /// Every thread on every CPU, client and server alike, as the scheduler decides.
        case shared
        /// The server's threads on one half of the CPUs, the client loops on the other.
        case isolated

        /// The key prefix of this placement's figures.
        var prefix: String { self == .shared ? "" : "isolated." }
    }

    func run() async throws {
        var configuration = EmulatorConfiguration()
        configuration.hourlyCallsPerUser = 1_000_000_000
        let emulator = try Emulator(configuration: configuration)
        let endpoints = try await emulator.start()
        defer { Task { await emulator.stop() } }
        let app = configuration.defaultApp
        let tokenString = try await emulator.issueToken(permissions: ["email"], longLived: true)
        let provider = FacebookProvider(
            appID: app.id, graphVersion: configuration.graphVersion, clientToken: app.clientToken,
            dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL)

        let store = InMemoryCredentialStore()
        let key = CredentialKey(provider: .facebook, appID: app.id, account: "default")
        try await store.save(
            StoredCredential(
                key: key,
                token: AccessToken(
                    tokenString: tokenString, provider: .facebook, appID: app.id,
                    expirationDate: Date().addingTimeInterval(50 * 86_400))))
        let transport = CurlTransport()
        let session = FacebookSession(provider: provider, transport: transport, store: store)
        guard try await session.openActiveSession(allowLoginUI: false).isOpen else {
            throw BenchmarkError("the benchmark session did not open from its stored token")
        }
        let graph = session.graph
        let meURL = try provider.graphURL("me", query: [("fields", "id"), ("access_token", tokenString)])
        let expected = try await transport.send(HTTPRequest(url: meURL)).body.count

        // The provider stack's own cost: the same calls over a transport that hands back the
        // emulator's answer at once (no network, no server).
        let canned = CannedTransport(response: try await transport.send(HTTPRequest(url: meURL)))
        let cannedSession = FacebookSession(provider: provider, transport: canned, store: store)
        guard try await cannedSession.openActiveSession(allowLoginUI: false).isOpen else {
            throw BenchmarkError("the canned session did not open from its stored token")
        }
        let cannedGraph = cannedSession.graph
        // One call of each loop, with its answer checked: the figures are of calls that worked.
        let stackCall: @Sendable () async throws -> Void = {
            let me = try await graph.get("me", parameters: ["fields": "id"])
            guard me["id"] != nil else { throw BenchmarkError("GET /me via the provider had no id") }
        }
        let cannedCall: @Sendable () async throws -> Void = {
            let me = try await cannedGraph.get("me", parameters: ["fields": "id"])
            guard me["id"] != nil else { throw BenchmarkError("GET /me via the canned stack had no id") }
        }
        let transportCall: @Sendable () async throws -> Void = {
            let response = try await transport.send(HTTPRequest(url: meURL))
            guard response.body.count == expected else { throw BenchmarkError("CurlTransport got a short body") }
        }
        if stackOnly {
            // Only the stack over canned answers, for `seconds` (to profile it on its own).
            let rate = try await loop(seconds: seconds, concurrency: 1, cannedCall)
            print("the provider stack alone, over canned answers: \(String(format: "%.1f", 1e6 / rate)) µs per call")
            return
        }

        if let only {
            if placements == [.isolated] {
                let cpus = try CPUPlacement()
                guard cpus.canIsolate else {
                    throw BenchmarkError("--placement isolated needs two CPUs; this process may run on one")
                }
                try cpus.isolate()
            }
            let threadsBefore = threadCPUNanosecondsByName()
            let cpu = processCPUNanoseconds()
            let start = monotonicNanoseconds()
            let rate: Double
            switch only {
            case "raw":
                rate = try await RawCurlLoop.run(
                    url: meURL, workers: concurrency, duration: UInt64(seconds * 1e9), expectedBytes: expected
                ).rps
            case "stack", "transport", "stack-executor", "transport-executor":
                let call = only.hasPrefix("stack") ? stackCall : transportCall
                if only.hasSuffix("-executor") {
                    rate = try await withTaskExecutorPreference(transport.executor) {
                        try await loop(seconds: seconds, call)
                    }
                } else {
                    rate = try await loop(seconds: seconds, call)
                }
            default:
                throw BenchmarkError(
                    "--only takes raw, stack, transport, stack-executor or transport-executor, not \(only)")
            }
            let requests = rate * Double(monotonicNanoseconds() - start) / 1e9
            let microseconds = Double(processCPUNanoseconds() - cpu) / 1e3 / requests
            let perRequest = String(format: "%.1f", microseconds)
            print("\(only): \(Int(rate)) req/s, \(perRequest) µs of CPU a request (the server's included)")
            // The threads that did most of it, each one's CPU a request: a thread near
            // 1e6 / rate µs is busy the whole run, and sets the pace.
            let threadsAfter = threadCPUNanosecondsByName()
            let byThread = threadsAfter.map {
                ($0.key, Double($0.value - (threadsBefore[$0.key] ?? 0)) / 1e3 / requests)
            }
            .filter { $0.1 >= 1 }.sorted { $0.1 > $1.1 }
            print(
                "  by thread: " + byThread.map { "\($0.0) \(String(format: "%.1f", $0.1)) µs" }.joined(separator: ", ")
                    + String(format: " (%.1f µs a request is a whole thread)", 1e6 / rate))
            return
        }

        let cpus = try CPUPlacement()
        var placements = self.placements
        var skipped: String?
        if placements.contains(.isolated) && !cpus.canIsolate {
            placements.removeAll { $0 == .isolated }
            skipped =
                "the isolated placement is skipped: this process may run on \(cpus.allowed.count) CPU "
                + "(\(cpus.allowed.map(String.init).joined(separator: ","))), and it needs two"
            progress(skipped!)
        }
        let urlSession = URLSession(configuration: .ephemeral)
        var figures: [String: [Double]] = [:]
        for round in 1...rounds {
            progress("round \(round)/\(rounds)")
            for placement in placements {
                let tallies = try await goalLoops(
                    round: round,
                    place: { placement == .isolated ? try cpus.isolate() : try cpus.share() },
                    raw: { duration in
                        try await RawCurlLoop.run(
                            url: meURL, workers: concurrency, duration: duration, expectedBytes: expected)
                    }, stack: stackCall, executor: transport.executor)
                for (index, name) in Self.goalLoopKeys.enumerated() {
                    figures[placement.prefix + name, default: []].append(tallies[index].rate)
                    figures[placement.prefix + name + ".clientMicroseconds", default: []].append(
                        tallies[index].clientMicroseconds)
                }
            }
            try cpus.share()
            figures["curlTransport", default: []].append(try await loop(seconds: seconds, transportCall))
            figures["stackOnly", default: []].append(
                try await loop(seconds: min(seconds, 1), concurrency: 1, cannedCall))
            figures["urlSession", default: []].append(
                try await loop(seconds: seconds) {
                    let (data, _) = try await urlSession.data(from: meURL)
                    guard data.count == expected else { throw BenchmarkError("URLSession got \(data.count) bytes") }
                })
        }

        // A batch of 50 against 50 sequential calls, through the same stack.
        var batchTimes: [Double] = []
        var sequentialTimes: [Double] = []
        let requests = (0..<50).map { _ in GraphRequest(.get, "me", parameters: ["fields": "id"]) }
        for _ in 0..<batches {
            var start = monotonicNanoseconds()
            let results = try await graph.batch(requests)
            guard results.allSatisfy({ (try? $0.get()) != nil }) else { throw BenchmarkError("a batch item failed") }
            batchTimes.append(Double(monotonicNanoseconds() - start) / 1e6)
            start = monotonicNanoseconds()
            for request in requests { _ = try await graph.send(request) }
            sequentialTimes.append(Double(monotonicNanoseconds() - start) / 1e6)
        }

        let median = { (values: [Double]) -> Double in values.sorted()[values.count / 2] }
        let foundation = median(figures["urlSession"]!)
        let curl = median(figures["curlTransport"]!)
        let stackMicroseconds = 1e6 / median(figures["stackOnly"]!)
        let batch = median(batchTimes)
        let sequential = median(sequentialTimes)
        // Each round's stack ÷ raw, measured back to back against the same server: the figure the
        // goal (≥ 0.9×) is about, with its median and spread over the rounds of this run; and the
        // same with the callers on the transport's executor (`CurlTransport.executor`); for each
        // placement of the threads.
        let goal = placements.map { placement in
            let key = placement.prefix
            return (
                placement: placement, raw: median(figures[key + "rawCurl"]!), stack: median(figures[key + "provider"]!),
                onExecutor: median(figures[key + "providerOnExecutor"]!),
                ratios: RoundRatios(figures[key + "provider"]!, over: figures[key + "rawCurl"]!),
                executorRatios: RoundRatios(figures[key + "providerOnExecutor"]!, over: figures[key + "rawCurl"]!),
                // The client's CPU time a call (µs), median over the rounds: raw, pool, executor.
                clientCPU: Self.goalLoopKeys.map {
                    median(figures[key + $0 + ".clientMicroseconds"]!)
                }
            )
        }
        let cpuList = { (cpus: [Int32]) in cpus.map(String.init).joined(separator: ",") }
        if json {
            var report: [String: JSONValue] = [
                "benchmark": .string("graph"),
                "concurrency": .number(Double(concurrency)), "seconds": .number(seconds),
                "rounds": .number(Double(rounds)), "slices": .number(Double(slices)),
                "placements": .array(placements.map { .string($0.rawValue) }),
                "urlSession.rps": .number(foundation.rounded()), "curlTransport.rps": .number(curl.rounded()),
                "batch50.ms": .number((batch * 100).rounded() / 100),
                "providerOnly.microsecondsPerCall": .number((stackMicroseconds * 10).rounded() / 10),
                "sequential50.ms": .number((sequential * 100).rounded() / 100),
                "batch.speedup": .number((sequential / batch * 100).rounded() / 100),
            ]
            if let skipped { report["isolated.skipped"] = .string(skipped) }
            for figure in goal {
                let key = figure.placement.prefix
                report[key + "rawCurl.rps"] = .number(figure.raw.rounded())
                report[key + "provider.rps"] = .number(figure.stack.rounded())
                report[key + "provider.vsRaw"] = RoundRatios.rounded(figure.stack / figure.raw)
                report[key + "provider.vsRaw.perRound"] = .array(figure.ratios.perRound.map(RoundRatios.rounded))
                report[key + "provider.vsRaw.median"] = RoundRatios.rounded(figure.ratios.median)
                report[key + "provider.vsRaw.spread"] = .array(
                    [figure.ratios.spread.0, figure.ratios.spread.1].map(RoundRatios.rounded))
                report[key + "providerOnExecutor.rps"] = .number(figure.onExecutor.rounded())
                report[key + "providerOnExecutor.vsRaw.perRound"] = .array(
                    figure.executorRatios.perRound.map(RoundRatios.rounded))
                report[key + "providerOnExecutor.vsRaw.median"] = RoundRatios.rounded(figure.executorRatios.median)
                report[key + "providerOnExecutor.vsRaw.spread"] = .array(
                    [figure.executorRatios.spread.0, figure.executorRatios.spread.1].map(RoundRatios.rounded))
                for (index, name) in Self.goalLoopKeys.enumerated() {
                    report[key + name + ".clientMicrosecondsPerCall"] = .number(
                        (figure.clientCPU[index] * 10).rounded() / 10)
                }
                if figure.placement == .shared {
                    report["provider.vsURLSession"] = RoundRatios.rounded(figure.stack / foundation)
                } else {
                    report["isolated.serverCPUs"] = .array(cpus.serverCPUs.map { .number(Double($0)) })
                    report["isolated.clientCPUs"] = .array(cpus.clientCPUs.map { .number(Double($0)) })
                }
            }
            print(JSONValue.object(report).jsonText)
        } else {
            print("graph: GET /me?fields=id against the emulator on 127.0.0.1, \(concurrency) concurrent callers,")
            print("       median of \(rounds) rounds of \(seconds) s each (requests per second)")
            if slices > 1 {
                print("       in each round the raw loop and the stack's two loops took \(slices) turns each")
            }
            for figure in goal {
                switch figure.placement {
                case .shared:
                    print("shared: every thread, the emulator's server threads too, on CPUs \(cpuList(cpus.allowed))")
                case .isolated:
                    print(
                        "isolated: the emulator's server threads on CPUs \(cpuList(cpus.serverCPUs)), "
                            + "the client loops on CPUs \(cpuList(cpus.clientCPUs))")
                }
                print("  raw libcurl loop                 \(Int(figure.raw)) req/s")
                let versusURLSession =
                    figure.placement == .shared
                    ? ", \(String(format: "%.1f", figure.stack / foundation))× URLSession" : ""
                print(
                    "  FacebookSession + GraphClient    \(Int(figure.stack)) req/s  "
                        + "(\(String(format: "%.2f", figure.stack / figure.raw))× raw\(versusURLSession))")
                print(figure.ratios.line("  stack ÷ raw per round            ", goal: "; goal ≥ 0.9×"))
                print(
                    "  the same, on transport.executor  \(Int(figure.onExecutor)) req/s  "
                        + "(\(String(format: "%.2f", figure.onExecutor / figure.raw))× raw)")
                print(figure.executorRatios.line("  stack ÷ raw per round, executor  ", goal: "; goal ≥ 0.9×"))
                let cpu = figure.clientCPU
                print(
                    "  the client's CPU a call          "
                        + String(
                            format: "raw %.1f µs, stack %.1f µs (%.2f×), on the executor %.1f µs (%.2f×)", cpu[0],
                            cpu[1], cpu[1] / cpu[0], cpu[2], cpu[2] / cpu[0]))
            }
            if let skipped { print(skipped) }
            print("other clients, shared")
            print("  CurlTransport alone (no session) \(Int(curl)) req/s")
            print("  URLSession                       \(Int(foundation)) req/s")
            print(
                "  the provider stack alone, over canned answers (no network): "
                    + "\(String(format: "%.1f", stackMicroseconds)) µs per call, one caller")
            print("batch: 50 × GET /me, median of \(batches)")
            print("  one batch request                \(String(format: "%.2f", batch)) ms")
            print(
                "  50 sequential calls              \(String(format: "%.2f", sequential)) ms  "
                    + "(batch \(String(format: "%.1f", sequential / batch))× faster)")
        }
    }

    /// One round of the goal's three loops (raw libcurl, the stack on Swift's pool, the stack on
    /// `executor`), each `seconds` in all, in `slices` turns of `seconds / slices`; returns their
    /// tallies in that order: each one's calls, its own seconds and the client's CPU time in
    /// them. Each round and each turn starts with the next loop of the three, so that none always
    /// follows the same one. `place` puts the threads where they belong before each turn of each
    /// loop, so that threads started meanwhile (Swift's pool grows) are placed too.
    private func goalLoops(
        round: Int, place: () throws -> Void, raw: (UInt64) async throws -> TransportBenchmark.Run,
        stack: @escaping @Sendable () async throws -> Void, executor: any TaskExecutor
    ) async throws -> [Tally] {
        let slice = seconds / Double(slices)
        var tallies = [Tally](repeating: Tally(), count: 3)
        for turn in 0..<slices {
            for offset in 0..<3 {
                let which = (round - 1 + turn + offset) % 3
                try place()
                let cpu = CPUPlacement.clientCPUNanoseconds()
                switch which {
                case 0:
                    let run = try await raw(UInt64(slice * 1e9))
                    tallies[0].add(calls: run.latencies.count, nanoseconds: run.elapsed)
                case 1:
                    tallies[1].add(try await timedLoop(seconds: slice, stack))
                default:
                    tallies[2].add(
                        try await withTaskExecutorPreference(executor) {
                            try await timedLoop(seconds: slice, stack)
                        })
                }
                tallies[which].clientCPUNanoseconds += CPUPlacement.clientCPUNanoseconds() - cpu
            }
        }
        return tallies
    }

    /// Runs `body` in `concurrency` loops for `seconds`; returns calls per second.
    private func loop(
        seconds: Double, concurrency: Int? = nil, _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        try await timedLoop(seconds: seconds, concurrency: concurrency, body).rate
    }

    /// Runs `body` in `concurrency` loops for `seconds`; returns the calls made and the time taken.
    private func timedLoop(
        seconds: Double, concurrency: Int? = nil, _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Tally {
        let concurrency = concurrency ?? self.concurrency
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let count = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var calls = 0
                    while monotonicNanoseconds() < deadline {
                        try await body()
                        calls += 1
                    }
                    return calls
                }
            }
            return try await group.reduce(0, +)
        }
        return Tally(calls: count, nanoseconds: monotonicNanoseconds() - start)
    }

    private func progress(_ line: String) {
        StandardStreams.err(Data("graph: \(line)\n".utf8))
    }
}

/// The calls one loop made and the time it took, over one or more turns.
private struct Tally {
    var calls = 0
    var nanoseconds: UInt64 = 0
    /// The CPU time the client's threads spent (see ``CPUPlacement/clientCPUNanoseconds()``).
    var clientCPUNanoseconds: UInt64 = 0

    /// The client's CPU time a call, in microseconds.
    var clientMicroseconds: Double { Double(clientCPUNanoseconds) / 1e3 / Double(max(1, calls)) }

    /// Calls per second.
    var rate: Double { Double(calls) / (Double(nanoseconds) / 1e9) }

    mutating func add(calls: Int, nanoseconds: UInt64) {
        self.calls += calls
        self.nanoseconds += nanoseconds
    }

    mutating func add(_ other: Tally) { add(calls: other.calls, nanoseconds: other.nanoseconds) }
}

/// Each round's ratio of one loop's rate to another's (measured back to back), with their
/// median and spread.
private struct RoundRatios {
    let perRound: [Double]

    init(_ rates: [Double], over baseline: [Double]) { perRound = zip(rates, baseline).map { $0 / $1 } }

    var median: Double { perRound.sorted()[perRound.count / 2] }
    var spread: (Double, Double) { (perRound.min() ?? .nan, perRound.max() ?? .nan) }

    /// `label`, each round's ratio, then the median and spread (and `goal`, if any).
    func line(_ label: String, goal: String = "") -> String {
        label + perRound.map { String(format: "%.2f", $0) }.joined(separator: ", ")
            + String(format: "  (median %.2f×, spread %.2f–%.2f×", median, spread.0, spread.1) + goal + ")"
    }

    static func rounded(_ value: Double) -> JSONValue { .number((value * 100).rounded() / 100) }
}

/// Hands back one response to every request, at once.
private struct CannedTransport: HTTPTransport {
    let response: HTTPResponse

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { response }
}

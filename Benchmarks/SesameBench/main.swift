import Foundation
import Sesame

// sesame-bench: side-by-side measurements that print figures. Never run by the tests.
//
//   swift run -c release sesame-bench <benchmark> [--json]
//
// Each benchmark lives in its own file and registers itself in `benchmarks` below.

/// One benchmark: a name, a line of help, and the code that runs it with the remaining arguments.
struct Benchmark: Sendable {
    let name: String
    let summary: String
    let run: @Sendable ([String]) async throws -> Void
}

let benchmarks: [Benchmark] = [
    // Registered by the files beside this one, one line each.
    httpServerBenchmark,
    TransportBenchmark.benchmark,
    emulatorBenchmark,
    taxonomyBenchmark,
    graphBenchmark,
    KeyringBenchmark.benchmark,
    githubBenchmark,
    jsonBenchmark,
    slowClientsBenchmark,
    tokenTableBenchmark,
    CLIBenchmark.benchmark,
    HelpersBenchmark.benchmark,
    fleetBudgetBenchmark,
    PassBenchmark.benchmark,
    FleetBenchmark.benchmark,
]

func usage() -> String {
    var text = "usage: sesame-bench <benchmark> [--json]\n\nbenchmarks:\n"
    for benchmark in benchmarks {
        text += "  \(benchmark.name.padding(toLength: 14, withPad: " ", startingAt: 0))\(benchmark.summary)\n"
    }
    if benchmarks.isEmpty { text += "  (none yet)\n" }
    return text
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, name != "--help", name != "-h" else {
    StandardStreams.out(Data(usage().utf8))
    exit(arguments.isEmpty ? 64 : 0)
}
guard let benchmark = benchmarks.first(where: { $0.name == name }) else {
    StandardStreams.err(Data("sesame-bench: no benchmark named '\(name)'.\n\(usage())".utf8))
    exit(64)
}
do {
    try await benchmark.run(Array(arguments.dropFirst()))
} catch {
    StandardStreams.err(Data("sesame-bench \(name): \(error)\n".utf8))
    exit(1)
}

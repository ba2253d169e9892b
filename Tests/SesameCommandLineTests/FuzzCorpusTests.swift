import Foundation
import SesameTestSupport
import Testing

private let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appending(path: "Fuzz/Corpus")

/// The committed seed corpora (Fuzz/Corpus/<target>/), replayed through the ordinary build of
/// `sesame-fuzz`, without libFuzzer: every seed, including each input that once crashed a
/// target, must still go through its target. scripts/fuzz does the fuzzing itself.
@Suite("The fuzz targets' seed corpora")
struct FuzzCorpusTests {
    init() { TestProviders.bootstrap() }

    static let targets: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: corpusRoot.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted()
    }()

    @Test("every fuzz target has a seed corpus, and every corpus a target")
    func corpusPerTarget() async throws {
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable("sesame-fuzz"), ["--list"], killAfter: .seconds(60))
        #expect(result.status == 0, "\(result.standardError)")
        // "  <name>  <summary>" under "targets:".
        let listed = result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("  ") }.compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
        #expect(listed.count >= 9)
        #expect(listed.sorted() == Self.targets)
    }

    @Test("each seed goes through its target without a crash", arguments: targets)
    func replay(target: String) async throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: corpusRoot.appending(path: target).path)
        #expect(files.count >= 10, "a dozen seeds a target")
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable("sesame-fuzz"), [target, corpusRoot.appending(path: target).path],
            environment: ["SWIFT_BACKTRACE": "enable=no"], killAfter: .seconds(120))
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("\(target) ran \(files.count) input(s)"), "\(result.standardOutput)")
    }
}

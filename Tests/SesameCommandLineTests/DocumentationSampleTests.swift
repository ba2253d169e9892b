import Foundation
import SesameTestSupport
import Testing

/// A ```swift block of the documentation, as a file `swiftc` can type-check.
private struct Sample: CustomStringConvertible {
    var file: String
    var index: Int
    var source: String
    var description: String { "\(file) sample \(index)" }
}

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// The ```swift blocks of `file`, in order; a block with no `import` line takes the imports of
/// the block before it (the README's second sample continues its first).
private func samples(in file: String) throws -> [Sample] {
    let text = try String(contentsOf: packageRoot.appending(path: file), encoding: .utf8)
    var blocks: [[String]] = []
    var current: [String]?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
        if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
            current = []
        } else if let block = current, line.trimmingCharacters(in: .whitespaces) == "```" {
            blocks.append(block)
            current = nil
        } else {
            current?.append(line)
        }
    }
    var imports: [String] = []
    return blocks.enumerated().map { index, lines in
        let own = lines.filter { $0.hasPrefix("import ") }
        if !own.isEmpty { imports = own }
        let source = (own.isEmpty ? imports : []) + lines
        return Sample(file: file, index: index + 1, source: source.joined(separator: "\n"))
    }
}

/// The samples written as whole programs: every README sample, and the core's DocC overview's
/// first. (The other DocC samples are fragments that use values they do not declare.)
private func wholeProgramSamples() throws -> [Sample] {
    try samples(in: "README.md") + [samples(in: "Sources/Sesame/Sesame.docc/Sesame.md")[0]]
}

@Suite("Documentation samples")
struct DocumentationSampleTests {
    init() { TestProviders.bootstrap() }

    @Test("the README's and the core DocC overview's samples compile against the current API")
    func samplesCompile() async throws {
        let all = try wholeProgramSamples()
        #expect(all.count >= 4, "the README lost its samples: \(all)")
        let build = try ProcessRunner.builtExecutable("sesame").deletingLastPathComponent()
        var moduleMaps = try FileManager.default.contentsOfDirectory(
            atPath: packageRoot.appending(path: "Sources").path
        )
        .filter { $0.hasPrefix("C") }
        .map { packageRoot.appending(path: "Sources/\($0)/module.modulemap").path }
        .filter { FileManager.default.fileExists(atPath: $0) }
        // The C targets with sources of their own get their module maps from SwiftPM, in the build folder.
        for target in ["CSesameSystem", "CLibSecretShim"] {
            moduleMaps.append(build.appending(path: "\(target).build/module.modulemap").path)
        }
        let pkgConfig = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/env"), ["pkg-config", "--cflags-only-I", "libsecret-1"])
        try #require(
            pkgConfig.status == 0, "pkg-config found no libsecret-1 (scripts/bootstrap installs it): \(pkgConfig)")
        let includes = pkgConfig.standardOutput.split(separator: " ").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        .filter { !$0.isEmpty }
        let scratch = FileManager.default.temporaryDirectory.appending(path: "sesame-samples-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        for (number, sample) in all.enumerated() {
            let file = scratch.appending(path: "sample\(number).swift")
            try sample.source.write(to: file, atomically: true, encoding: .utf8)
            var arguments = [
                "swiftc", "-typecheck", "-swift-version", "6", "-I", build.appending(path: "Modules").path,
            ]
            for map in moduleMaps { arguments += ["-Xcc", "-fmodule-map-file=\(map)"] }
            for include in includes { arguments += ["-Xcc", include] }
            arguments.append(file.path)
            var environment = ProcessInfo.processInfo.environment
            environment["LANG"] = "C.UTF-8"
            let result = try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/env"), arguments, environment: environment, killAfter: .seconds(300))
            #expect(result.status == 0, "\(sample) does not compile:\n\(sample.source)\n\(result.standardError)")
        }
    }
}

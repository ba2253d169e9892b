// sesame-error-table-gen: turns a provider's error table (JSON) into Swift. Run by the
// ErrorTableGeneratorPlugin at build time; see Generator.usage.

import Foundation
import SesameErrorTableGen

// `write(contentsOf:)` throws where `write(_:)` would trap (EPIPE from a reader that went away).
func fail(_ message: String, code: Int32) -> Never {
    try? FileHandle.standardError.write(contentsOf: Data(message.utf8))
    exit(code)
}

let invocation: Generator.Invocation
switch Generator.parse(Array(CommandLine.arguments.dropFirst())) {
case .success(let parsed): invocation = parsed
case .failure(let failure): fail("sesame-error-table-gen: \(failure.message)\n\n\(Generator.usage)", code: 64)
}

let input: String
switch invocation {
case .help:
    try? FileHandle.standardOutput.write(contentsOf: Data(Generator.usage.utf8))
    exit(0)
case .check(let path): input = path
case .generate(let path, _, _): input = path
}

// Bytes rather than `Data`: a `Data` held in a global until exit looks leaked to LeakSanitizer,
// which cannot follow the pointer inside it (a Swift enum keeps its case in the pointer's spare bits).
guard let table = FileManager.default.contents(atPath: input).map(Array.init) else {
    fail("sesame-error-table-gen: cannot read the error table '\(input)'; check the path.\n", code: 66)
}

let source: String
do {
    switch invocation {
    case .generate(_, _, let access): source = try Generator.generate(table, file: input, access: access)
    default: source = try Generator.generate(table, file: input)
    }
} catch {
    let count = error.diagnostics.count
    fail(
        "\(error.description)\nsesame-error-table-gen: \(input) has \(count) problem\(count == 1 ? "" : "s"); "
            + "no Swift was generated.\n", code: 65)
}

if case .generate(_, let output, _) = invocation {
    let bytes = Data(source.utf8)
    if FileManager.default.contents(atPath: output) != bytes {
        do {
            try bytes.write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            fail("sesame-error-table-gen: cannot write '\(output)': \(error.localizedDescription)\n", code: 73)
        }
    }
}

// sesame-fuzz: Sesame's fuzz targets in one program, selected by name.
//
//   sesame-fuzz <target> [libFuzzer arguments and corpus directories]
//   sesame-fuzz --list
//
// Built with libFuzzer and AddressSanitizer (scripts/fuzz), it hands the process to
// libFuzzer's driver; in an ordinary build it runs each file named (or each file of each
// directory named) through the target once, which replays a corpus or a crash input.
import CSesameFuzz
import Foundation
import SesameDesktop
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin
import SesameGitHubEmulatorDesktop
import SesameGitHubPlugin
import SesameOIDCEmulatorDesktop
import SesameOIDCPlugin
import SesamePassDesktop
import SesamePostgresDesktop

// The providers `sesame` lists, for the targets that run its command line and config file.
Desktop.bootstrap(
    [FacebookPlugin(), OIDCPlugin(), GitHubPlugin()],
    storage: [PassStorage(), PostgresStorage()],
    emulators: [FacebookEmulatorPlugin(), OIDCEmulatorPlugin(), GitHubEmulatorPlugin()])

let arguments = CommandLine.arguments
if arguments.count < 2 || arguments[1] == "--list" || arguments[1] == "--help" {
    let list = FuzzTarget.all.map { "  \($0.name.padding(toLength: 16, withPad: " ", startingAt: 0)) \($0.summary)" }
    print("usage: sesame-fuzz <target> [libFuzzer arguments] [corpus directories]\n\ntargets:")
    print(list.joined(separator: "\n"))
    exit(arguments.count < 2 ? 64 : 0)
}
guard FuzzTarget.named(arguments[1]) != nil else {
    FileHandle.standardError.write(Data("sesame-fuzz: no target '\(arguments[1])'; see sesame-fuzz --list\n".utf8))
    exit(64)
}
// libFuzzer re-runs the program for some modes (-fork, -jobs, -merge) with the arguments it
// was given, so the choice travels in the environment, which those runs inherit.
setenv(FuzzTarget.environmentVariable, arguments[1], 1)

// libFuzzer gets the program name and everything after the target's name.
var driverArguments = ([arguments[0]] + arguments.dropFirst(2)).map { strdup($0) }
driverArguments.append(nil)
var argc = CInt(driverArguments.count - 1)
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = driverArguments.withUnsafeMutableBufferPointer {
    let copy = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: $0.count)
    copy.initialize(from: $0.baseAddress!, count: $0.count)
    return copy
}
let status = sesame_fuzz_run_driver(&argc, &argv) { data, size in
    FuzzTarget.selected.run(data.map { Data(bytes: $0, count: size) } ?? Data())
    return 0
}
if status >= 0 { exit(status) }

// No libFuzzer: replay the files given.
var count = 0
for path in arguments.dropFirst(2) where !path.hasPrefix("-") {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        FileHandle.standardError.write(Data("sesame-fuzz: no file or directory '\(path)'\n".utf8))
        exit(66)
    }
    let files =
        isDirectory.boolValue
        ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
        : [path]
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { continue }
        FuzzTarget.selected.run(data)
        count += 1
    }
}
print("sesame-fuzz: \(arguments[1]) ran \(count) input(s) without libFuzzer; none crashed.")

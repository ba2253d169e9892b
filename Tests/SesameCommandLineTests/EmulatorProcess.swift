import Foundation
import Sesame
import SesameTestSupport
import Testing

/// Runs `sesame emulator <arguments>` as a process and hands `body` its banner (what it printed
/// up to "Press Ctrl-C to stop."). Then, whether `body` returned or threw, stops it with SIGTERM,
/// awaits its exit, and expects a clean one that says so.
func withEmulatorProcess<T>(
    _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation, _ body: (String) async throws -> T
) async throws -> T {
    try await withEmulatorChild(arguments, sourceLocation: sourceLocation) { banner, _ in try await body(banner) }
}

/// ``withEmulatorProcess(_:sourceLocation:_:)`` that also hands `body` the process, for a test
/// that stops it (SIGSTOP) to hold every request; it is sent SIGCONT before it is stopped.
func withEmulatorChild<T>(
    _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (String, ChildProcess) async throws -> T
) async throws -> T {
    let output = Pipe()
    let error = Pipe()
    let process = ChildProcess(
        executableURL: try ProcessRunner.builtExecutable("sesame"), arguments: ["emulator"] + arguments,
        environment: TestChildren.environment(), standardOutput: .pipe(output), standardError: .pipe(error),
        diesWithParent: true)
    try await process.start()
    let result: Result<T, any Error>
    do {
        result = .success(
            try await body(await readUntil(output.fileHandleForReading, contains: "Press Ctrl-C to stop."), process))
    } catch {
        result = .failure(error)
    }
    process.terminate(signal: SIGCONT)  // a stopped emulator handles no SIGTERM
    process.terminate()  // SIGTERM
    async let restRead = readToEnd(output.fileHandleForReading)
    async let errorsRead = readToEnd(error.fileHandleForReading)
    let (rest, errors) = await (restRead, errorsRead)
    _ = await process.exitStatus()
    #expect(
        process.terminationStatus == 0, "\(String(decoding: errors, as: UTF8.self))", sourceLocation: sourceLocation)
    #expect(
        String(decoding: rest, as: UTF8.self).contains("Stopped (SIGTERM)."), sourceLocation: sourceLocation)
    return try result.get()
}

/// The URL an emulator's banner starts with (its first line's last word), on 127.0.0.1.
func bannerBaseURL(_ banner: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
    let base = try #require(
        banner.split(separator: "\n").first?.split(separator: " ").last.flatMap { URL(string: String($0)) },
        sourceLocation: sourceLocation)
    #expect(base.host == "127.0.0.1", sourceLocation: sourceLocation)
    return base
}

import Dispatch
import Foundation
import Sesame

/// One fuzz target: a name, what it feeds, and the function that takes one input.
///
/// A target must not crash, hang or leak on any input; a check that finds a broken promise
/// (a secret in a description, a parse that does not read back) traps with `preconditionFailure`,
/// which libFuzzer reports as a crash.
struct FuzzTarget: Sendable {
    var name: String
    var summary: String
    var run: @Sendable (Data) -> Void

    /// The environment variable that names the selected target for libFuzzer's child runs.
    static let environmentVariable = "SESAME_FUZZ_TARGET"

    /// Every target, in the order `scripts/fuzz` runs them.
    static let all: [FuzzTarget] = [
        JSONFuzz.target, GraphErrorFuzz.target, OAuthErrorFuzz.target, HTTPServerFuzz.target, RedirectFuzz.target,
        JWTFuzz.target, ConfigFileFuzz.target, CommandLineFuzz.target, GitCredentialFuzz.target,
    ]

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }

    /// The target named by ``environmentVariable``.
    static let selected: FuzzTarget = {
        guard let name = ProcessInfo.processInfo.environment[environmentVariable], let target = named(name) else {
            preconditionFailure("\(environmentVariable) names no fuzz target")
        }
        return target
    }()
}

/// Runs `body` to completion from synchronous code (libFuzzer's callback), on the cooperative pool,
/// and returns once the task has let go of everything it held.
///
/// libFuzzer checks each input for leaks as soon as the callback returns. A task that has signalled
/// its result is still finishing on its thread for a moment, holding its closure and the result,
/// and LeakSanitizer once reported that result (a redirect page) as leaked in CI. So the result is
/// moved out, and the callback waits (at most a second) until the task's closure is freed.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    var box: BlockingResult<T>? = BlockingResult()
    weak let held = box
    Task.detached { [box] in
        let value = await body()
        box?.result.withLock { $0 = value }
        box?.done.signal()
    }
    box!.done.wait()
    let value = box!.result.withLock { result in
        defer { result = nil }
        return result!
    }
    box = nil
    let deadline = ContinuousClock.now + .seconds(1)
    while held != nil, ContinuousClock.now < deadline { usleep(100) }
    return value
}

/// Where ``runBlocking(_:)``'s task leaves its result.
private final class BlockingResult<T: Sendable>: Sendable {
    let result = Locked<T?>(nil)
    let done = DispatchSemaphore(value: 0)
}

/// An input read as an HTTP answer, the way the error-classification targets take it:
///
///     <status>
///     <Name>: <value>
///     ...
///
///     <body>
///
/// The head ends at the first blank line; a status that is not a number is 400.
struct ResponseInput {
    var status: Int
    var headers: [(String, String)]
    var body: Data

    init(_ data: Data) {
        let bytes = [UInt8](data)
        var split = bytes.count
        var bodyStart = bytes.count
        if bytes.count >= 2 {
            for index in 0..<(bytes.count - 1) where bytes[index] == 0x0A && bytes[index + 1] == 0x0A {
                split = index
                bodyStart = index + 2
                break
            }
        }
        let head = String(decoding: bytes[..<split], as: UTF8.self)
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false)
        let first = lines.isEmpty ? "" : lines.removeFirst()
        status = Int(first.trimmingCharacters(in: .whitespaces)) ?? 400
        headers = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            )
        }
        body = Data(bytes[bodyStart...])
    }
}

/// Traps with `message` unless `condition` holds: a broken promise, reported by libFuzzer as a crash.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { preconditionFailure(message()) }
}

/// Numbers read from an input's bytes as they are in memory, 8 bytes each (zero past the end), so
/// that values at the ends of their types' ranges come up at once, where mutating the digits of
/// a number written in text seldom reaches them.
struct RawNumbers {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ data: Data) { bytes = [UInt8](data.prefix(64)) }

    mutating func int() -> Int {
        var value: UInt64 = 0
        for index in offset..<(offset + 8) {
            value = value << 8 | UInt64(index < bytes.count ? bytes[index] : 0)
        }
        offset += 8
        return Int(truncatingIfNeeded: value)
    }

    mutating func double() -> Double { Double(bitPattern: UInt64(truncatingIfNeeded: int())) }
}

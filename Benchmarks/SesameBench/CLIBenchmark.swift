import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameFacebookEmulator
import SesameKeyring

// sesame-bench cli: the command line's hot path as whole processes, beside `secret-tool lookup`
// of the same keyring item, in one run:
//
// - `sesame token facebook`: one stored Facebook login of the built-in emulator's app (no app id
//   configured), valid for 60 days, so nothing but the keyring is needed; the accounts file
//   records it as the active one, as `sesame login` does;
// - `sesame status`, one account, no network: the same login with its app id configured and the
//   Graph API at a loopback port where nothing listens, so the check fails at once;
// - `sesame status` against the built-in emulator, which starts in-process and is asked once
//   (for information: that is a network call).
//
// Run it in a throw-away keyring, against sesame as scripts/install builds it (the Swift runtime
// and Foundation linked statically); the bench stores one item and removes it at the end:
//
//   scripts/install --prefix /tmp/sesame-bench
//   swift build -c release --product sesame-bench
//   scripts/with-keyring .build/release/sesame-bench cli --sesame /tmp/sesame-bench/bin/sesame [--json] [--runs N]
//       [--baseline /tmp/sesame-before/bin/sesame]
//
// With --baseline, another build's `token` and offline `status` run in the same rounds, each
// command in turn, so that two builds are compared in the same minutes.

struct CLIBenchmark {
    static let benchmark = Benchmark(
        name: "cli",
        summary: "sesame token / status as whole processes beside secret-tool lookup (scripts/with-keyring)"
    ) { arguments in
        try await CLIBenchmark(arguments: arguments).run()
    }

    typealias Failure = KeyringBenchmark.Failure
    typealias Series = KeyringBenchmark.Series

    struct Row: Encodable {
        var command: String
        var series: Series
        var p90: Double
        /// This row's median over `secret-tool lookup`'s, when it is a Sesame command.
        var ratio: Double?
        /// The ratio the issue asks for, when there is one.
        var goal: Double?
        /// The median CPU time (user and system) of the process, in milliseconds: what the
        /// command costs, which a machine busy with other work does not inflate as it does the
        /// elapsed time.
        var cpuP50: Double
        /// ``cpuP50`` over `secret-tool lookup`'s.
        var cpuRatio: Double?
    }

    struct Report: Encodable {
        var benchmark = "cli"
        var runs: Int
        var sesame: String
        var baseline: String?
        var rows: [Row]
    }

    let json: Bool
    let runs: Int
    let sesame: String
    /// Another build whose rows run beside this one's, in the same rounds.
    let baseline: String?

    init(arguments: [String]) throws {
        var json = false
        var runs = 40
        var sesame: String?
        var baseline: String?
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--json": json = true
            case "--runs":
                guard let value = rest.popFirst().flatMap(Int.init), value > 0 else {
                    throw Failure(description: "--runs needs a positive number")
                }
                runs = value
            case "--sesame":
                guard let value = rest.popFirst() else { throw Failure(description: "--sesame needs a path") }
                sesame = value
            case "--baseline":
                guard let value = rest.popFirst() else { throw Failure(description: "--baseline needs a path") }
                baseline = value
            default:
                throw Failure(
                    description: "unknown argument '\(argument)'; usage: sesame-bench cli [--json] [--runs N] "
                        + "[--sesame PATH] [--baseline PATH]")
            }
        }
        self.json = json
        self.runs = runs
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("sesame").path
        self.sesame = sesame ?? beside
        self.baseline = baseline
        guard FileManager.default.isExecutableFile(atPath: self.sesame) else {
            throw Failure(
                description: "no sesame executable at \(self.sesame); install one with 'scripts/install --prefix "
                    + "/tmp/sesame-bench' and give --sesame /tmp/sesame-bench/bin/sesame")
        }
        if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
            throw Failure(description: "no sesame executable at \(baseline) (--baseline)")
        }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let bus = environment["DBUS_SESSION_BUS_ADDRESS"], !bus.isEmpty else {
            throw Failure(description: "no D-Bus session; run it in a throw-away keyring: scripts/with-keyring ...")
        }
        let secretTool = try KeyringBenchmark.findSecretTool()
        let appID = EmulatedApp.sesameDefault.id
        // The default account, so that the commands are the plain ones: `sesame token facebook`.
        let account = "default"
        let key = CredentialKey(provider: ProviderID("facebook"), appID: appID, account: account)
        let tokenString = "EAAB" + String(repeating: "x", count: 200)
        var token = AccessToken(
            tokenString: tokenString, provider: key.provider, appID: appID, userID: "100000000000001",
            permissions: PermissionSet(granted: ["public_profile", "email"], declined: []),
            expirationDate: Date(timeIntervalSinceNow: 60 * 86400))
        token.dataAccessExpirationDate = Date(timeIntervalSinceNow: 90 * 86400)
        let store = SecretServiceStore(unlocking: .never)
        if !(try await store.list(provider: key.provider)).isEmpty {
            throw Failure(
                description: "this keyring already holds Facebook logins; run the bench in a throw-away keyring "
                    + "(scripts/with-keyring), where its one login is the only one")
        }
        try await store.save(StoredCredential(key: key, token: token))

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-bench-cli-\(getpid())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        var base = [
            "PATH": environment["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8", "DBUS_SESSION_BUS_ADDRESS": bus,
            "HOME": scratch.path, "XDG_STATE_HOME": scratch.appendingPathComponent("state").path,
            "XDG_CONFIG_HOME": scratch.appendingPathComponent("config").path, "NO_COLOR": "1",
        ]
        if let runtime = environment["XDG_RUNTIME_DIR"] { base["XDG_RUNTIME_DIR"] = runtime }
        // As `sesame login` leaves it: the login is the provider's and its app's active account.
        try await AccountState(environment: base).setActiveAccount(account, for: key.provider, appID: appID)
        var offline = base
        offline["SESAME_FACEBOOK_APP_ID"] = appID
        offline["SESAME_FACEBOOK_GRAPH_URL"] = "http://127.0.0.1:\(try Self.closedPort())"

        struct Case {
            var command: String
            var executable: String
            var arguments: [String]
            var environment: [String: String]
            /// `nil`: whatever the first run returns, as long as it reports the login.
            var expectedStatus: Int32?
            var goal: Double?
        }
        var cases = [
            Case(
                command: "secret-tool lookup (the same item)", executable: secretTool,
                arguments: ["lookup", "provider", "facebook", "app_id", appID, "account", account],
                environment: base, expectedStatus: 0),
            Case(
                command: "sesame token facebook", executable: sesame,
                arguments: ["token", "facebook"], environment: base, expectedStatus: 0,
                goal: 1.5),
            Case(
                command: "sesame status, one account, no network", executable: sesame, arguments: ["status"],
                environment: offline, expectedStatus: nil, goal: 2),
            Case(
                command: "sesame status, built-in emulator (one GET /me)", executable: sesame, arguments: ["status"],
                environment: base, expectedStatus: nil),
        ]
        if let baseline {
            cases += [
                Case(
                    command: "baseline: sesame token facebook", executable: baseline,
                    arguments: ["token", "facebook"], environment: base, expectedStatus: 0),
                Case(
                    command: "baseline: sesame status, no network", executable: baseline, arguments: ["status"],
                    environment: offline, expectedStatus: nil),
            ]
        }

        // Each output checked once: the figures are of commands that did their job.
        let lookup = try Self.runProcess(cases[0].executable, cases[0].arguments, environment: base)
        // The secret is the credential's JSON in base64 (keyring schema 2).
        let secret = String(decoding: lookup.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let decoded = Data(base64Encoded: secret).map { String(decoding: $0, as: UTF8.self) } ?? secret
        guard lookup.status == 0, decoded.contains(tokenString) else {
            throw Failure(description: "secret-tool lookup did not print the stored login")
        }
        var expected = cases.map(\.expectedStatus)
        for index in cases.indices.dropFirst() {
            let check = cases[index]
            let result = try Self.runProcess(check.executable, check.arguments, environment: check.environment)
            let text = String(decoding: result.output, as: UTF8.self)
            if check.arguments == ["token", "facebook"] {
                guard result.status == 0, text == tokenString + "\n" else {
                    throw Failure(description: "\(check.command) exited \(result.status) without printing the token")
                }
                continue
            }
            guard text.contains("default"), !text.contains(tokenString) else {
                throw Failure(description: "\(check.command) did not report the stored login: \(text)")
            }
            expected[index] = result.status
            progress("\(check.command) exits \(result.status): \(text.split(separator: "\n").dropFirst().first ?? "")")
        }

        progress("\(runs) runs of each, interleaved, after 3 to warm up")
        var samples = [[Double]](repeating: [], count: cases.count)
        var cpuSamples = [[Double]](repeating: [], count: cases.count)
        for round in -3..<runs {
            for (index, item) in cases.enumerated() {
                let cpuBefore = Self.childrenCPUMilliseconds()
                let start = ContinuousClock.now
                let result = try Self.runProcess(item.executable, item.arguments, environment: item.environment)
                let elapsed = Self.milliseconds(ContinuousClock.now - start)
                let cpu = Self.childrenCPUMilliseconds() - cpuBefore
                guard result.status == expected[index] else {
                    throw Failure(description: "\(item.command) exited \(result.status) in round \(round)")
                }
                if round >= 0 {
                    samples[index].append(elapsed)
                    cpuSamples[index].append(cpu)
                }
            }
        }
        try await store.delete(key)

        let lookupMedian = Series(name: cases[0].command, milliseconds: samples[0]).p50
        let lookupCPU = Series.percentile(cpuSamples[0].sorted(), 0.5)
        let rows = zip(cases, samples).enumerated().map { index, pair in
            let (item, milliseconds) = pair
            let series = Series(name: item.command, milliseconds: milliseconds)
            let cpu = Series.percentile(cpuSamples[index].sorted(), 0.5)
            return Row(
                command: item.command, series: series,
                p90: Series.percentile(milliseconds.sorted(), 0.9),
                ratio: index == 0 ? nil : series.p50 / lookupMedian, goal: item.goal, cpuP50: cpu,
                cpuRatio: index == 0 ? nil : cpu / lookupCPU)
        }
        let report = Report(runs: runs, sesame: sesame, baseline: baseline, rows: rows)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            StandardStreams.out(try encoder.encode(report) + Data("\n".utf8))
        } else {
            StandardStreams.out(Data(Self.table(report).utf8))
        }
    }

    static func table(_ report: Report) -> String {
        var text = "cli: whole processes, \(report.runs) runs each, interleaved (\(report.sesame))\n"
        if let baseline = report.baseline { text += "baseline: \(baseline)\n" }
        text += "\n"
        text += "command                                              p50 ms   p90 ms   ÷ lookup"
        text += "   cpu ms  cpu ÷ lookup   goal (elapsed)\n"
        for row in report.rows {
            let name = row.command.padding(toLength: 50, withPad: " ", startingAt: 0)
            let ratio = row.ratio.map { String(format: "%8.2f×", $0) } ?? "         "
            let cpuRatio = row.cpuRatio.map { String(format: "%12.2f×", $0) } ?? "             "
            let goal = row.goal.map { String(format: "  ≤ %.1f× %@", $0, (row.ratio ?? 0) <= $0 ? "met" : "NOT met") }
            text += "\(name) \(String(format: "%8.2f %8.2f", row.series.p50, row.p90)) \(ratio)"
            text += " \(String(format: "%8.2f", row.cpuP50)) \(cpuRatio)\(goal ?? "")\n"
        }
        return text
    }

    /// The CPU time (user and system) of every child process reaped so far, in milliseconds.
    static func childrenCPUMilliseconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func milliseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1e3 + Double(time.tv_usec) / 1e3 }
        return milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime)
    }

    /// A loopback port where nothing listens: bound, read, and closed again.
    static func closedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "could not bind a loopback port") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Runs a process to completion with exactly `environment` and `input` on its standard input;
    /// its exit status and standard output.
    static func runProcess(
        _ executable: String, _ arguments: [String], environment: [String: String], input: Data? = nil
    ) throws -> (status: Int32, output: Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let stdout = Pipe()
        let stdin = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        if let input {
            // A server URL or a small JSON object: far below a pipe's buffer, so written at once.
            try? stdin.fileHandleForWriting.write(contentsOf: input)
            try? stdin.fileHandleForWriting.close()
        }
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    func progress(_ message: String) {
        StandardStreams.err(Data("sesame-bench cli: \(message)\n".utf8))
    }
}

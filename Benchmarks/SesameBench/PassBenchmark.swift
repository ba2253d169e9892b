import Foundation
import Sesame
import SesameDesktop
import SesameFacebookEmulator
import SesamePass

// sesame-bench pass: `sesame token facebook` with the password store (`--storage pass`) beside
// `pass show` of the same entry, whole processes, interleaved, in one run. A throw-away GnuPG
// home under /tmp with a key of its own (no passphrase: what a person's agent does once it has
// cached theirs) and a password store initialised for it; one stored login of the built-in
// emulator's app, valid for 60 days, so nothing but the store is needed. The agent is stopped
// and everything removed at the end.
//
//   scripts/install --prefix /tmp/sesame-bench
//   swift build -c release --product sesame-bench
//   .build/release/sesame-bench pass --sesame /tmp/sesame-bench/bin/sesame [--runs N] [--json]

struct PassBenchmark {
    static let benchmark = Benchmark(
        name: "pass",
        summary: "sesame token with --storage pass beside `pass show` of the same entry, as whole processes"
    ) { arguments in
        try await PassBenchmark(arguments: arguments).run()
    }

    typealias Failure = KeyringBenchmark.Failure
    typealias Series = KeyringBenchmark.Series

    struct Report: Encodable {
        var benchmark = "pass"
        var runs: Int
        var passShow: Series
        var sesameToken: Series
        /// `pass show`'s median over `sesame token`'s: above 1 when Sesame is faster.
        var speedup: Double
        var passShowCPU: Double
        var sesameTokenCPU: Double
    }

    let options: CLIBenchmark

    init(arguments: [String]) throws {
        guard !arguments.contains("--baseline") else { throw Failure(description: "pass takes no --baseline") }
        options = try CLIBenchmark(arguments: arguments)
    }

    func run() async throws {
        var template = Array("/tmp/sb-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure(description: "could not make a directory under /tmp")
        }
        let root = URL(fileURLWithPath: template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        let home = root.appendingPathComponent("g")
        let store = root.appendingPathComponent("s")
        try FileManager.default.createDirectory(
            at: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let environment = [
            "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": root.path, "GNUPGHOME": home.path,
            "PASSWORD_STORE_DIR": store.path, "XDG_STATE_HOME": root.appendingPathComponent("state").path,
            "XDG_CONFIG_HOME": root.appendingPathComponent("config").path, "NO_COLOR": "1", "SESAME_STORAGE": "pass",
        ]
        defer {
            _ = try? CLIBenchmark.runProcess("/usr/bin/gpgconf", ["--kill", "gpg-agent"], environment: environment)
            try? FileManager.default.removeItem(at: root)
        }
        func must(_ program: String, _ arguments: [String]) throws {
            let result = try CLIBenchmark.runProcess(program, arguments, environment: environment)
            guard result.status == 0 else {
                throw Failure(description: "\(program) \(arguments.joined(separator: " ")) exited \(result.status)")
            }
        }
        progress("making a GnuPG key and a password store in \(root.path)")
        try must(
            "/usr/bin/gpg",
            [
                "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                "Sesame Bench <bench@example.invalid>", "future-default", "default", "never",
            ])
        try must("/usr/bin/pass", ["init", "bench@example.invalid"])

        let appID = EmulatedApp.sesameDefault.id
        let key = CredentialKey(provider: ProviderID("facebook"), appID: appID, account: "default")
        let tokenString = "EAAB" + String(repeating: "x", count: 200)
        let token = AccessToken(
            tokenString: tokenString, provider: key.provider, appID: appID, userID: "100000000000001",
            permissions: PermissionSet(granted: ["public_profile", "email"], declined: []),
            expirationDate: Date(timeIntervalSinceNow: 60 * 86400))
        let passStore = PassCredentialStore(directory: store, gnupgHome: home.path)
        try await passStore.save(StoredCredential(key: key, token: token))
        try await AccountState(environment: environment).setActiveAccount("default", for: key.provider, appID: appID)
        let entry = passStore.entryName(key)

        let commands: [(name: String, executable: String, arguments: [String])] = [
            ("pass show \(entry)", "/usr/bin/pass", ["show", entry]),
            ("sesame token facebook (--storage pass)", options.sesame, ["token", "facebook"]),
        ]
        for command in commands {
            let result = try CLIBenchmark.runProcess(command.executable, command.arguments, environment: environment)
            let first = String(decoding: result.output, as: UTF8.self).split(separator: "\n").first
            guard result.status == 0, first.map(String.init) == tokenString else {
                throw Failure(description: "\(command.name) exited \(result.status) without printing the token")
            }
        }

        progress("\(options.runs) runs of each, interleaved, after 3 to warm up")
        var samples = [[Double]](repeating: [], count: commands.count)
        var cpu = [[Double]](repeating: [], count: commands.count)
        for round in -3..<options.runs {
            for (index, command) in commands.enumerated() {
                let cpuBefore = CLIBenchmark.childrenCPUMilliseconds()
                let start = ContinuousClock.now
                let result = try CLIBenchmark.runProcess(
                    command.executable, command.arguments, environment: environment)
                let elapsed = CLIBenchmark.milliseconds(ContinuousClock.now - start)
                guard result.status == 0 else {
                    throw Failure(description: "\(command.name) exited \(result.status) in round \(round)")
                }
                if round >= 0 {
                    samples[index].append(elapsed)
                    cpu[index].append(CLIBenchmark.childrenCPUMilliseconds() - cpuBefore)
                }
            }
        }
        let pass = Series(name: commands[0].name, milliseconds: samples[0])
        let sesame = Series(name: commands[1].name, milliseconds: samples[1])
        let report = Report(
            runs: options.runs, passShow: pass, sesameToken: sesame, speedup: pass.p50 / sesame.p50,
            passShowCPU: Series.percentile(cpu[0].sorted(), 0.5),
            sesameTokenCPU: Series.percentile(cpu[1].sorted(), 0.5))
        if options.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            return
        }
        func row(_ series: Series, _ cpu: Double) -> String {
            let name = series.name.padding(toLength: 56, withPad: " ", startingAt: 0)
            return
                "\(name) p50 \(String(format: "%7.2f", series.p50)) ms  p99 \(String(format: "%7.2f", series.p99)) ms  "
                + "CPU p50 \(String(format: "%6.2f", cpu)) ms"
        }
        print(row(pass, report.passShowCPU))
        print(row(sesame, report.sesameTokenCPU))
        let met = report.speedup > 1 ? "met" : "NOT met"
        print(
            "ratio: pass show / sesame token = \(String(format: "%.2f", report.speedup))× (goal: sesame faster, > 1×: \(met))"
        )
    }

    func progress(_ message: String) {
        StandardStreams.err(Data("sesame-bench pass: \(message)\n".utf8))
    }
}

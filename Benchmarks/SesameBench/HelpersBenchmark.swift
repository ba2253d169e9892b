import Foundation
import Sesame
import SesameDesktop
import SesameFacebookEmulator
import SesameKeyring

// sesame-bench helpers: the credential helpers other tools run, as whole processes, beside the
// programs that answer the same question from the same keyring, in one run:
//
// - `docker-credential-sesame get` of a registry the config file maps to a stored login, beside
//   `docker-credential-secretservice get` (Debian's golang-docker-credential-helpers) of an item
//   whose secret is as long as the Sesame login's keyring secret;
// - `sesame kubectl-credential` (an ExecCredential of the same login), beside `secret-tool
//   lookup` of the login's item.
//
// The login is the one `sesame-bench cli` uses (the built-in Facebook emulator's app, valid for
// 60 days: nothing but the keyring is needed). Run it in a throw-away keyring; the bench stores
// its two items and removes them at the end:
//
//   scripts/install --prefix /tmp/sesame-bench
//   swift build -c release --product sesame-bench
//   scripts/with-keyring .build/release/sesame-bench helpers --sesame /tmp/sesame-bench/bin/sesame [--json] [--runs N]

struct HelpersBenchmark {
    static let benchmark = Benchmark(
        name: "helpers",
        summary: "docker-credential-sesame and kubectl-credential beside the keyring's own tools (with-keyring)"
    ) { arguments in
        try await HelpersBenchmark(arguments: arguments).run()
    }

    typealias Failure = KeyringBenchmark.Failure
    typealias Series = KeyringBenchmark.Series
    typealias Row = CLIBenchmark.Row

    struct Report: Encodable {
        var benchmark = "helpers"
        var runs: Int
        var sesame: String
        var rows: [Row]
    }

    let json: Bool
    let runs: Int
    let sesame: String
    let helper: String

    init(arguments: [String]) throws {
        var json = false
        var runs = 40
        var sesame: String?
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
            default:
                throw Failure(
                    description: "unknown argument '\(argument)'; usage: sesame-bench helpers [--json] [--runs N] "
                        + "[--sesame PATH]")
            }
        }
        self.json = json
        self.runs = runs
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("sesame").path
        self.sesame = sesame ?? beside
        // docker-credential-sesame is installed beside sesame.
        self.helper =
            URL(fileURLWithPath: self.sesame).deletingLastPathComponent()
            .appendingPathComponent("docker-credential-sesame").path
        for program in [self.sesame, helper] where !FileManager.default.isExecutableFile(atPath: program) {
            throw Failure(
                description: "no executable at \(program); install with 'scripts/install --prefix /tmp/sesame-bench' "
                    + "and give --sesame /tmp/sesame-bench/bin/sesame")
        }
    }

    static func find(_ name: String, package: String) throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"]
        where FileManager.default.isExecutableFile(
            atPath: "\(directory)/\(name)")
        {
            return "\(directory)/\(name)"
        }
        throw Failure(description: "\(name) is missing; install Debian's \(package) (scripts/bootstrap does)")
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let bus = environment["DBUS_SESSION_BUS_ADDRESS"], !bus.isEmpty else {
            throw Failure(description: "no D-Bus session; run it in a throw-away keyring: scripts/with-keyring ...")
        }
        let secretTool = try KeyringBenchmark.findSecretTool()
        let secretService = try Self.find(
            "docker-credential-secretservice", package: "golang-docker-credential-helpers")
        let appID = EmulatedApp.sesameDefault.id
        let key = CredentialKey(provider: ProviderID("facebook"), appID: appID, account: "default")
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

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-bench-helpers-\(getpid())")
        let config = scratch.appendingPathComponent("config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let registry = "registry.bench.example"
        try #"{"registries": {"\#(registry)": "facebook"}}"#.write(
            to: config.appendingPathComponent("config.json"), atomically: true, encoding: .utf8)
        var base = [
            "PATH": environment["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8", "DBUS_SESSION_BUS_ADDRESS": bus,
            "HOME": scratch.path, "XDG_STATE_HOME": scratch.appendingPathComponent("state").path,
            "XDG_CONFIG_HOME": scratch.appendingPathComponent("config").path, "NO_COLOR": "1",
            "KUBERNETES_EXEC_INFO":
                #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#,
        ]
        if let runtime = environment["XDG_RUNTIME_DIR"] { base["XDG_RUNTIME_DIR"] = runtime }
        try await AccountState(environment: base).setActiveAccount("default", for: key.provider, appID: appID)

        // The other helper's item: a secret as long as Sesame's keyring secret for the login.
        let lookupArguments = ["lookup", "provider", "facebook", "app_id", appID, "account", "default"]
        let lookup = try CLIBenchmark.runProcess(secretTool, lookupArguments, environment: base)
        let sesameSecret = String(decoding: lookup.output, as: UTF8.self).trimmingCharacters(in: .newlines)
        guard lookup.status == 0, !sesameSecret.isEmpty else {
            throw Failure(description: "secret-tool lookup did not print the stored login")
        }
        let otherURL = "https://other.bench.example"
        let otherSecret = String(repeating: "s", count: sesameSecret.utf8.count)
        let item = JSONValue.object([
            "ServerURL": .string(otherURL), "Username": .string("oauth2accesstoken"), "Secret": .string(otherSecret),
        ])
        let stored = try CLIBenchmark.runProcess(
            secretService, ["store"], environment: base, input: Data(item.jsonText.utf8))
        guard stored.status == 0 else { throw Failure(description: "docker-credential-secretservice store failed") }
        defer {
            _ = try? CLIBenchmark.runProcess(secretService, ["erase"], environment: base, input: Data(otherURL.utf8))
        }

        struct Case {
            var command: String
            var executable: String
            var arguments: [String]
            var input: Data?
            /// What the output must contain.
            var expected: String
        }
        let cases = [
            Case(
                command: "docker-credential-secretservice get", executable: secretService, arguments: ["get"],
                input: Data(otherURL.utf8), expected: otherSecret),
            Case(
                command: "docker-credential-sesame get", executable: helper, arguments: ["get"],
                input: Data(registry.utf8), expected: tokenString),
            Case(
                command: "secret-tool lookup (the login's item)", executable: secretTool, arguments: lookupArguments,
                expected: sesameSecret),
            Case(
                command: "sesame kubectl-credential facebook", executable: sesame,
                arguments: ["kubectl-credential", "facebook"], expected: tokenString),
        ]
        // Each output checked once: the figures are of commands that did their job.
        for check in cases {
            let result = try CLIBenchmark.runProcess(
                check.executable, check.arguments, environment: base, input: check.input)
            guard result.status == 0, String(decoding: result.output, as: UTF8.self).contains(check.expected) else {
                throw Failure(description: "\(check.command) exited \(result.status) without the expected answer")
            }
        }

        StandardStreams.err(Data("sesame-bench helpers: \(runs) runs of each, interleaved, after 3 to warm up\n".utf8))
        var samples = [[Double]](repeating: [], count: cases.count)
        var cpuSamples = [[Double]](repeating: [], count: cases.count)
        for round in -3..<runs {
            for (index, item) in cases.enumerated() {
                let cpuBefore = CLIBenchmark.childrenCPUMilliseconds()
                let start = ContinuousClock.now
                let result = try CLIBenchmark.runProcess(
                    item.executable, item.arguments, environment: base, input: item.input)
                let elapsed = CLIBenchmark.milliseconds(ContinuousClock.now - start)
                let cpu = CLIBenchmark.childrenCPUMilliseconds() - cpuBefore
                guard result.status == 0 else {
                    throw Failure(description: "\(item.command) exited \(result.status) in round \(round)")
                }
                if round >= 0 {
                    samples[index].append(elapsed)
                    cpuSamples[index].append(cpu)
                }
            }
        }
        try await store.delete(key)

        // Rows in pairs: each Sesame helper over the program before it.
        var rows: [Row] = []
        for index in cases.indices {
            let series = Series(name: cases[index].command, milliseconds: samples[index])
            let cpu = Series.percentile(cpuSamples[index].sorted(), 0.5)
            let isSesame = index % 2 == 1
            let reference = Series(name: "", milliseconds: samples[index - (isSesame ? 1 : 0)]).p50
            let referenceCPU = Series.percentile(cpuSamples[index - (isSesame ? 1 : 0)].sorted(), 0.5)
            rows.append(
                Row(
                    command: cases[index].command, series: series, p90: Series.percentile(samples[index].sorted(), 0.9),
                    ratio: isSesame ? series.p50 / reference : nil, goal: isSesame ? 1.5 : nil, cpuP50: cpu,
                    cpuRatio: isSesame ? cpu / referenceCPU : nil))
        }
        let report = Report(runs: runs, sesame: sesame, rows: rows)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            StandardStreams.out(try encoder.encode(report) + Data("\n".utf8))
        } else {
            var text = "helpers: whole processes, \(runs) runs each, interleaved (\(sesame)); ÷ = over the row above\n"
            text += CLIBenchmark.table(
                CLIBenchmark.Report(runs: runs, sesame: sesame, baseline: nil, rows: rows)
            ).split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2).joined(separator: "\n")
            StandardStreams.out(Data(text.replacingOccurrences(of: "÷ lookup", with: "÷ above  ").utf8))
        }
    }
}

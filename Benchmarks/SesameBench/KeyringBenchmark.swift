import Foundation
import Sesame
import SesameKeyring

// sesame-bench keyring: SecretServiceStore's load and save, on the first call of a process
// and warm, beside `secret-tool lookup` and `secret-tool store` as whole processes, against
// the same keyring in the same run.
//
//   scripts/with-keyring swift run -c release sesame-bench keyring [--json] [--runs N]

struct KeyringBenchmark {
    static let benchmark = Benchmark(
        name: "keyring",
        summary: "SecretServiceStore load/save (first call, warm) beside secret-tool lookup/store"
    ) { arguments in
        try await KeyringBenchmark(arguments: arguments).run()
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// One measured operation: its timings in milliseconds.
    struct Series: Encodable {
        var name: String
        var runs: Int
        var p50: Double
        var p99: Double
        var mean: Double

        init(name: String, milliseconds: [Double]) {
            let sorted = milliseconds.sorted()
            self.name = name
            runs = sorted.count
            p50 = Self.percentile(sorted, 0.50)
            p99 = Self.percentile(sorted, 0.99)
            mean = sorted.reduce(0, +) / Double(max(sorted.count, 1))
        }

        /// Nearest-rank percentile of sorted samples.
        static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let rank = Int((fraction * Double(sorted.count)).rounded(.up))
            return sorted[min(max(rank, 1), sorted.count) - 1]
        }
    }

    struct Report: Encodable {
        var benchmark = "keyring"
        var secretBytes: Int
        var series: [Series]
        var ratios: [String: Double]
    }

    let json: Bool
    let warmRuns: Int
    let processRuns: Int
    let firstCallMode: String?
    let firstCallAccount: String?

    init(arguments: [String]) throws {
        var json = false
        var runs = 200
        var firstCall: (String, String)?
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--json": json = true
            case "--runs":
                guard let value = rest.popFirst().flatMap(Int.init), value > 0 else {
                    throw Failure(description: "--runs needs a positive number")
                }
                runs = value
            case "--first-call":
                // Internal: one call in a fresh process, printed in milliseconds.
                guard let mode = rest.popFirst(), let account = rest.popFirst() else {
                    throw Failure(description: "--first-call needs load|save and an account")
                }
                firstCall = (mode, account)
            default:
                throw Failure(
                    description: "unknown argument '\(argument)'; usage: sesame-bench keyring [--json] [--runs N]")
            }
        }
        self.json = json
        warmRuns = runs
        processRuns = max(runs / 4, 10)
        firstCallMode = firstCall?.0
        firstCallAccount = firstCall?.1
    }

    static let provider = ProviderID("sesame-bench")
    static let appID = "1234"

    static func key(_ account: String) -> CredentialKey {
        CredentialKey(provider: provider, appID: appID, account: account)
    }

    /// A credential the size of a real one: a long-lived Facebook token with permissions.
    static func credential(_ account: String) -> StoredCredential {
        let token = AccessToken(
            tokenString: "EAAB" + String(repeating: "x", count: 200),
            provider: provider,
            appID: appID,
            userID: "100004321",
            permissions: PermissionSet(granted: ["public_profile", "email", "user_posts"], declined: ["user_friends"]),
            expirationDate: Date(timeIntervalSinceNow: 60 * 86400),
            providerExtras: [
                "data_access_expires_at": .number(Date(timeIntervalSinceNow: 90 * 86400).timeIntervalSince1970)
            ])
        return StoredCredential(key: key(account), token: token)
    }

    func run() async throws {
        if let firstCallMode, let firstCallAccount {
            try await measureFirstCall(firstCallMode, account: firstCallAccount)
            return
        }
        let store = SecretServiceStore(unlocking: .never)
        let sesameAccount = "bench-\(getpid())"
        let toolAccount = "bench-secret-tool-\(getpid())"
        let credential = Self.credential(sesameAccount)
        let secret = try JSONEncoder().encode(credential)

        // The item every load reads; also checks that the keyring answers at all.
        do {
            try await store.save(credential)
        } catch {
            throw Failure(description: "the keyring is not usable (\(error)); run under scripts/with-keyring")
        }
        let measured: Measurements
        do {
            measured = try await measure(store, credential, toolAccount: toolAccount, secret: secret)
        } catch {
            _ = try? await store.delete(Self.key(sesameAccount))
            _ = try? await store.delete(Self.key(toolAccount))
            throw error
        }
        try await store.delete(Self.key(sesameAccount))
        try await store.delete(Self.key(toolAccount))

        let (firstLoad, firstSave, warmLoad, warmSave, toolLookup, toolStore) = measured
        let series = [
            Series(name: "sesame load, first call in a process", milliseconds: firstLoad),
            Series(name: "sesame load, warm", milliseconds: warmLoad),
            Series(name: "secret-tool lookup (process)", milliseconds: toolLookup),
            Series(name: "sesame save, first call in a process", milliseconds: firstSave),
            Series(name: "sesame save, warm", milliseconds: warmSave),
            Series(name: "secret-tool store (process)", milliseconds: toolStore),
        ]
        let ratios = [
            "secret-tool lookup p50 / sesame warm load p50": series[2].p50 / series[1].p50,
            "secret-tool store p50 / sesame warm save p50": series[5].p50 / series[4].p50,
            "sesame first load p50 / sesame warm load p50": series[0].p50 / series[1].p50,
            "sesame first save p50 / sesame warm save p50": series[3].p50 / series[4].p50,
        ]
        let report = Report(secretBytes: secret.count, series: series, ratios: ratios)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            StandardStreams.out(try encoder.encode(report) + Data("\n".utf8))
        } else {
            StandardStreams.out(Data(Self.table(report).utf8))
        }
    }

    typealias Measurements = (
        firstLoad: [Double], firstSave: [Double], warmLoad: [Double], warmSave: [Double], toolLookup: [Double],
        toolStore: [Double]
    )

    func measure(
        _ store: SecretServiceStore, _ credential: StoredCredential, toolAccount: String, secret: Data
    )
        async throws -> Measurements
    {
        let account = credential.key.account
        progress("first call in a fresh process (load, save): \(processRuns) processes each")
        var firstLoad: [Double] = []
        var firstSave: [Double] = []
        for _ in 0..<processRuns {
            firstLoad.append(try await firstCallInChild("load", account: account))
            firstSave.append(try await firstCallInChild("save", account: account))
        }

        progress("warm, in process: \(warmRuns) loads and \(warmRuns) saves")
        _ = try await store.load(credential.key)
        var warmLoad: [Double] = []
        var warmSave: [Double] = []
        for _ in 0..<warmRuns {
            warmLoad.append(try await time { _ = try await store.load(credential.key) })
            warmSave.append(try await time { try await store.save(credential) })
        }
        guard try await store.load(credential.key) == credential else {
            throw Failure(description: "the credential read back differs from the one saved")
        }

        progress("secret-tool lookup and store as whole processes: \(processRuns) each")
        let secretTool = try Self.findSecretTool()
        let attributes = [
            "xdg:schema", "org.sesame.Credential", "provider", Self.provider.rawValue, "app_id", Self.appID,
        ]
        var toolLookup: [Double] = []
        var toolStore: [Double] = []
        for _ in 0..<processRuns {
            let (lookupTime, printed) = try runTimed(secretTool, ["lookup"] + attributes + ["account", account])
            // The secret is the credential's JSON in base64 (schema_version 2).
            let json = Data(base64Encoded: Data(printed.filter { $0 != UInt8(ascii: "\n") })) ?? printed
            guard (try? JSONDecoder().decode(StoredCredential.self, from: json)) == credential else {
                throw Failure(description: "secret-tool lookup printed something other than the saved credential")
            }
            toolLookup.append(lookupTime)
            let label = "--label=Sesame: \(Self.key(toolAccount))"
            let storeArguments = ["store", label] + attributes + ["account", toolAccount, "schema_version", "1"]
            toolStore.append(try runTimed(secretTool, storeArguments, input: secret).milliseconds)
        }
        return (firstLoad, firstSave, warmLoad, warmSave, toolLookup, toolStore)
    }

    static func table(_ report: Report) -> String {
        func pad(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
        }
        func number(_ value: Double) -> String { String(format: "%8.2f", value) }
        var text = "keyring: SecretServiceStore vs secret-tool (secret of \(report.secretBytes) bytes)\n\n"
        text += pad("operation", 40) + "    runs   p50 ms   p99 ms  mean ms\n"
        for series in report.series {
            text += pad(series.name, 40) + String(format: "%8d", series.runs)
            text += " \(number(series.p50)) \(number(series.p99)) \(number(series.mean))\n"
        }
        text += "\n"
        for (name, ratio) in report.ratios.sorted(by: { $0.key < $1.key }) {
            text += pad(name, 48) + String(format: "%7.1fx\n", ratio)
        }
        return text
    }

    // MARK: - Measuring

    /// In a child process: one call on a fresh store, timed from before the call to after it,
    /// so the figure is the first call's cost (bus connection, Secret Service session) without
    /// the process's start-up.
    func measureFirstCall(_ mode: String, account: String) async throws {
        let store = SecretServiceStore(unlocking: .never)
        let credential = Self.credential(account)
        let milliseconds: Double
        switch mode {
        case "load":
            milliseconds = try await time {
                guard try await store.load(credential.key) != nil else {
                    throw Failure(description: "the credential to load is missing")
                }
            }
        case "save":
            milliseconds = try await time { try await store.save(credential) }
        default:
            throw Failure(description: "--first-call needs load or save")
        }
        print(milliseconds)
    }

    func firstCallInChild(_ mode: String, account: String) async throws -> Double {
        let output = try runProcess(
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
            ["keyring", "--first-call", mode, account])
        guard
            let value = Double(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw Failure(description: "the first-call child printed no figure")
        }
        return value
    }

    func time(_ body: () async throws -> Void) async throws -> Double {
        let start = ContinuousClock.now
        try await body()
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// Runs a whole process; returns how long it took, from launch to exit, and what it printed.
    func runTimed(
        _ executable: String, _ arguments: [String], input: Data? = nil
    ) throws
        -> (milliseconds: Double, output: Data)
    {
        let start = ContinuousClock.now
        let output = try runProcess(executable, arguments, input: input)
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return (Double(seconds) * 1000 + Double(attoseconds) / 1e15, output)
    }

    /// Runs a process to completion: feeds it `input`, reads its output to the end, then waits.
    func runProcess(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()
        if let input { stdin.fileHandleForWriting.write(input) }
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(
                description: "\(executable) \(arguments.prefix(3).joined(separator: " ")) exited with "
                    + "\(process.terminationStatus)")
        }
        return output
    }

    static func findSecretTool() throws -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let path = "\(directory)/secret-tool"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw Failure(description: "secret-tool is not on PATH; install libsecret-tools (scripts/bootstrap)")
    }

    func progress(_ message: String) {
        StandardStreams.err(Data("sesame-bench keyring: \(message)\n".utf8))
    }
}

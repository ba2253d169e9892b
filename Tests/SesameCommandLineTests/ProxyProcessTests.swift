import Foundation
import Sesame
import SesameCurl
import SesameOIDCEmulator
import SesameTestSupport
import Testing

/// `sesame` behind a TLS-intercepting proxy nobody here wrote (mitmproxy, from PyPI, with its own
/// CA) and in front of a TLS server signed by a private CA, both on 127.0.0.1: the `ca_bundle`,
/// `proxy` and `SSL_CERT_FILE` settings reach the transport, and without them the refusal and
/// `sesame doctor` say who signed the certificate and what to set.
@Suite("sesame behind a TLS-intercepting proxy and with a private CA, as a process", .serialized)
struct ProxyProcessTests {
    init() { TestProviders.bootstrap() }

    /// A private CA and a certificate it signed for 127.0.0.1, made with openssl in `directory`.
    struct PrivateCA {
        let caFile: URL
        /// The server's certificate, then its key, as mitmproxy's `--certs` takes them.
        let serverFile: URL

        init(in directory: URL) async throws {
            caFile = directory.appending(path: "private-ca.pem")
            serverFile = directory.appending(path: "server.pem")
            let (caKey, key, request, certificate, extensions) = (
                directory.appending(path: "private-ca.key").path, directory.appending(path: "server.key").path,
                directory.appending(path: "server.csr").path, directory.appending(path: "server.crt").path,
                directory.appending(path: "server.ext")
            )
            try Data("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n".utf8).write(to: extensions)
            let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            try await PostgresServer.openssl(
                ["req", "-x509"] + curve + [
                    "-keyout", caKey, "-out", caFile.path, "-days", "1", "-subj", "/CN=Sesame Test Private CA",
                ])
            try await PostgresServer.openssl(
                ["req"] + curve + ["-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"])
            try await PostgresServer.openssl([
                "x509", "-req", "-in", request, "-CA", caFile.path, "-CAkey", caKey, "-CAcreateserial", "-days", "1",
                "-extfile", extensions.path, "-out", certificate,
            ])
            try (try Data(contentsOf: URL(fileURLWithPath: certificate)) + Data(contentsOf: URL(fileURLWithPath: key)))
                .write(to: serverFile)
        }
    }

    /// One mitmdump process on 127.0.0.1, on a port it picked.
    struct Mitmdump {
        let process: LiveProcess
        let port: Int

        /// mitmdump, installed by scripts/mitmproxy (into .build/mitmproxy-venv) when missing. The
        /// test fails, saying why, when it cannot be installed: it never skips.
        static func executable() async throws -> String {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let result = try await ProcessRunner.run(
                root.appending(path: "scripts/mitmproxy"), [], killAfter: .seconds(600))
            let path = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            try #require(
                result.status == 0 && FileManager.default.isExecutableFile(atPath: path),
                "mitmproxy could not be installed (scripts/mitmproxy): \(result.standardError)")
            return path
        }

        /// Starts mitmdump with `arguments` (a mode), its state in `confdir`, and waits for it to
        /// say where it listens.
        static func start(_ arguments: [String], confdir: URL) async throws -> Mitmdump {
            let command =
                ([try await executable()] + arguments + [
                    "--listen-host", "127.0.0.1", "--set", "confdir=\(confdir.path)",
                ]).map { "'\($0)'" }.joined(separator: " ")
            // Its log on standard error, where the harness watches for the port.
            let process = try await LiveProcess(
                URL(fileURLWithPath: "/bin/sh"), ["-c", "exec \(command) 1>&2"],
                // Unbuffered: Python holds a pipe's output back until its buffer fills.
                environment: ProcessInfo.processInfo.environment.filter { $0.key == "SESAME_TEST_RUN_ID" }
                    .merging(["PYTHONUNBUFFERED": "1"]) { $1 }, input: Data())
            let banner: String
            do {
                banner = try await process.waitForError(matching: #"listening at 127\.0\.0\.1:\d+"#)
            } catch {
                process.terminate()
                let result = await process.finish()
                Issue.record("mitmdump did not start: \(result.standardError)")
                throw error
            }
            let port = try #require(banner.firstMatch(of: #/listening at 127\.0\.0\.1:(\d+)/#).flatMap { Int($0.1) })
            return Mitmdump(process: process, port: port)
        }

        /// Stops it and returns what it logged.
        func stop() async -> String {
            process.terminate()
            return await process.finish().standardError
        }
    }

    /// The OIDC emulator behind `https://127.0.0.1:<front>`, a TLS server with a certificate of a
    /// private CA (mitmproxy in reverse mode, with that certificate), and a TLS-intercepting
    /// proxy (mitmproxy in regular mode, with its own CA, trusting the private CA upstream).
    struct Network {
        let emulator: OIDCEmulator
        let adminIssuer: String
        let issuer: String
        let privateCA: PrivateCA
        let front: Mitmdump
        let proxy: Mitmdump
        let directory: URL

        var proxyURL: String { "http://127.0.0.1:\(proxy.port)" }
        var mitmproxyCA: URL { directory.appending(path: "proxy/mitmproxy-ca-cert.pem") }
        /// The flows the proxy relayed (mitmproxy's `save_stream_file`).
        var flowFile: URL { directory.appending(path: "flows.mitm") }
    }

    static func withNetwork<T>(_ body: (Network) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let privateCA = try await PrivateCA(in: directory)
        let emulator = try OIDCEmulator(devicePollInterval: 1)
        return try await withStarted({ try await emulator.start().issuer }, stop: { _ in await emulator.stop() }) {
            adminIssuer in
            try await withStarted(
                {
                    try await Mitmdump.start(
                        ["--mode", "reverse:\(adminIssuer)@0", "--certs", "*=\(privateCA.serverFile.path)"],
                        confdir: directory.appending(path: "front"))
                }, stop: { _ = await $0.stop() }
            ) { front in
                let issuer = "https://127.0.0.1:\(front.port)"
                emulator.answer(asIssuer: issuer)
                return try await withStarted(
                    {
                        try await Mitmdump.start(
                            [
                                "--mode", "regular@0", "--set",
                                "ssl_verify_upstream_trusted_ca=\(privateCA.caFile.path)",
                                "--set", "save_stream_file=\(directory.appending(path: "flows.mitm").path)",
                            ],
                            confdir: directory.appending(path: "proxy"))
                    }, stop: { _ = await $0.stop() }
                ) { proxy in
                    try await body(
                        Network(
                            emulator: emulator, adminIssuer: adminIssuer, issuer: issuer, privateCA: privateCA,
                            front: front, proxy: proxy, directory: directory))
                }
            }
        }
    }

    /// No proxy variable of the test's own environment reaches the programs: loopback must not be
    /// exempted by a `NO_PROXY` that happens to be set, nor a proxy added.
    static let noProxyVariables = [
        "no_proxy": "", "NO_PROXY": "", "https_proxy": "", "HTTPS_PROXY": "", "http_proxy": "", "all_proxy": "",
        "ALL_PROXY": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": "",
    ]

    /// Writes the config file: the issuer named `work`, with `extra` settings.
    static func configure(_ cli: CLIHarness, issuer: String, extra: [String: JSONValue] = [:]) throws {
        var work: [String: JSONValue] = [
            "issuer": .string(issuer), "client_id": .string(OIDCEmulator.defaultClientID),
        ]
        work.merge(extra) { $1 }
        let directory = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(JSONValue.object(["oidc": .object(["work": .object(work)])]).jsonText.utf8)
            .write(to: directory.appending(path: "config.json"))
    }

    /// `sesame login work`, its device code approved through the emulator's own admin API.
    static func login(
        _ cli: CLIHarness, _ network: Network, environment: [String: String] = [:]
    ) async throws
        -> ProcessResult
    {
        let process = try await cli.start("sesame", ["login", "work"], environment: environment)
        let printed = try await process.waitForError(matching: #"enter the code\n\n\s+[A-Z]{4}-[A-Z]{4}\n"#)
        let code = try #require(printed.firstMatch(of: #/\n\s+([A-Z]{4}-[A-Z]{4})\s*\n/#).map { String($0.1) })
        #expect(printed.contains("open \(network.issuer)/device"))
        let response = try await CurlTransport().send(
            .postJSON(URL(string: "\(network.adminIssuer)/__sesame/device")!, .object(["user_code": .string(code)])))
        #expect(response.status == 200)
        let result = await process.finish()
        cli.record("sesame login work", result)
        return result
    }

    /// `sesame status` checks the login of `work` with the issuer, which finds it valid.
    static func expectValidLogin(_ cli: CLIHarness, environment: [String: String] = [:]) async throws {
        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"], environment: environment)
        #expect(status.status == 0, "\(status.standardError)")
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        let work = try #require(OIDCProcessTests.provider("work", in: document), "\(status.standardOutput)")
        #expect(work["accounts"]?.arrayValue?.first?["validity"]?.stringValue == "valid", "\(work)")
    }

    @Test(
        "through mitmproxy with its CA as the issuer's ca_bundle: login, renewal and status work; without the CA the login is refused naming the fix, and doctor names mitmproxy's CA"
    )
    func throughInterceptingProxy() async throws {
        try await Self.withNetwork { network in
            // Refused: the proxy (SESAME_PROXY) presents mitmproxy's certificate, which nothing trusts.
            let refusedCLI = try CLIHarness(environment: Self.noProxyVariables)
            try Self.configure(refusedCLI, issuer: network.issuer)
            let untrusted = ["SESAME_PROXY": network.proxyURL]
            let refused = try await refusedCLI.run("sesame", ["login", "work"], environment: untrusted)
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("certificate"), "\(refused.standardError)")
            #expect(refused.standardError.contains("ca_bundle"), "\(refused.standardError)")
            #expect(refused.standardError.contains("SSL_CERT_FILE"), "\(refused.standardError)")

            // doctor bounds each probe at 3 s; through mitmproxy under AddressSanitizer on a loaded
            // machine the probe can miss that bound, so one that did not answer is asked again
            // (twice at most).
            var doctor = try await refusedCLI.run("sesame", ["doctor"], environment: untrusted)
            for _ in 0..<2 where doctor.standardOutput.contains("did not answer in time") {
                doctor = try await refusedCLI.run("sesame", ["doctor"], environment: untrusted)
            }
            let line = try #require(
                doctor.standardOutput.split(separator: "\n").first { $0.contains("'work' discovery") },
                "\(doctor.standardOutput)")
            #expect(line.contains("issued by \"CN = mitmproxy, O = mitmproxy\""), "\(line)")
            #expect(line.contains("TLS-inspecting proxy (mitmproxy) through the proxy \(network.proxyURL)"), "\(line)")
            #expect(line.contains("set ca_bundle"), "\(line)")

            // Trusted: the issuer's own ca_bundle and proxy in the config file.
            let cli = try CLIHarness(environment: Self.noProxyVariables)
            try Self.configure(
                cli, issuer: network.issuer,
                extra: ["ca_bundle": .string(network.mitmproxyCA.path), "proxy": .string(network.proxyURL)])
            let login = try await Self.login(cli, network)
            #expect(login.status == 0, "\(login.standardError)")
            let first = try #require(try await cli.storedTokens().first)

            // Renewal: the stored login is two hours older, so its access token has expired.
            try await cli.age(by: 7200)
            let renewed = try await cli.run("sesame", ["token", "work"])
            #expect(renewed.status == 0, "\(renewed.standardError)")
            let second = try #require(try await cli.storedTokens().first)
            #expect(second != first)
            #expect(renewed.standardOutput == second + "\n")

            try await Self.expectValidLogin(cli)

            // Each of them went through mitmproxy, which relayed them to the private CA's server
            // (nothing else holds a certificate of mitmproxy's CA).
            // mitmproxy's flow file records each request's path as `path;<length>:<path>`.
            _ = await network.proxy.stop()
            let flows = String(decoding: try Data(contentsOf: network.flowFile), as: UTF8.self)
            for path in ["/.well-known/openid-configuration", "/device_authorization", "/token", "/userinfo"] {
                #expect(flows.contains(":\(path)"), "mitmproxy relayed no request for \(path)")
            }
            cli.expectNoTokenLeaks([first, second])
        }
    }

    @Test(
        "a TLS server of a private CA in front of the OpenID emulator: reached with SSL_CERT_FILE; refused without it, naming the fix"
    )
    func privateCAWithSSLCertFile() async throws {
        try await Self.withNetwork { network in
            let cli = try CLIHarness(environment: Self.noProxyVariables)
            try Self.configure(cli, issuer: network.issuer)

            let refused = try await cli.run("sesame", ["login", "work"])
            #expect(refused.status != 0)
            #expect(refused.standardError.contains("ca_bundle"), "\(refused.standardError)")
            let doctor = try await cli.run("sesame", ["doctor"])
            #expect(
                doctor.standardOutput.contains("issued by \"CN = Sesame Test Private CA\""), "\(doctor.standardOutput)")

            let trusted = ["SSL_CERT_FILE": network.privateCA.caFile.path]
            let login = try await Self.login(cli, network, environment: trusted)
            #expect(login.status == 0, "\(login.standardError)")
            try await Self.expectValidLogin(cli, environment: trusted)
            let doctorTrusted = try await cli.run("sesame", ["doctor"], environment: trusted)
            #expect(
                doctorTrusted.standardOutput.contains("'work' discovery at \(network.issuer)"),
                "\(doctorTrusted.standardOutput)")
            #expect(!doctorTrusted.standardOutput.contains("not trusted"), "\(doctorTrusted.standardOutput)")
            #expect(
                doctorTrusted.standardOutput.contains(
                    "work: trusts the CAs in \(network.privateCA.caFile.path) (SSL_CERT_FILE)."),
                "\(doctorTrusted.standardOutput)")
        }
    }
}

import Foundation
import Sesame
import SesameDesktop
import Testing

@testable import SesameCommandLine

/// Issue 42, in this process: how registry hosts are read, how the config file's `registries`
/// are checked, what `KUBERNETES_EXEC_INFO` gives, and the kubeconfig entry.
@Suite("credential helpers: registry hosts, mappings, exec info")
struct CredentialHelperTests {
    init() { TestProviders.bootstrap() }

    @Test(
        "a server URL gives its exact lower-case host[:port]",
        arguments: [
            ("ghcr.io", "ghcr.io"), ("https://ghcr.io", "ghcr.io"), ("https://GHCR.io/v2/", "ghcr.io"),
            ("127.0.0.1:5000", "127.0.0.1:5000"), ("http://127.0.0.1:5000/v2/x", "127.0.0.1:5000"),
            ("https://index.docker.io/v1/", "index.docker.io"), ("[::1]:5000", "[::1]:5000"),
            ("evil.example/ghcr.io", "evil.example"), ("ghcr.io.evil.example", "ghcr.io.evil.example"),
            ("registry.example:0443", "registry.example:443"), ("http://localhost:5000", "localhost:5000"),
            ("HTTP://[::1]:5000/v2/", "[::1]:5000"),
        ])
    func hosts(_ url: String, _ host: String) throws {
        #expect(try RegistryHost(serverURL: url).text == host)
    }

    @Test(
        "a server URL with userinfo, a query, odd characters, a bad port or host, or too long is refused",
        arguments: [
            "", "user@ghcr.io", "https://u:p@ghcr.io/", "ghcr.io@evil.example", "ghcr.io:443@evil.example",
            "ghcr.io?x=1", "ghcr.io#x", "ghcr.io\\@evil", "ghcr .io", "ghcr.io\n", "ghcr.io\u{0}", "ftp://ghcr.io",
            "ghcr.io:", "ghcr.io:99999", "ghcr.io:80a", "ghcr.io.", "-ghcr.io", "gh_cr.io", "[::1", "[zz]:5",
            "ghcr.ıo", "{\"ServerURL\":\"ghcr.io\"}", String(repeating: "a", count: 3000), "http://ghcr.io",
            "HTTP://ghcr.io/v2/", "http://registry.example:5000", "http://127.0.0.1.evil.example",
        ])
    func refused(_ url: String) {
        #expect(throws: RegistryHost.Refusal.self) { try RegistryHost(serverURL: url) }
    }

    static func configuration(_ registries: JSONValue) -> DesktopConfiguration {
        DesktopConfiguration(
            file: ["registries": registries], configFileLocation: URL(fileURLWithPath: "/tmp/sesame-config.json"))
    }

    @Test("the registries object maps hosts to a provider, an account and a user name")
    func mappings() throws {
        let configuration = Self.configuration(
            .object([
                "ghcr.io": .string("github"),
                "registry.example:5000": .object([
                    "provider": .string("work"), "account": .string("alice"), "username": .string("robot"),
                ]),
            ]))
        let all = try RegistryMapping.all(in: configuration)
        #expect(all.map(\.host.text) == ["ghcr.io", "registry.example:5000"])
        #expect(all[0].provider == "github" && all[0].account == nil && all[0].username == "oauth2accesstoken")
        #expect(all[1].provider == "work" && all[1].account == "alice" && all[1].username == "robot")
        let host = try RegistryHost(serverURL: "https://registry.example:5000/v2/")
        #expect(try RegistryMapping.mapping(for: host, in: configuration)?.account == "alice")
        let other = try RegistryHost(serverURL: "registry.example")
        #expect(try RegistryMapping.mapping(for: other, in: configuration) == nil)
    }

    @Test(
        "a registries entry that is not a host, names no provider or has unknown keys is a config error",
        arguments: [
            JSONValue.string("github"), .object(["https://ghcr.io": .string("github")]),
            .object(["GHCR.io": .string("github")]), .object(["ghcr.io/v2": .string("github")]),
            .object(["user@ghcr.io": .string("github")]), .object(["ghcr.io": .string("")]),
            .object(["ghcr.io": .number(1)]), .object(["ghcr.io": .object(["account": .string("a")])]),
            .object(["ghcr.io": .object(["provider": .string("github"), "password": .string("x")])]),
            .object(["ghcr.io": .object(["provider": .string("git hub")])]),
        ])
    func badMappings(_ registries: JSONValue) throws {
        let error = try #require(throws: DesktopError.self) {
            try RegistryMapping.all(in: Self.configuration(registries))
        }
        #expect(error.status == .config)
        #expect(error.message.contains("registries"))
    }

    @Test("KUBERNETES_EXEC_INFO gives the version and interactivity; without it, v1beta1")
    func execInfo() throws {
        let unset = try KubernetesExecInfo.read(nil, inputIsTerminal: true)
        #expect(unset == KubernetesExecInfo(apiVersion: "client.authentication.k8s.io/v1beta1", interactive: true))
        let v1 = try KubernetesExecInfo.read(
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#,
            inputIsTerminal: true)
        #expect(v1 == KubernetesExecInfo(apiVersion: "client.authentication.k8s.io/v1", interactive: false))
        let text = v1.credential(token: "abc", expiry: Date(timeIntervalSince1970: 1_800_000_000.7))
        let json = try #require(JSONValue(parsing: Data(text.utf8)))
        #expect(json["apiVersion"]?.stringValue == "client.authentication.k8s.io/v1")
        #expect(json["status"]?["token"]?.stringValue == "abc")
        #expect(json["status"]?["expirationTimestamp"]?.stringValue == "2027-01-15T08:00:00Z")
    }

    @Test("the expiry of a JSON Web Token is read from its payload")
    func jwt() {
        let payload = Data(#"{"exp":1800000000}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        #expect(jwtExpiry("eyJhbGciOiJub25lIn0.\(payload).sig") == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(jwtExpiry("opaque-token") == nil)
        #expect(jwtExpiry("a.!!!.c") == nil)
    }

    @Test("the kubeconfig entry runs this program with the provider and account, interactive when possible")
    func kubeconfig() throws {
        let command = try SesameCLI.parse(["kubeconfig", "oidc", "--account", "we ird", "--token-type", "access"])
        guard case .kubeconfig(let kubeconfig) = command else {
            Issue.record("parsed as \(command)")
            return
        }
        let entry = kubeconfig.entry(program: "/usr/local/bin/sesame")
        #expect(entry.hasPrefix("users:\n- name: \"sesame-oidc-we ird\"\n"))
        #expect(entry.contains("      apiVersion: client.authentication.k8s.io/v1beta1\n"))
        #expect(entry.contains("      command: /usr/local/bin/sesame\n"))
        #expect(entry.contains("      - kubectl-credential\n      - oidc\n      - \"--account\"\n      - \"we ird\"\n"))
        #expect(entry.contains("      - \"--token-type\"\n      - access\n"))
        #expect(entry.contains("      interactiveMode: IfAvailable\n      provideClusterInfo: false\n"))
    }

    @Test(
        "the new commands refuse what they cannot take",
        arguments: [
            ["kubectl-credential"], ["kubectl-credential", "oidc", "extra"],
            ["kubectl-credential", "oidc", "--token-type", "refresh"], ["kubeconfig"], ["kubeconfig", "No Such"],
            ["credential-helpers", "extra"],
        ])
    func usage(_ arguments: [String]) {
        #expect(throws: UsageError.self) { try SesameCLI.parse(arguments) }
    }

    @Test("docker-credential-sesame without a mapping answers the protocol's not-found, and list answers {}")
    func helperWithoutMapping() async throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-helper-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let environment = [
            "XDG_CONFIG_HOME": root.appending(path: "config").path,
            "XDG_STATE_HOME": root.appending(path: "state").path,
            "SESAME_STORAGE": "memory",
        ]
        func run(_ arguments: [String], _ input: String) async -> (Int32, String) {
            let output = Locked("")
            let io = CommandIO(
                readStandardInput: { Data(input.utf8.prefix($0 + 1)) },
                write: { text in output.withLock { $0 += text } }, writeError: { _ in })
            let status = await DockerCredentialHelper.main(arguments, io: io, environment: environment)
            return (status, output.withLock { $0 })
        }
        let get = await run(["get"], "https://ghcr.io\n")
        #expect(get.0 == 1 && get.1 == "credentials not found in native keychain\n")
        let list = await run(["list"], "")
        #expect(list.0 == 0 && list.1 == "{}\n")
        let version = await run(["version"], "")
        #expect(version.0 == 0 && version.1.hasPrefix("docker-credential-sesame"))
    }

    @Test("credential-helpers --json lists the registries mapping, and a provider it does not know is marked")
    func credentialHelpersJSON() async throws {
        let root = FileManager.default.temporaryDirectory.appending(path: "sesame-helpers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let config = root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try #"{"registries": {"ghcr.io": "github", "r.example:5000": {"provider": "Nope", "account": "al"}}}"#.write(
            to: config.appending(path: "config.json"), atomically: true, encoding: .utf8)
        let output = Locked("")
        let io = CommandIO(
            readStandardInput: { _ in Data() }, write: { text in output.withLock { $0 += text } }, writeError: { _ in })
        let status = await SesameCLI.main(
            ["credential-helpers", "--json"], io: io,
            environment: [
                "XDG_CONFIG_HOME": root.appending(path: "config").path,
                "XDG_STATE_HOME": root.appending(path: "state").path,
                "PATH": "/nonexistent",
            ])
        #expect(status == 0)
        let json = try #require(JSONValue(parsing: Data(output.withLock { $0 }.utf8)))
        let registries = try #require(json["registries"]?.arrayValue)
        #expect(registries.map { $0["host"]?.stringValue } == ["ghcr.io", "r.example:5000"])
        #expect(registries.map { $0["knownProvider"]?.boolValue } == [true, false])
        #expect(registries[1]["account"]?.stringValue == "al")
        #expect(json["authFile"]?["credHelpers"]?["ghcr.io"]?.stringValue == "sesame")
        #expect(json["dockerCredentialHelper"] == .null)
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

/// Issue 42: kubectl and skopeo, unmodified, authenticate through Sesame's stored logins, across
/// an expiry; a login that needs making again, a wrong mapping and bad input are refused cleanly.
///
/// The login is an OpenID emulator's (in this process, reached over HTTP); the clock is moved as
/// in ``TimeTravelProcessTests`` (stored logins aged, the emulator's clock advanced), and the
/// refresh grants are read from the emulator's stats.
@Suite("credential helpers: kubectl and skopeo through Sesame's stored logins", .serialized)
struct CredentialHelperProcessTests {
    typealias Time = TimeTravelProcessTests

    /// A program from the system, or a failure naming the package that brings it.
    static func tool(_ name: String, package: String) throws -> URL {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"] {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return URL(fileURLWithPath: path) }
        }
        try #require(Bool(false), "\(name) is missing: scripts/bootstrap installs it (Debian package \(package))")
        throw CancellationError()
    }

    /// Runs a system tool with the harness's environment, recorded for the check that no token
    /// leaks into what it prints.
    static func runTool(
        _ tool: URL, _ arguments: [String], cli: CLIHarness, environment: [String: String]
    ) async throws -> ProcessResult {
        let process = try await LiveProcess(
            tool, arguments, environment: cli.environment.merging(environment) { $1 }, input: Data())
        let result = await process.finish()
        cli.record("\(tool.lastPathComponent) \(arguments.joined(separator: " "))", result)
        return result
    }

    /// Runs a built program that hands a token over; its output is not recorded.
    static func runHelper(
        _ program: String, _ arguments: [String], cli: CLIHarness, input: Data = Data(),
        environment: [String: String] = [:]
    ) async throws -> ProcessResult {
        let process = try await LiveProcess(
            try ProcessRunner.builtExecutable(program), arguments,
            environment: cli.environment.merging(environment) { $1 }, input: input)
        return await process.finish()
    }

    /// The harness's credential file, which the servers read their accepted tokens from.
    static func credentialFile(_ cli: CLIHarness) -> URL { cli.root.appending(path: "state/sesame/credentials.json") }

    // MARK: kubectl

    @Test(
        "kubectl get pods with sesame as its exec plug-in: succeeds, succeeds after expiry with one refresh, fails with Sesame's message when a new login is needed"
    )
    func kubectlAcrossExpiry() async throws {
        let kubectl = try Self.tool("kubectl", package: "kubernetes-client")
        try await Time.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Time.logIn(cli, to: provider)
            let login = try await Time.storedLogin(cli)
            let idToken = try #require(login.token.idToken, "the OpenID login has no ID token")
            let expiry = try #require(login.token.expirationDate)
            try await ToolServer.with(.kube, store: Self.credentialFile(cli)) { server in
                // The user entry is what `sesame kubeconfig` prints, pasted as a person would.
                let entry = try await cli.run("sesame", ["kubeconfig", provider.name])
                try #require(entry.status == 0, "\(entry.standardError)")
                #expect(entry.standardOutput.contains("interactiveMode: IfAvailable"))
                let kubeconfig = cli.root.appending(path: "kubeconfig")
                try """
                apiVersion: v1
                kind: Config
                clusters:
                - name: test
                  cluster:
                    server: https://127.0.0.1:\(server.port)
                    certificate-authority: \(server.caPath)
                contexts:
                - name: test
                  context: {cluster: test, user: sesame-\(provider.name)}
                current-context: test
                \(entry.standardOutput)
                """.write(to: kubeconfig, atomically: true, encoding: .utf8)
                let environment = provider.environment.merging(["KUBECONFIG": kubeconfig.path]) { $1 }

                // What kubectl reads, asked directly for the newer version.
                let direct = try await Self.runHelper(
                    "sesame", ["kubectl-credential", provider.name], cli: cli,
                    environment: [
                        "KUBERNETES_EXEC_INFO":
                            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#
                    ])
                #expect(direct.status == 0, "\(direct.standardError)")
                let credential = try #require(JSONValue(parsing: Data(direct.standardOutput.utf8)))
                #expect(credential["apiVersion"]?.stringValue == "client.authentication.k8s.io/v1")
                #expect(credential["kind"]?.stringValue == "ExecCredential")
                let sentID = credential["status"]?["token"]?.stringValue == idToken
                #expect(sentID, "the ExecCredential does not carry the login's ID token")
                let stamp = try #require(credential["status"]?["expirationTimestamp"]?.stringValue)
                let stated = try #require(ISO8601DateFormatter().date(from: stamp), "not RFC 3339: \(stamp)")
                #expect(stated > Date() && stated <= expiry.addingTimeInterval(1))

                let first = try await Self.runTool(kubectl, ["get", "pods"], cli: cli, environment: environment)
                #expect(first.status == 0, "\(first.standardError)")
                #expect(first.standardOutput.contains("sesame-test-pod"))
                #expect(server.counts.accepted >= 1, "\(server.log)")

                // Just after expiry: one refresh, and the renewed login's token is taken.
                let before = try await Time.stats(provider)
                try await Time.advance(cli, provider, by: expiry.timeIntervalSinceNow + 2)
                let second = try await Self.runTool(kubectl, ["get", "pods"], cli: cli, environment: environment)
                #expect(second.status == 0, "\(second.standardError)")
                #expect(second.standardOutput.contains("sesame-test-pod"))
                let after = try await Time.stats(provider)
                #expect(after.grants - before.grants == 1, "\(after)")
                let renewed = try await Time.storedLogin(cli)
                #expect(renewed.token.tokenString != login.token.tokenString)

                // Past the refresh token's lifetime: kubectl fails with Sesame's message and exit status.
                try await Time.advance(cli, provider, by: provider.refreshTokenLifetime + 60)
                let aged = try await Time.storedLogin(cli)
                let refusedBefore = server.counts.refused
                let third = try await Self.runTool(kubectl, ["get", "pods"], cli: cli, environment: environment)
                #expect(third.status != 0)
                #expect(!third.standardOutput.contains("sesame-test-pod"))
                #expect(third.standardError.contains("sesame login \(provider.name)"), "\(third.standardError)")
                #expect(third.standardError.contains("without a terminal"), "\(third.standardError)")
                #expect(third.standardError.contains("77"), "\(third.standardError)")
                #expect(server.counts.refused == refusedBefore, "kubectl sent something without a token")
                let kept = try await Time.storedLogin(cli)
                #expect(kept.token == aged.token, "the login that needs renewing was changed or removed")

                cli.expectNoTokenLeaks(Time.secrets(of: login) + Time.secrets(of: renewed))
            }
        }
    }

    @Test(
        "sesame kubectl-credential refuses a KUBERNETES_EXEC_INFO it cannot answer with 65, printing nothing",
        arguments: [
            "not json", #"{"apiVersion":"client.authentication.k8s.io/v1alpha1","kind":"ExecCredential"}"#,
            #"["client.authentication.k8s.io/v1"]"#,
            #"{"apiVersion":"client.authentication.k8s.io/v1","spec":{"x":""# + String(repeating: "a", count: 100_000)
                + #""}}"#,
        ])
    func badExecInfo(_ info: String) async throws {
        let cli = try CLIHarness()
        let result = try await Self.runHelper(
            "sesame", ["kubectl-credential", "oidc"], cli: cli, environment: ["KUBERNETES_EXEC_INFO": info])
        #expect(result.status == 65, "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("KUBERNETES_EXEC_INFO"))
    }

    // MARK: skopeo and docker-credential-sesame

    /// Writes the config file's `registries` object.
    static func mapRegistries(_ cli: CLIHarness, _ registries: [String: JSONValue]) throws {
        let directory = cli.root.appending(path: "config/sesame")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONValue.object(["registries": .object(registries)]).jsonText.write(
            to: directory.appending(path: "config.json"), atomically: true, encoding: .utf8)
    }

    @Test(
        "skopeo inspect with credHelpers gets the manifest through docker-credential-sesame, across an expiry; a wrong mapping or a missing login fails cleanly"
    )
    func skopeoAcrossExpiry() async throws {
        let skopeo = try Self.tool("skopeo", package: "skopeo")
        try await Time.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Time.logIn(cli, to: provider)
            let login = try await Time.storedLogin(cli)
            let expiry = try #require(login.token.expirationDate)
            let username = "oauth2accesstoken"
            try await ToolServer.with(.registry, store: Self.credentialFile(cli), username: username) { server in
                let host = "127.0.0.1:\(server.port)"
                try Self.mapRegistries(cli, [host: .string(provider.name)])
                let authFile = cli.root.appending(path: "auth.json")
                try #"{"credHelpers":{"\#(host)":"sesame"}}"#.write(to: authFile, atomically: true, encoding: .utf8)
                let helpers = try ProcessRunner.builtExecutable("docker-credential-sesame").deletingLastPathComponent()
                let environment = provider.environment.merging([
                    "REGISTRY_AUTH_FILE": authFile.path,
                    "PATH": "\(helpers.path):\(cli.environment["PATH"] ?? "/usr/bin:/bin")",
                ]) { $1 }
                let inspect = ["inspect", "--cert-dir", server.certDirectory, "docker://\(host)/sesame/test:v1"]

                let first = try await Self.runTool(skopeo, inspect, cli: cli, environment: environment)
                #expect(first.status == 0, "\(first.standardError)")
                #expect(first.standardOutput.contains("\"Architecture\": \"amd64\""), "\(first.standardOutput)")
                #expect(server.log.contains { $0.hasPrefix("accepted GET /v2/sesame/test/manifests/v1") })

                // The helper's own answer, as the protocol has it.
                let answer = try await Self.runHelper(
                    "docker-credential-sesame", ["get"], cli: cli, input: Data("https://\(host)\n".utf8),
                    environment: provider.environment)
                #expect(answer.status == 0, "\(answer.standardOutput)")
                let json = try #require(JSONValue(parsing: Data(answer.standardOutput.utf8)))
                #expect(json["ServerURL"]?.stringValue == "https://\(host)")
                #expect(json["Username"]?.stringValue == username)
                let isToken = json["Secret"]?.stringValue == login.token.tokenString
                #expect(isToken, "the Secret is not the login's access token")
                let list = try await Self.runHelper("docker-credential-sesame", ["list"], cli: cli)
                #expect(list.standardOutput == #"{"\#(host)":"\#(username)"}"# + "\n", "\(list.standardOutput)")

                // Just after expiry: one refresh.
                let before = try await Time.stats(provider)
                try await Time.advance(cli, provider, by: expiry.timeIntervalSinceNow + 2)
                let second = try await Self.runTool(skopeo, inspect, cli: cli, environment: environment)
                #expect(second.status == 0, "\(second.standardError)")
                let after = try await Time.stats(provider)
                #expect(after.grants - before.grants == 1, "\(after)")
                let renewed = try await Time.storedLogin(cli)
                #expect(renewed.token.tokenString != login.token.tokenString)

                // A mapping for another host: the helper has nothing, skopeo goes unauthenticated and is refused.
                try Self.mapRegistries(cli, ["127.0.0.1:1": .string(provider.name)])
                let accepted = server.counts.accepted
                let unmapped = try await Self.runTool(skopeo, inspect, cli: cli, environment: environment)
                #expect(unmapped.status != 0)
                #expect(unmapped.standardError.lowercased().contains("auth"), "\(unmapped.standardError)")
                #expect(server.counts.accepted == accepted)

                // A mapping to an account with no login: skopeo fails with Sesame's message.
                try Self.mapRegistries(
                    cli, [host: .object(["provider": .string(provider.name), "account": .string("nobody")])])
                let missing = try await Self.runTool(skopeo, inspect, cli: cli, environment: environment)
                #expect(missing.status != 0)
                #expect(missing.standardError.contains("sesame login \(provider.name)"), "\(missing.standardError)")
                #expect(server.counts.accepted == accepted)

                cli.expectNoTokenLeaks(Time.secrets(of: login) + Time.secrets(of: renewed))
            }
        }
    }

    @Test("docker-credential-sesame refuses bad input, tricks and store/erase, never answering with a token")
    func dockerHelperBadInput() async throws {
        try await Time.withProvider(.oidc) { provider in
            let cli = try CLIHarness()
            try await Time.logIn(cli, to: provider)
            let login = try await Time.storedLogin(cli)
            let host = "127.0.0.1:5000"
            try Self.mapRegistries(cli, [host: .string(provider.name)])
            let config = try Data(contentsOf: cli.root.appending(path: "config/sesame/config.json"))
            let cases: [(arguments: [String], input: String, status: Int32?)] = [
                (["get"], #"{"ServerURL":"127.0.0.1:5000"}"#, 65),
                (["get"], "", 65),
                (["get"], String(repeating: "a", count: 100_000), 65),
                (["get"], "user@\(host)", 65),
                (["get"], "https://user:pw@\(host)/v2/", 65),
                (["get"], "\(host)@evil.example", 65),
                (["get"], "127.0.0.1:5000.evil.example", 65),
                (["get"], "127.0.0.1\\@evil.example:5000", 65),
                (["get"], "127.0.0.1:5000?x=1", 65),
                (["get"], "ftp://\(host)", 65),
                (["get"], "127.0.0.1 :5000", 65),
                (["get"], "127.0.0.1.evil.example:5000", 1),
                (["get"], "evil.example/\(host)", 1),
                (["get"], "127.0.0.1:50000", 1),
                (["store"], #"{"ServerURL":"\#(host)","Username":"x","Secret":"not-sesames"}"#, 1),
                (["erase"], host, 1),
                (["frob"], host, 64),
                ([], host, 64),
                (["get", "extra"], host, 64),
            ]
            for (arguments, input, status) in cases {
                let result = try await Self.runHelper(
                    "docker-credential-sesame", arguments, cli: cli, input: Data(input.utf8),
                    environment: provider.environment)
                let label = "\(arguments) with \(input.prefix(60).debugDescription)"
                #expect(result.status == status, "\(label): \(result.standardOutput)")
                #expect(!result.standardOutput.isEmpty, "\(label) said nothing")
                let leaked = Time.secrets(of: login).contains { result.standardOutput.contains($0) }
                #expect(!leaked && !result.standardOutput.contains("Secret"), "\(label) answered with a token")
                if status == 1 && arguments == ["get"] {
                    #expect(result.standardOutput == "credentials not found in native keychain\n", "\(label)")
                }
            }
            // Nothing was changed: the login and the config file are as they were.
            let after = try await Time.storedLogin(cli)
            #expect(after.token == login.token)
            let configAfter = try Data(contentsOf: cli.root.appending(path: "config/sesame/config.json"))
            #expect(configAfter == config)
            let stored = try await cli.storedTokens()
            #expect(!stored.contains("not-sesames"))
        }
    }
}

import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCommandLine

/// The real `git credential fill`, with the credential-helper logic of `sesame git-credential`
/// (in `sesame-git-credential-probe`) as its only helper, over a test's own file store.
@Suite("git credential fill through the git-credential logic")
struct GitCredentialProcessTests {
    struct Setup {
        let directory: URL
        let git: URL
        let probe: URL
        let environment: [String: String]

        init() async throws {
            let candidates = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"]
            guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
                throw MissingGit(
                    description: "git is not installed (looked in \(candidates.joined(separator: ", "))); "
                        + "scripts/bootstrap installs it.")
            }
            git = URL(fileURLWithPath: path)
            probe = try ProcessRunner.builtExecutable("sesame-git-credential-probe")
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-git-credential-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let store = FileCredentialStore(url: directory.appendingPathComponent("credentials.json"))
            for (host, login, token) in [
                ("github.com", "octocat", "gho_fromTheStore0123456789"),
                ("ghe.example.com", "hubot", "gho_enterpriseToken000000"),
            ] {
                try await store.save(
                    StoredCredential(
                        key: CredentialKey(provider: "github", appID: host, account: login),
                        token: AccessToken(tokenString: token, provider: "github", appID: host, userID: login)))
            }
            // A git with no system or global configuration of the person's, that never prompts.
            environment = [
                "HOME": directory.path, "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path,
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
                "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin",
                "SESAME_PROBE_STORE": directory.appendingPathComponent("credentials.json").path,
            ]
        }

        struct MissingGit: Error, CustomStringConvertible { var description: String }

        func fill(_ request: String) async throws -> ProcessResult {
            try await ProcessRunner.run(
                git, ["-c", "credential.helper=", "-c", "credential.helper=!\(probe.path)", "credential", "fill"],
                input: Data(request.utf8), environment: environment, killAfter: .seconds(30))
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    @Test("git gets the stored login and token for a host Sesame has a login for, Enterprise hosts included")
    func knownHosts() async throws {
        let setup = try await Setup()
        defer { setup.remove() }
        let dotCom = try await setup.fill("protocol=https\nhost=github.com\npath=octocat/hello.git\n\n")
        #expect(dotCom.status == 0, "\(dotCom.standardError)")
        #expect(dotCom.standardOutput.contains("username=octocat\npassword=gho_fromTheStore0123456789\n"))
        let enterprise = try await setup.fill("url=https://ghe.example.com/org/repo.git\n\n")
        #expect(enterprise.status == 0, "\(enterprise.standardError)")
        #expect(enterprise.standardOutput.contains("username=hubot\npassword=gho_enterpriseToken000000\n"))
    }

    @Test("for another host, another user or plain http, git gets nothing and (never prompting) gives up")
    func otherHosts() async throws {
        let setup = try await Setup()
        defer { setup.remove() }
        for request in [
            "protocol=https\nhost=gitlab.com\n\n", "protocol=https\nhost=github.com\nusername=somebody\n\n",
            "protocol=http\nhost=github.com\n\n",
        ] {
            let result = try await setup.fill(request)
            #expect(result.status != 0, "\(request)")
            #expect(!result.standardOutput.contains("password="), "\(request)")
            #expect(!result.standardError.contains("gho_"), "\(request)")
        }
    }
}

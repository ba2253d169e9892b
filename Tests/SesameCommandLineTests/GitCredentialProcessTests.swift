import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import Testing

@testable import SesameCommandLine

/// The real `git credential fill` (and `git clone`), with `sesame git-credential` as its only
/// helper, over a test's own file store.
@Suite("git credential fill through sesame git-credential")
struct GitCredentialProcessTests {
    init() { TestProviders.bootstrap() }

    struct Setup {
        let directory: URL
        let git: URL
        let sesame: URL
        let environment: [String: String]

        init() async throws {
            let candidates = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"]
            guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
                throw MissingGit(
                    description: "git is not installed (looked in \(candidates.joined(separator: ", "))); "
                        + "scripts/bootstrap installs it.")
            }
            git = URL(fileURLWithPath: path)
            sesame = try ProcessRunner.builtExecutable("sesame")
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-git-credential-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let store = FileCredentialStore(url: directory.appendingPathComponent("state/sesame/credentials.json"))
            for (host, login, token) in [
                ("github.com", "octocat", "gho_fromTheStore0123456789"),
                ("ghe.example.com", "hubot", "gho_enterpriseToken000000"),
            ] {
                try await store.save(
                    StoredCredential(
                        key: CredentialKey(provider: "github", appID: host, account: login),
                        token: AccessToken(tokenString: token, provider: "github", appID: host, userID: login)))
            }
            // A git with no system or global configuration of the person's, that never prompts; a
            // sesame whose logins are in the test's file store.
            environment = [
                "HOME": directory.path, "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path,
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
                "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin",
                "XDG_STATE_HOME": directory.appendingPathComponent("state").path, "SESAME_STORAGE": "file",
            ]
        }

        struct MissingGit: Error, CustomStringConvertible { var description: String }

        func fill(_ request: String) async throws -> ProcessResult {
            try await ProcessRunner.run(
                git,
                [
                    "-c", "credential.helper=", "-c", "credential.helper=!\(sesame.path) git-credential", "credential",
                    "fill",
                ],
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

    @Test("git clone over HTTP from a local server that demands basic auth gets in with the stored login")
    func cloneWithBasicAuth() async throws {
        let setup = try await Setup()
        defer { setup.remove() }
        let root = setup.directory.appendingPathComponent("served", isDirectory: true)
        try await setup.makeRepository(at: root.appendingPathComponent("hello.git"))

        let server = GitSmartHTTPServer(root: root, git: setup.git, environment: setup.environment)
        try await withStarted({ try server.start() }, stop: { _ in await server.stop() }) { base in
            let host = "127.0.0.1:\(base.port ?? 0)"
            try await setup.store.save(
                StoredCredential(
                    key: CredentialKey(provider: "github", appID: host, account: "octocat"),
                    token: AccessToken(tokenString: server.password, provider: "github", appID: host, userID: "octocat")
                ))

            let url = base.appendingPathComponent("hello.git").absoluteString
            let withoutHelper = try await setup.git(["-c", "credential.helper=", "clone", "-q", url, "refused"])
            #expect(withoutHelper.status != 0)
            #expect(server.authenticatedRequests == 0)

            let clone = try await setup.git([
                "-c", "credential.helper=", "-c", "credential.helper=!\(setup.sesame.path) git-credential", "clone",
                "-q",
                url, "cloned",
            ])
            #expect(clone.status == 0, "\(clone.standardError)")
            let readme = setup.directory.appendingPathComponent("cloned/README")
            #expect((try? String(contentsOf: readme, encoding: .utf8)) == "hello from the test server\n")
            #expect(server.challenges >= 1)
            #expect(server.authenticatedRequests >= 2)
            #expect(!clone.standardError.contains(server.password))
        }
    }
}

extension GitCredentialProcessTests.Setup {
    var store: FileCredentialStore {
        FileCredentialStore(url: directory.appendingPathComponent("state/sesame/credentials.json"))
    }

    /// Runs git in the test's directory with the test's environment.
    func git(_ arguments: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(
            git, ["-C", directory.path] + arguments, environment: environment, killAfter: .seconds(60))
    }

    /// A bare repository with one commit holding README.
    func makeRepository(at bare: URL) async throws {
        let work = directory.appendingPathComponent("work").path
        var steps: [[String]] = [
            ["init", "-q", "--bare", bare.path], ["init", "-q", work],
        ]
        for step in steps {
            let result = try await git(step)
            #expect(result.status == 0, "git \(step): \(result.standardError)")
        }
        try "hello from the test server\n".write(toFile: work + "/README", atomically: true, encoding: .utf8)
        steps = [
            ["-C", work, "add", "README"],
            [
                "-C", work, "-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-q", "-m",
                "first",
            ],
            ["-C", work, "push", "-q", bare.path, "HEAD:refs/heads/main"],
            ["-C", bare.path, "symbolic-ref", "HEAD", "refs/heads/main"],
        ]
        for step in steps {
            let result = try await git(step)
            #expect(result.status == 0, "git \(step): \(result.standardError)")
        }
    }
}

/// git's smart HTTP protocol on 127.0.0.1, through `git http-backend` as CGI, behind HTTP basic
/// authentication that only the stored login passes.
final class GitSmartHTTPServer: Sendable {
    let root: URL
    let git: URL
    let environment: [String: String]
    /// The password (a token) the server accepts for `octocat`.
    let password = "gho_cloneToken" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    private let counts = Locked<(challenges: Int, authenticated: Int)>((0, 0))
    private let server = Locked<HTTPServer?>(nil)

    init(root: URL, git: URL, environment: [String: String]) {
        self.root = root
        self.git = git
        self.environment = environment
    }

    var challenges: Int { counts.withLock { $0.challenges } }
    var authenticatedRequests: Int { counts.withLock { $0.authenticated } }

    func start() throws -> URL {
        let http = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0)) { [self] request in
            await self.answer(request)
        }
        try http.start()
        server.withLock { $0 = http }
        return http.baseURL
    }

    /// Stops the server and lets go of it: its handler holds this object, so keeping it would
    /// make a reference cycle that outlives the test (LeakSanitizer reported it).
    func stop() async { await server.withLock { $0.take() }?.stop() }

    private func answer(_ request: HTTPServerRequest) async -> HTTPServerResponse {
        let expected = "Basic " + Data("octocat:\(password)".utf8).base64EncodedString()
        guard request.headers["Authorization"] == expected else {
            counts.withLock { $0.challenges += 1 }
            return HTTPServerResponse(
                status: 401, headers: ["WWW-Authenticate": "Basic realm=\"test\""], body: Data("no\n".utf8))
        }
        counts.withLock { $0.authenticated += 1 }
        var cgi = environment
        cgi["GIT_PROJECT_ROOT"] = root.path
        cgi["GIT_HTTP_EXPORT_ALL"] = "1"
        cgi["REQUEST_METHOD"] = request.method.rawValue
        cgi["PATH_INFO"] = request.path
        cgi["QUERY_STRING"] =
            request.rawTarget.firstIndex(of: "?").map {
                String(request.rawTarget[request.rawTarget.index(after: $0)...])
            }
            ?? ""
        cgi["CONTENT_TYPE"] = request.headers["Content-Type"] ?? ""
        cgi["CONTENT_LENGTH"] = String(request.body.count)
        cgi["REMOTE_USER"] = "octocat"
        cgi["REMOTE_ADDR"] = "127.0.0.1"
        if let encoding = request.headers["Content-Encoding"] { cgi["HTTP_CONTENT_ENCODING"] = encoding }
        if let protocolHeader = request.headers["Git-Protocol"] { cgi["GIT_PROTOCOL"] = protocolHeader }
        guard let output = try? await Self.runRaw(git, ["http-backend"], input: request.body, environment: cgi)
        else { return HTTPServerResponse(status: 500) }
        return Self.response(fromCGI: output)
    }

    /// Runs a child on threads of its own (never the cooperative pool) and returns its standard
    /// output as bytes: pack data is binary, so it is not decoded as text.
    static func runRaw(
        _ executable: URL, _ arguments: [String], input: Data, environment: [String: String]
    )
        async throws -> Data
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let output = Pipe()
                    let error = Pipe()
                    let standardInput = Pipe()
                    let process = ChildProcess(
                        executableURL: executable, arguments: arguments, environment: environment,
                        standardInput: .pipe(standardInput), standardOutput: .pipe(output),
                        standardError: .pipe(error))
                    try process.run()
                    // write(2), not FileHandle.write: a child that stops reading must not trap the tests.
                    let writer = Thread {
                        StandardStreams.write(Array(input), to: standardInput.fileHandleForWriting.fileDescriptor)
                        try? standardInput.fileHandleForWriting.close()
                    }
                    writer.start()
                    let errorReader = Thread { _ = error.fileHandleForReading.readDataToEndOfFile() }
                    errorReader.start()
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: data)
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    /// A CGI answer: header lines (`Status: 200 OK`, `Content-Type: …`), a blank line, the body.
    static func response(fromCGI output: Data) -> HTTPServerResponse {
        let bytes = [UInt8](output)
        var end = 0
        var bodyStart = bytes.count
        while end < bytes.count {
            if bytes[end] == 0x0A, end + 1 < bytes.count, bytes[end + 1] == 0x0A {
                bodyStart = end + 2
                break
            }
            if bytes[end] == 0x0D, end + 3 < bytes.count, bytes[end + 1] == 0x0A, bytes[end + 2] == 0x0D,
                bytes[end + 3] == 0x0A
            {
                bodyStart = end + 4
                break
            }
            end += 1
        }
        var status = 200
        var headers = HTTPHeaders()
        for line in String(decoding: bytes[..<end], as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name.lowercased() == "status" {
                status = Int(value.prefix(3)) ?? 500
            } else {
                headers.add(name: name, value: value)
            }
        }
        return HTTPServerResponse(status: status, headers: headers, body: Data(bytes[min(bodyStart, bytes.count)...]))
    }
}

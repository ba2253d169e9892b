import Foundation
import Sesame
import SesameCommandLine
import Testing

@Suite("git's credential-helper protocol")
struct GitCredentialTests {
    init() { TestProviders.bootstrap() }

    @Test("a get request's key=value lines are read up to the blank line")
    func parseGet() throws {
        let input = "protocol=https\nhost=github.com\npath=octocat/hello.git\nusername=octocat\n\nhost=ignored\n"
        let request = try #require(try GitCredentialRequest.parse(operation: "get", input: input))
        #expect(request.operation == .get)
        #expect(request.protocol == "https")
        #expect(request.host == "github.com")
        #expect(request.path == "octocat/hello.git")
        #expect(request.username == "octocat")
        #expect(request.password == nil)
    }

    @Test("the end of input ends a request as a blank line does, and CRLF lines are read")
    func parseEOF() throws {
        let request = try #require(
            try GitCredentialRequest.parse(operation: "get", input: "protocol=https\r\nhost=ghe.example.com:8443"))
        #expect(request.host == "ghe.example.com:8443")
        #expect(request.normalizedHost == "ghe.example.com:8443")
        #expect(try GitCredentialRequest.parse(operation: "get", input: "")?.host == nil)
    }

    @Test("values may contain '=', unknown and multi-valued keys are kept aside, and url= fills the parts")
    func parseOthers() throws {
        let input = """
            capability[]=authtype
            wwwauth[]=Basic realm="GitHub"
            wwwauth[]=Bearer x=y
            url=https://octocat@GitHub.com:443/o/r.git
            password=a=b=c
            """
        let request = try #require(try GitCredentialRequest.parse(operation: "store", input: input))
        #expect(request.operation == .store)
        #expect(request.password == "a=b=c")
        #expect(request.protocol == "https")
        #expect(request.host == "GitHub.com:443")
        #expect(request.normalizedHost == "github.com")
        #expect(request.username == "octocat")
        #expect(request.path == "o/r.git")
        #expect(request.otherAttributes.map(\.key) == ["capability[]", "wwwauth[]", "wwwauth[]"])
        #expect(request.otherAttributes[2].value == "Bearer x=y")
        #expect(!request.description.contains("a=b=c"))
        var dumped = ""
        dump(request, to: &dumped)
        #expect(dumped.contains("octocat") && !dumped.contains("a=b=c"))
    }

    @Test("an operation the protocol does not define is ignored, not an error")
    func unknownOperation() throws {
        #expect(try GitCredentialRequest.parse(operation: "capability", input: "protocol=https\n") == nil)
    }

    @Test(
        "input git would not send is refused, saying what was wrong",
        arguments: [
            ("protocol=https\nno equals sign here\n", "line 2"),
            ("=value\n", "empty key"),
            ("host=a\u{0}b\n", "NUL"),
            (String(repeating: "k=v\n", count: 20_000), "larger than"),
        ])
    func malformed(input: String, says: String) {
        let error = #expect(throws: GitCredentialError.self) {
            _ = try GitCredentialRequest.parse(operation: "get", input: input)
        }
        #expect(error?.description.contains(says) == true)
    }

    private static let login = GitCredentialLogin(
        username: "octocat", token: "gho_secret", expiry: Date(timeIntervalSince1970: 1_900_000_000))

    private func answer(
        _ input: String, operation: String = "get", known: String = "github.com"
    ) async throws
        -> GitCredentialAnswer?
    {
        let request = try #require(try GitCredentialRequest.parse(operation: operation, input: input))
        return await GitCredential.answer(to: request) { host, _ in host == known ? Self.login : nil }
    }

    @Test("get for a host with a login answers username, password and its expiry")
    func answersKnownHost() async throws {
        let answer = try #require(try await answer("protocol=https\nhost=github.com\n"))
        #expect(
            answer.formatted == "username=octocat\npassword=gho_secret\npassword_expiry_utc=1900000000\n")
        #expect(!answer.description.contains("gho_secret"))
        #expect(!Self.login.description.contains("gho_secret"))
    }

    @Test(
        "no answer for another host, another user, plain http, or store and erase",
        arguments: [
            ("protocol=https\nhost=gitlab.com\n", "get"),
            ("protocol=https\nhost=github.com\nusername=hubot\n", "get"),
            ("protocol=http\nhost=github.com\n", "get"),
            ("host=github.com\n", "get"),
            ("protocol=https\nhost=github.com\nusername=octocat\npassword=x\n", "store"),
            ("protocol=https\nhost=github.com\nusername=octocat\npassword=x\n", "erase"),
        ])
    func noAnswer(input: String, operation: String) async throws {
        #expect(try await answer(input, operation: operation) == nil)
    }

    @Test("plain http is answered only for a loopback host (the local emulator)")
    func loopback() async throws {
        #expect(try await answer("protocol=http\nhost=127.0.0.1:8765\n", known: "127.0.0.1:8765") != nil)
        #expect(GitCredential.isLoopback("[::1]:80"))
        #expect(GitCredential.isLoopback("localhost"))
        #expect(!GitCredential.isLoopback("127.0.0.1.evil.com"))
    }

    @Test(
        "a stored token or user name with a line break is never written out (it would inject attributes)",
        arguments: [
            ("octocat", "gho_x\nusername=evil"), ("octocat", "gho_x\r\nusername=evil"),
            // "\n" and a combining mark after it are one Character, and still end git's line.
            ("octocat", "gho_x\n\u{301}username=evil"), ("octo\n\u{610}cat", "gho_x"), ("octocat", "gho_\u{0}x"),
        ])
    func injection(username: String, token: String) async throws {
        let request = try #require(
            try GitCredentialRequest.parse(operation: "get", input: "protocol=https\nhost=github.com\n"))
        let answer = await GitCredential.answer(to: request) { _, _ in
            GitCredentialLogin(username: username, token: token)
        }
        #expect(answer == nil)
    }

    @Test("lines and keys end at the bytes git sends, whatever follows them")
    func combiningMarks() async throws {
        // A combining mark (U+0610, U+0301) after "=" or "\n" makes one Character with it; git's
        // protocol is bytes, so the key still ends at the "=" and the line at the "\n".
        let request = try #require(
            try GitCredentialRequest.parse(
                operation: "get", input: "protocol=https\nhost=github.com\nusername=\u{610}octocat\n\u{301}x=y\n"))
        #expect(request.protocol == "https")
        #expect(request.host == "github.com")
        #expect(request.username == "\u{610}octocat")
        #expect(request.otherAttributes.map(\.key) == ["\u{301}x"])
        // Answered with the user name asked for, its bytes right after "username=".
        let answer = try #require(
            await GitCredential.answer(to: request) { _, username in
                GitCredentialLogin(username: username ?? "octocat", token: "gho_secret")
            })
        #expect(Array(answer.formatted.utf8.prefix(11)) == Array("username=\u{610}".utf8))
        #expect(answer.formatted == "username=\u{610}octocat\npassword=gho_secret\n")
    }

    @Test(
        "the stored login for a host: the wanted user's, else the preferred account, else the newest; never one needing a login"
    )
    func storedLogin() async throws {
        func credential(
            _ host: String, _ login: String, saved: TimeInterval, needsLogin: Bool = false
        )
            -> StoredCredential
        {
            StoredCredential(
                key: CredentialKey(provider: "github", appID: host, account: login),
                token: AccessToken(tokenString: "t-\(login)", provider: "github", appID: host, userID: login),
                savedAt: Date(timeIntervalSince1970: saved), needsLogin: needsLogin)
        }
        let store = InMemoryCredentialStore([
            credential("github.com", "octocat", saved: 100), credential("github.com", "hubot", saved: 200),
            credential("github.com", "stale", saved: 300, needsLogin: true),
            credential("ghe.example.com", "alice", saved: 50),
        ])
        func login(_ host: String, _ username: String?, preferred: String? = nil) async throws -> String? {
            try await GitCredential.storedLogin(
                in: store, provider: "github", host: host, username: username, preferredAccount: preferred)?
                .token.userID
        }
        #expect(try await login("github.com", nil) == "hubot")
        #expect(try await login("GitHub.com", "OctoCat") == "octocat")
        #expect(try await login("github.com", nil, preferred: "octocat") == "octocat")
        #expect(try await login("github.com", "stale") == nil)
        #expect(try await login("ghe.example.com", nil) == "alice")
        #expect(try await login("gitlab.com", nil) == nil)
        let stored = try #require(
            try await GitCredential.storedLogin(in: store, provider: "github", host: "github.com", username: "hubot"))
        #expect(GitCredentialLogin(stored).token == "t-hubot")
    }
}

import Foundation
import Sesame
import Testing

@testable import SesameCurl

/// A TLS server that a child process runs on 127.0.0.1, with a throwaway certificate in a
/// temporary directory of its own. ``stop()`` ends it and removes the directory.
final class TLSServer: Sendable {
    let port: Int
    let certificatePath: String
    /// Where the certificate, its key, and anything the server serves or logs are.
    let directory: URL
    private let process: ChildProcess

    /// Makes the directory (`name`-<UUID>) and a certificate with its key in it, lets `prepare`
    /// fill the directory, then starts the server with `start` (given the port, the certificate,
    /// the key and the directory), again on another port if it exits first (see
    /// `RawListener.startServer`).
    init(
        name: String, prepare: (URL) throws -> Void = { _ in },
        start: (_ port: Int, _ certificate: String, _ key: String, _ directory: URL) async throws -> ChildProcess
    ) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("key.pem").path
        try await OpenSSLServer.makeCertificate(certificatePath: certificatePath, keyPath: keyPath)
        try prepare(directory)
        let (certificate, directory) = (certificatePath, directory)
        let started = try await RawListener.startServer { try await start($0, certificate, keyPath, directory) }
        port = started.port
        process = started.process
    }

    func url(_ path: String = "/") -> URL { URL(string: "https://127.0.0.1:\(port)\(path)")! }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// `openssl s_server`, answering `GET /` with its status page; and the certificates of the
/// other TLS servers.
enum OpenSSLServer {
    static let executable = "/usr/bin/openssl"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    static func start() async throws -> TLSServer {
        try await TLSServer(name: "sesame-tls") { port, certificate, key, _ in
            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: Self.executable),
                arguments: [
                    "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-www", "-quiet",
                ], standardInput: .null, standardOutput: .null, standardError: .null, diesWithParent: true)
            try await process.start()
            return process
        }
    }

    /// Writes a throwaway self-signed EC certificate for 127.0.0.1, valid for a day, and its key.
    static func makeCertificate(certificatePath: String, keyPath: String) async throws {
        try await run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", keyPath, "-out",
            certificatePath,
        ])
    }

    static func run(_ arguments: [String]) async throws {
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: executable), arguments: arguments, standardOutput: .null,
            standardError: .null, diesWithParent: true)
        try await process.start()
        guard await process.exitStatus() == 0 else { throw POSIXError(.EINVAL) }
    }

}

@Suite(
    "CurlTransport TLS",
    .serialized,
    .enabled(if: OpenSSLServer.available, "needs the openssl command (Debian package openssl, in scripts/bootstrap)"))
struct CurlTLSTests {
    @Test("a certificate no trusted CA signed is refused by default, as a rejected certificate that is not retried")
    func untrustedByDefault() async throws {
        let server = try await OpenSSLServer.start()
        defer { server.stop() }
        let error = try await #require(throws: TransportError.self) {
            try await CurlTransport().send(HTTPRequest(url: server.url()))
        }
        #expect(error.kind == .certificateRejected)
        #expect(!error.isTransient)
        #expect(error.message.contains("libcurl error 60"))
        #expect(error.message.localizedCaseInsensitiveContains("certificate"))
        #expect(error.message.contains("Trying again will not help"))
        // Not `server` (the CLI's "try again in a little while", exit 75): `invalid`, not retried.
        let classified = AuthError.transport(error)
        #expect(classified.category == .invalid)
        #expect(classified.recoveryTactic != .retry && classified.recoveryTactic != .retryAfterBackoff)
    }

    @Test("trusting the server's CA file lets the request through, host name still checked")
    func trustedCertificateAuthority() async throws {
        let server = try await OpenSSLServer.start()
        defer { server.stop() }
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: server.certificatePath)))
        let response = try await transport.send(HTTPRequest(url: server.url()))
        #expect(response.status == 200)
    }

    @Test("a hashed CA directory (SSL_CERT_DIR's form) is trusted as libcurl's CAPATH")
    func trustedCertificateDirectory() async throws {
        let server = try await OpenSSLServer.start()
        defer { server.stop() }
        let directory = server.directory.appending(path: "trusted")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: server.certificatePath, toPath: directory.appending(path: "ca.pem").path)
        try await OpenSSLServer.run(["rehash", directory.path])
        let untrusted = try await #require(throws: TransportError.self) {
            try await CurlTransport(
                configuration: .init(tlsVerification: .certificateAuthorities(file: nil, directory: nil))
            )
            .send(HTTPRequest(url: server.url()))
        }
        #expect(untrusted.kind == .certificateRejected)
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: nil, directory: directory.path)))
        #expect(try await transport.send(HTTPRequest(url: server.url())).status == 200)
    }

    @Test("peerCertificates reads the chain of a server whose certificate is not trusted, without trusting it")
    func peerCertificates() async throws {
        let server = try await OpenSSLServer.start()
        defer { server.stop() }
        let transport = CurlTransport()
        let chain = try await transport.peerCertificates(of: server.url("/path?access_token=secret"))
        let leaf = try #require(chain.first)
        #expect(leaf.subject == "CN = 127.0.0.1", "\(chain)")
        #expect(leaf.issuer == "CN = 127.0.0.1", "\(chain)")
        #expect(leaf.alternativeNames.contains("127.0.0.1"), "\(chain)")
        // Real requests are still refused: the diagnosis changed nothing of the transport's checks.
        let error = try await #require(throws: TransportError.self) {
            try await transport.send(HTTPRequest(url: server.url()))
        }
        #expect(error.kind == .certificateRejected)
    }

    @Test("dangerouslyAcceptAnyCertificate accepts the self-signed certificate")
    func verificationDisabled() async throws {
        let server = try await OpenSSLServer.start()
        defer { server.stop() }
        let transport = CurlTransport(configuration: .init(tlsVerification: .dangerouslyAcceptAnyCertificate))
        let response = try await transport.send(HTTPRequest(url: server.url()))
        #expect(response.status == 200)
        #expect(CurlTransport.TLSVerification.dangerouslyAcceptAnyCertificate.description.contains("DISABLED"))
    }
}

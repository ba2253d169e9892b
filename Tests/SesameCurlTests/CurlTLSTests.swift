import Foundation
import Sesame
import Testing

@testable import SesameCurl

/// `openssl s_server` on 127.0.0.1 with a throwaway self-signed certificate, answering `GET /`
/// with its status page.
final class OpenSSLServer: Sendable {
    static let executable = "/usr/bin/openssl"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    let port: Int
    let certificatePath: String
    private let directory: URL
    private let process: ChildProcess

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("key.pem").path
        try await Self.makeCertificate(certificatePath: certificatePath, keyPath: keyPath)
        let certificate = certificatePath
        let started = try await RawListener.startServer { port in
            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: Self.executable),
                arguments: [
                    "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", keyPath, "-www",
                    "-quiet",
                ], standardInput: .null, standardOutput: .null, standardError: .null, diesWithParent: true)
            try await process.start()
            return process
        }
        port = started.port
        process = started.process
    }

    var url: URL { URL(string: "https://127.0.0.1:\(port)/")! }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Writes a throwaway self-signed EC certificate for 127.0.0.1, valid for a day, and its key.
    static func makeCertificate(certificatePath: String, keyPath: String) async throws {
        try await run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", keyPath, "-out",
            certificatePath,
        ])
    }

    private static func run(_ arguments: [String]) async throws {
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
        let server = try await OpenSSLServer()
        defer { server.stop() }
        let error = try await #require(throws: TransportError.self) {
            try await CurlTransport().send(HTTPRequest(url: server.url))
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
        let server = try await OpenSSLServer()
        defer { server.stop() }
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: server.certificatePath)))
        let response = try await transport.send(HTTPRequest(url: server.url))
        #expect(response.status == 200)
    }

    @Test("dangerouslyAcceptAnyCertificate accepts the self-signed certificate")
    func verificationDisabled() async throws {
        let server = try await OpenSSLServer()
        defer { server.stop() }
        let transport = CurlTransport(configuration: .init(tlsVerification: .dangerouslyAcceptAnyCertificate))
        let response = try await transport.send(HTTPRequest(url: server.url))
        #expect(response.status == 200)
        #expect(CurlTransport.TLSVerification.dangerouslyAcceptAnyCertificate.description.contains("DISABLED"))
    }
}

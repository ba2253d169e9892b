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

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("key.pem").path
        try Self.makeCertificate(certificatePath: certificatePath, keyPath: keyPath)
        port = try RawListener.unusedPort()
        process = ChildProcess(
            executableURL: URL(fileURLWithPath: Self.executable),
            arguments: [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificatePath, "-key", keyPath, "-www",
                "-quiet",
            ], standardInput: .null, standardOutput: .null, standardError: .null, diesWithParent: true)
        try process.run()
        // Ready when it accepts a connection (it shrugs off the aborted handshake).
        for _ in 0..<300 {
            if Self.accepts(port: port) { return }
            usleep(10_000)
        }
        stop()
        throw POSIXError(.ETIMEDOUT)
    }

    var url: URL { URL(string: "https://127.0.0.1:\(port)/")! }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Writes a throwaway self-signed EC certificate for 127.0.0.1, valid for a day, and its key.
    static func makeCertificate(certificatePath: String, keyPath: String) throws {
        try run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", keyPath, "-out",
            certificatePath,
        ])
    }

    private static func run(_ arguments: [String]) throws {
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: executable), arguments: arguments, standardOutput: .null,
            standardError: .null, diesWithParent: true)
        try process.run()
        guard process.waitUntilExit() == 0 else { throw POSIXError(.EINVAL) }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

@Suite(
    "CurlTransport TLS",
    .serialized,
    .enabled(if: OpenSSLServer.available, "needs the openssl command (Debian package openssl, in scripts/bootstrap)"))
struct CurlTLSTests {
    @Test("a certificate no trusted CA signed is refused by default, as a tlsFailure the core does not retry")
    func untrustedByDefault() async throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        let error = try await #require(throws: TransportError.self) {
            try await CurlTransport().send(HTTPRequest(url: server.url))
        }
        #expect(error.kind == .tlsFailure)
        #expect(error.message.contains("libcurl error 60"))
        #expect(error.message.localizedCaseInsensitiveContains("certificate"))
        #expect(AuthError.transport(error).category == .server)
    }

    @Test("trusting the server's CA file lets the request through, host name still checked")
    func trustedCertificateAuthority() async throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: server.certificatePath)))
        let response = try await transport.send(HTTPRequest(url: server.url))
        #expect(response.status == 200)
    }

    @Test("dangerouslyAcceptAnyCertificate accepts the self-signed certificate")
    func verificationDisabled() async throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        let transport = CurlTransport(configuration: .init(tlsVerification: .dangerouslyAcceptAnyCertificate))
        let response = try await transport.send(HTTPRequest(url: server.url))
        #expect(response.status == 200)
        #expect(CurlTransport.TLSVerification.dangerouslyAcceptAnyCertificate.description.contains("DISABLED"))
    }
}

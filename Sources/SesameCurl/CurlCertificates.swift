internal import CCurl
import Foundation
import Sesame

extension CurlTransport {
    /// One certificate of the chain a server (or a TLS-inspecting proxy in its place) presented.
    public struct PeerCertificate: Sendable, Hashable, CustomStringConvertible {
        /// Whom it was issued to, as OpenSSL writes a name: `CN = mitmproxy, O = mitmproxy`.
        public var subject: String
        /// Who issued it, written the same way.
        public var issuer: String
        /// Its `subjectAltName` entries as libcurl gives them (`DNS:example.com, IP Address:127.0.0.1`),
        /// empty when it has none.
        public var alternativeNames: String

        /// Creates a certificate description.
        public init(subject: String, issuer: String, alternativeNames: String = "") {
            self.subject = subject
            self.issuer = issuer
            self.alternativeNames = alternativeNames
        }

        public var description: String { "subject \"\(subject)\", issued by \"\(issuer)\"" }
    }

    /// The certificate chain that the host of `url` presents through this transport's proxy
    /// settings, leaf first, whether or not it would be trusted: for saying *why* a request was
    /// refused with `TransportError.Kind.certificateRejected` (`sesame doctor` names the chain's
    /// issuer, which tells a TLS-inspecting proxy's CA from the provider's).
    ///
    /// The connection it makes checks no certificate, so it only connects and completes the TLS
    /// handshake (libcurl's `CURLOPT_CONNECT_ONLY`): no request, header or token is ever sent
    /// over it, and it is closed at once. It runs on a thread of its own, bounded by the
    /// configuration's connect timeout.
    ///
    /// - Throws: `TransportError` when no TLS handshake could be made (no `https` URL, the
    ///   host or proxy unreachable).
    public func peerCertificates(of url: URL) async throws -> [PeerCertificate] {
        let configuration = self.configuration
        return try await onOwnThread { () throws(TransportError) -> [PeerCertificate] in
            try Self.fetchPeerCertificates(url, configuration: configuration)
        }
    }

    private static func fetchPeerCertificates(
        _ url: URL, configuration: Configuration
    ) throws(TransportError) -> [PeerCertificate] {
        guard url.scheme?.lowercased() == "https", let host = url.host else {
            throw TransportError(
                kind: .invalidRequest, message: "Only an https address has certificates to read.", host: url.host)
        }
        if let failure = CurlGlobal.failure { throw TransportError(kind: .other, message: failure, host: host) }
        let easy = CurlEasyHandle()
        let handle = easy.raw
        var diagnosis = configuration
        diagnosis.tlsVerification = .dangerouslyAcceptAnyCertificate  // this handle only, and it sends nothing
        var result = CurlEngine.setNetworkOptions(handle, diagnosis)
        func set(_ option: CURLoption, _ value: Int) {
            if result == CURLE_OK { result = sesame_easy_setopt_long(handle, option, value) }
        }
        // Only scheme, host and port: the path and query (where a token could be) are not needed.
        var origin = URLComponents()
        origin.scheme = "https"
        origin.host = host
        origin.port = url.port
        if result == CURLE_OK {
            result = sesame_easy_setopt_string(handle, CURLOPT_URL, origin.string ?? "https://\(host)/")
        }
        if result == CURLE_OK {
            result = sesame_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(easy.errorBuffer))
        }
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_CONNECT_ONLY, 1)
        set(CURLOPT_CERTINFO, 1)
        set(CURLOPT_CONNECTTIMEOUT_MS, CurlTransfer.milliseconds(configuration.connectTimeout))
        if result == CURLE_OK { result = sesame_curl_easy_perform(handle) }
        guard result == CURLE_OK else {
            let detail = easy.errorMessage ?? String(cString: sesame_curl_easy_strerror(result))
            throw TransportError(
                kind: CurlErrors.kind(of: result),
                message: "The TLS handshake with \(host) failed: \(detail) (libcurl error \(result.rawValue)).",
                host: host)
        }
        guard let info = sesame_easy_getinfo_certinfo(handle) else { return [] }
        return (0..<Int(info.pointee.num_of_certs)).map { index in
            var fields: [String: String] = [:]
            var item = sesame_certinfo_fields(info, Int32(index))
            while let node = item {
                let text = String(cString: node.pointee.data)
                if let colon = text.firstIndex(of: ":") {
                    fields[String(text[..<colon])] = String(text[text.index(after: colon)...])
                }
                item = node.pointee.next
            }
            return PeerCertificate(
                subject: fields["Subject"] ?? "", issuer: fields["Issuer"] ?? "",
                alternativeNames: fields["X509v3 Subject Alternative Name"] ?? "")
        }
    }
}

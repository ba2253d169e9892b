import Foundation
import Sesame
import SesameCurl

/// `sesame doctor`'s transport for one provider instance: a `CurlTransport` with the instance's
/// ``NetworkSettings``, which can say who presented a certificate it refused.
final class DiagnosingTransport: HTTPTransport {
    let curl: CurlTransport
    let network: NetworkSettings
    let environment: [String: String]

    init(curl: CurlTransport, network: NetworkSettings, environment: [String: String]) {
        self.curl = curl
        self.network = network
        self.environment = environment
    }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { try await curl.send(request) }

    /// The doctor line for `url`, whose certificate was refused with `error`: the chain's subject
    /// and issuer (read over a connection that sends nothing), whether a TLS-inspecting proxy
    /// seems to be in the way, and the setting that makes Sesame trust its CA.
    func diagnose(label: String, url: URL, error: TransportError) async -> DoctorLine {
        let chain: [CurlTransport.PeerCertificate]
        do {
            chain = try await curl.peerCertificates(of: url)
        } catch {
            return DoctorLine(
                .problem,
                "\(label) at \(url.absoluteString) presents a certificate that is not trusted, and it could not be "
                    + "read again (\(error.sentence)).", fix: NetworkSettings.certificateFix)
        }
        return CertificateDiagnosis(
            chain: chain, failure: error.message, host: url.host ?? "", trusted: trusted, proxy: proxyInUse(for: url)
        ).line(label: label, url: url)
    }

    /// What the refused chain was checked against, for the sentence.
    private var trusted: String {
        guard let caBundle = network.caBundle else {
            return network.caDirectory.map { "the CA certificates in \($0.value) (\($0.source))" }
                ?? "the system's CA certificates"
        }
        return "\(caBundle.value) (\(caBundle.source))"
    }

    /// The proxy requests to `url` go through, as libcurl picks it, or `nil` for none.
    private func proxyInUse(for url: URL) -> String? {
        if let proxy = network.proxy {
            return proxy.value == "none" || Self.exempt(url.host ?? "", by: network.noProxy)
                ? nil : CurlTransport.ProxyPolicy.url(proxy.value).description
        }
        let names = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
        guard let value = names.lazy.compactMap({ self.environment[$0] }).first(where: { !$0.isEmpty }) else {
            return nil
        }
        let noProxy = environment["no_proxy"] ?? environment["NO_PROXY"] ?? ""
        return Self.exempt(url.host ?? "", by: noProxy) ? nil : CurlTransport.ProxyPolicy.url(value).description
    }

    /// Whether `host` is in the `NO_PROXY` list `list`, by its plain entries (`*`, a host, a
    /// domain and its subdomains).
    static func exempt(_ host: String, by list: String) -> Bool {
        let host = host.lowercased()
        return list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.contains {
            entry in
            let entry = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            return entry == "*" || host == entry || host.hasSuffix("." + entry)
        }
    }
}

/// What a refused certificate chain says about who is in the way, as `sesame doctor` words it.
struct CertificateDiagnosis: Sendable, Hashable {
    /// The chain presented, leaf first.
    var chain: [CurlTransport.PeerCertificate]
    /// libcurl's message about the refusal.
    var failure: String
    /// The host the request was for.
    var host: String
    /// What the chain was checked against, in words.
    var trusted: String
    /// The proxy in use, in words, or `nil`.
    var proxy: String?

    /// Names of TLS-inspecting products and corporate proxies, as they appear in their CAs'
    /// names, lower case.
    static let interceptors = [
        "mitmproxy", "zscaler", "fortinet", "fortigate", "palo alto", "blue coat", "bluecoat", "symantec web",
        "netskope", "sophos", "forcepoint", "websense", "cisco umbrella", "checkpoint", "check point", "mcafee web",
        "kaspersky", "avast", "eset", "bitdefender", "charles proxy", "fiddler", "burp", "squid", "proxy",
        "inspection", "intercept",
    ]

    /// Whether libcurl refused the chain for its CA (rather than its host name or dates).
    var unknownIssuer: Bool {
        let text = failure.lowercased()
        return ["local issuer", "self-signed", "self signed", "unable to get issuer", "unknown ca"].contains {
            text.contains($0)
        }
    }

    /// Whether libcurl refused the certificate because it names another host.
    var otherHost: Bool {
        let text = failure.lowercased()
        return text.contains("subject name") || text.contains("does not match") || text.contains("hostname mismatch")
    }

    /// The CA at the top of the chain: the last certificate's issuer.
    var rootIssuer: String { chain.last?.issuer ?? "" }

    /// The interception product the chain's names point to, if any.
    var interceptor: String? {
        let names = chain.flatMap { [$0.issuer, $0.subject] }.joined(separator: " ").lowercased()
        return Self.interceptors.first { names.contains($0) }
    }

    /// Whether the chain looks like a TLS-inspecting proxy's rather than the server's own.
    var looksIntercepted: Bool { interceptor != nil || (unknownIssuer && proxy != nil) }

    func line(label: String, url: URL) -> DoctorLine {
        guard let leaf = chain.first else {
            return DoctorLine(
                .problem, "\(label) at \(url.absoluteString) presents a certificate that is not trusted (\(failure)).",
                fix: NetworkSettings.certificateFix)
        }
        var text =
            "\(label) at \(url.absoluteString) presents a certificate that is not trusted: subject \"\(leaf.subject)\""
            + ", issued by \"\(leaf.issuer)\""
        if chain.count > 1 { text += " (top of the chain: \"\(rootIssuer)\")" }
        if unknownIssuer {
            text += "; that issuer is not among the CAs trusted here, \(trusted)"
        } else if otherHost {
            text += "; it is not issued for \(host)"
        }
        let via = proxy.map { " through the proxy \($0)" } ?? ""
        if looksIntercepted {
            let product = interceptor.map { " (\($0))" } ?? ""
            text += ". This looks like a TLS-inspecting proxy\(product)\(via) presenting its own certificate in the "
            text += "provider's place"
        } else if unknownIssuer {
            text += ". It may be a private CA, or a TLS-inspecting proxy\(via)"
        }
        text += "."
        let issuer = unknownIssuer ? rootIssuer : leaf.issuer
        let fix =
            otherHost && !unknownIssuer
            ? "check the configured address: the server answers as another host"
            : "if you trust \"\(issuer)\", set ca_bundle in the config file (or SESAME_CA_BUNDLE, or SSL_CERT_FILE) "
                + "to a PEM file of its CA certificate (ask whoever runs the proxy for it); otherwise do not log in "
                + "through this network"
        return DoctorLine(.problem, text, fix: fix)
    }
}

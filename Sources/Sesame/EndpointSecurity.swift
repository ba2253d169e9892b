import Foundation

/// Which endpoint URLs a provider may talk to: `https`, or plain `http` only to a loopback
/// address (RFC 9700 §2.6 and RFC 8252 §8.3), unless the user names the host as an exception.
///
/// Every provider checks its configured and discovered endpoints with
/// ``check(_:role:provider:allowingInsecureHosts:)`` so that the rule is the same everywhere:
/// a typo (`http://graph.facebook.com`) or a hostile discovery document cannot send codes and
/// tokens in clear text.
public enum EndpointSecurity {
    /// Whether `host` is a loopback address: `localhost` (and names under `.localhost`), any
    /// address in 127.0.0.0/8, or `::1` (with or without brackets).
    public static func isLoopback(_ host: String) -> Bool {
        // The common case, a dotted quad such as 127.0.0.1, read from the bytes without copying:
        // every Graph call to a local server asks (it was a tenth of the provider stack's time).
        if let quad = dottedQuadIsLoopback(host.utf8) { return quad }
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host = String(host.dropLast()) }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        if octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }), octets[0] == "127" { return true }
        var address = in6_addr()
        guard inet_pton(AF_INET6, host, &address) == 1 else { return false }
        return withUnsafeBytes(of: &address) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }

    /// Whether `host` (a dotted quad of one to three digits a part, each at most 255, with an
    /// optional final dot) is in 127.0.0.0/8; `nil` when it is not such a quad, for the general
    /// reading to decide.
    private static func dottedQuadIsLoopback(_ host: String.UTF8View) -> Bool? {
        var parts = 0
        var digits = 0
        var value = 0
        var first = 0
        var sawFinalDot = false
        for byte in host {
            guard !sawFinalDot else { return nil }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                digits += 1
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                guard digits <= 3, value <= 255 else { return nil }
            case UInt8(ascii: "."):
                guard digits > 0 else { return nil }
                if parts == 0 { first = value }
                parts += 1
                digits = 0
                value = 0
                if parts == 4 { sawFinalDot = true }
            default:
                return nil
            }
        }
        if digits > 0 {
            if parts == 0 { first = value }
            parts += 1
        }
        guard parts == 4 else { return nil }
        return first == 127
    }

    /// Checks that `url` may be used for `role` (such as "the OpenID issuer"): an `https` URL, or
    /// an `http` one whose host is loopback or listed in `allowingInsecureHosts` (host names,
    /// compared without regard to case: the user's explicit opt-in, by name).
    ///
    /// - Throws: `AuthError` (category `invalid`) naming the URL, the rule and the opt-in.
    public static func check(
        _ url: URL, role: String, provider: ProviderID?, allowingInsecureHosts: Set<String> = []
    ) throws(AuthError) {
        let scheme = url.scheme?.lowercased()
        if scheme == "https" { return }
        guard scheme == "http", let host = url.host, !host.isEmpty else {
            throw AuthError(
                category: .invalid,
                message: "\(role) '\(redactedForDisplay(url))' is not an https URL; Sesame talks to providers over "
                    + "https only (plain http is allowed to loopback addresses).",
                provider: provider)
        }
        if isLoopback(host) { return }
        let allowed = Set(allowingInsecureHosts.map { $0.lowercased() })
        if allowed.contains(host.lowercased()) { return }
        throw AuthError(
            category: .invalid,
            message: "\(role) '\(redactedForDisplay(url))' uses plain http to \(host), which would send codes and "
                + "tokens unencrypted; use https. Plain http is accepted only to loopback addresses, or to a host "
                + "named as an insecure exception (allowing insecure hosts: \(host)).",
            provider: provider)
    }

    /// The URL without its query and fragment, which may carry secrets.
    private static func redactedForDisplay(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "(a URL)" }
        components.query = nil
        components.fragment = nil
        components.password = nil
        return components.string ?? "(a URL)"
    }
}

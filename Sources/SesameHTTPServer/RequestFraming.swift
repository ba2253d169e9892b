import Foundation
import Sesame

/// The checks of a request's framing the server makes before it reads a body.
enum RequestFraming {
    /// What libmicrohttpd lets through but RFC 9112 says a server must refuse, because a proxy
    /// in front could read the request differently (request smuggling) or the body's length
    /// cannot be known: a method that is not a token, differing `Content-Length` fields, both
    /// `Content-Length` and `Transfer-Encoding`, a `Transfer-Encoding` other than a single
    /// `chunked` (§6.3: the server must answer 400, where libmicrohttpd would wait for a body
    /// until the connection closed), and an HTTP/1.1 request without exactly one `Host` (§3.2).
    static func problem(method: String, version: String, headers: HTTPHeaders) -> String? {
        guard !method.isEmpty, method.utf8.allSatisfy(HTTPToken.isTokenByte) else {
            return "the method is not an HTTP token"
        }
        let lengths = headers.values(for: "Content-Length")
            .flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if Set(lengths).count > 1 { return "the request has conflicting Content-Length fields" }
        if let length = lengths.first, length.isEmpty || !length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return "the Content-Length is not a number of bytes"
        }
        let codings = headers.values(for: "Transfer-Encoding")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if !codings.isEmpty || headers.contains("Transfer-Encoding") {
            if !lengths.isEmpty { return "the request has both Content-Length and Transfer-Encoding" }
            if codings != ["chunked"] {
                return "the Transfer-Encoding must be chunked alone (this server decodes no other transfer coding, "
                    + "and chunked must be last and not repeated)"
            }
        }
        if !HTTPHeaders.sameName(version, "HTTP/1.0") {
            let hosts = headers.values(for: "Host")
            if hosts.isEmpty { return "an HTTP/1.1 request needs a Host header" }
            if hosts.count > 1 { return "the request has more than one Host header" }
        }
        return nil
    }
}

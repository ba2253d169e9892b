import Foundation
import Sesame
import SesameHTTPServer

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP server's request handling: each input is sent as raw bytes on a new loopback
/// connection to one `HTTPServer` (started once, on 127.0.0.1), whose handler reads the query,
/// the form, the JSON body and the header fields and echoes some of them back. The server must
/// answer or close each connection; one that does neither within 15 s is a hang. A request cut
/// short (a body shorter than its `Content-Length`) is held until the idle timeout although the
/// client has closed its side, so the timeouts here are 1 s, the least there is.
enum HTTPServerFuzz {
    static let target = FuzzTarget(
        name: "http-server", summary: "HTTPServer: raw request bytes over a loopback connection"
    ) { data in
        exchange(data, port: server.port)
    }

    static let server: HTTPServer = {
        let server = HTTPServer(
            configuration: .init(
                maxConnections: 64, maxHeaderBytes: 16 * 1024, maxBodyBytes: 64 * 1024,
                connectionIdleTimeout: .seconds(1), stopGracePeriod: .seconds(1), requestHeadTimeout: .seconds(1))
        ) { request in
            var answer: [String: JSONValue] = [
                "method": .string(request.method.rawValue), "path": .string(request.path),
                "query": .array(request.query.map { .string("\($0.0)=\($0.1)") }),
                "form": .array(request.form.map { .string("\($0.0)=\($0.1)") }),
                "version": .string(request.httpVersion), "target": .string(request.rawTarget),
            ]
            if let json = request.json { answer["json"] = json }
            if let host = request.headers["Host"] { answer["host"] = .string(host) }
            var response = HTTPServerResponse.json(JSONValue.object(answer))
            // A value the client chose, to exercise header writing (CR, LF, NUL...).
            if let echo = request.queryValue("echo") { response.headers["X-Echo"] = echo }
            if let status = request.queryValue("status").flatMap(Int.init) { response.status = status }
            if request.path.hasPrefix("/redirect"), let to = request.queryValue("to").flatMap(URL.init(string:)) {
                return .redirect(to: to)
            }
            return response
        }
        do {
            try server.start()
        } catch {
            preconditionFailure("the fuzz target's HTTP server did not start: \(error)")
        }
        return server
    }()

    /// Sends `data`, closes the sending side, and reads until the server closes.
    static func exchange(_ data: Data, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        require(descriptor >= 0, "socket() failed: errno \(errno)")
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        require(connected == 0, "connect() to the fuzz target's server failed: errno \(errno)")
        var sent = 0
        data.withUnsafeBytes { raw in
            while sent < raw.count {
                let count = send(descriptor, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if count <= 0 { return }  // the server may close early (a bad request line)
                sent += count
            }
        }
        shutdown(descriptor, Int32(SHUT_WR))
        let deadline = ContinuousClock.now + .seconds(15)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let left = deadline - ContinuousClock.now
            require(left > .zero, "the server neither answered nor closed the connection within 15 s")
            let ready = poll(&poller, 1, Int32(left.components.seconds * 1000 + 1))
            if ready < 0, errno == EINTR { continue }
            require(ready >= 0, "poll() failed: errno \(errno)")
            if ready == 0 { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { return }  // closed (or reset): done
        }
    }
}

/// The loopback redirect receiver's handling of the browser's request: the first line is the
/// request target (`/callback?code=...&state=...`), the lines after it header fields. The
/// login's expected `state` is the request's own when it has one, so that the checks after the
/// state check are reached; the parameters are also read as a redirect URL and as an OAuth
/// error, which each provider's taxonomy classifies.
enum RedirectFuzz {
    static let target = FuzzTarget(
        name: "redirect", summary: "LoopbackRedirectReceiver's callback handling, OAuth.parseRedirect"
    ) { data in
        let text = String(decoding: data, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let target = lines.isEmpty ? "/" : lines.removeFirst()
        let headers = HTTPHeaders(
            lines.compactMap { line in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (
                    String(line[..<colon]),
                    String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                )
            })
        let request = HTTPServerRequest(method: .get, target: target, headers: headers)
        let state = request.queryValue("state") ?? "fuzz-state"
        let issuer = request.queryValue("iss").map { AuthorizationResponseIssuer(issuer: $0, required: true) }
        // A login that has already ended, so that the page is rendered at once.
        let exchange = RedirectExchange(
            expectedState: state, expectedIssuer: issuer, provider: .oidc, callbackPath: "/callback", appName: "Fuzz")
        exchange.conclude(.signedIn)
        let response = runBlocking { await exchange.handle(request) }
        if let code = request.queryValue("code"), code.count >= 8 {
            require(
                !String(decoding: response.body, as: UTF8.self).contains(code),
                "the page shown after a redirect repeats the authorization code")
        }
        for url in [target, "http://127.0.0.1:8080" + target] {
            if let url = URL(string: url) {
                _ = try? OAuth.parseRedirect(url, expectedState: state, expectedIssuer: issuer, provider: .oidc)
            }
        }
    }
}

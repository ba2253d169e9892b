import Foundation
import Sesame
import SesameTestSupport
import Testing

/// A small HTTPS server on 127.0.0.1 that stands in for what kubectl or a container tool talks
/// to: a Kubernetes API server (`/api`, `/apis`, `/api/v1`, the default namespace's pods) that
/// takes only a bearer ID token of a login in Sesame's credential file, or a registry (`/v2/`
/// with a Basic challenge, one manifest, its config blob and tags) that takes only Basic with
/// the registry user name and an access token of a login in that file. The file is read at each
/// request, so a renewed login's token is taken and the one it replaced is refused.
///
/// Its certificate is signed by a CA the test makes with the openssl command; the server is
/// Python's http.server with ssl (Debian's python3). It logs one line per request
/// (`accepted GET /api`), never a token.
final class ToolServer: Sendable {
    enum Kind: String { case kube, registry }

    let port: Int
    let directory: URL
    private let process: LiveProcess

    static let python = "/usr/bin/python3"
    static let openssl = "/usr/bin/openssl"

    /// The CA certificate the server's certificate is signed with.
    var caPath: String { directory.appending(path: "ca.pem").path }
    /// A directory holding the CA as `ca.crt`, as containers' `--cert-dir` wants it.
    var certDirectory: String { directory.appending(path: "certs").path }

    /// Starts a server of `kind` that reads the logins in `store`; `username` is the registry's.
    init(_ kind: Kind, store: URL, username: String = "") async throws {
        for tool in [Self.python, Self.openssl] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool), "\(tool) is missing: run scripts/bootstrap")
        }
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-tool-\(UUID().uuidString)")
        self.directory = directory
        try FileManager.default.createDirectory(
            at: directory.appending(path: "certs"), withIntermediateDirectories: true)
        let file = { (name: String) in directory.appending(path: name).path }
        try await Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=sesame-test-ca", "-keyout", file("ca.key"), "-out", file("ca.pem"), "-addext",
            "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try await Self.openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
            "/CN=127.0.0.1", "-keyout", file("server.key"), "-out", file("server.csr"),
        ])
        try "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n".write(
            toFile: file("ext.cnf"), atomically: true, encoding: .utf8)
        try await Self.openssl([
            "x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"),
            "-CAcreateserial", "-days", "1", "-out", file("server.pem"), "-extfile", file("ext.cnf"),
        ])
        try FileManager.default.copyItem(atPath: file("ca.pem"), toPath: file("certs/ca.crt"))
        try Self.script.write(toFile: file("server.py"), atomically: true, encoding: .utf8)
        process = try await LiveProcess(
            URL(fileURLWithPath: Self.python),
            [file("server.py"), kind.rawValue, file("server.pem"), file("server.key"), store.path, username],
            environment: ["PATH": "/usr/bin:/bin"], input: Data())
        let printed = try await process.waitForError(matching: #"listening on \d+\n"#)
        port = try #require(printed.firstMatch(of: #/listening on (\d+)/#).flatMap { Int($0.1) })
    }

    /// What the server did so far: one line per request, `accepted|refused METHOD PATH`.
    var log: [Substring] { process.standardError.split(separator: "\n").dropFirst().map { $0 } }

    /// Requests it accepted and refused.
    var counts: (accepted: Int, refused: Int) {
        let lines = log
        return (lines.filter { $0.hasPrefix("accepted") }.count, lines.filter { $0.hasPrefix("refused") }.count)
    }

    /// Stops the server (awaited) and removes its directory.
    func stop() async {
        process.terminate()
        _ = await process.finish()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` with a running server, stopping it however `body` ends.
    static func with<T>(
        _ kind: Kind, store: URL, username: String = "", _ body: (ToolServer) async throws -> T
    ) async throws -> T {
        let server = try await ToolServer(kind, store: store, username: username)
        return try await TimeTravelProcessTests.stopping({ await server.stop() }) { try await body(server) }
    }

    private static func openssl(_ arguments: [String]) async throws {
        let result = try await ProcessRunner.run(URL(fileURLWithPath: openssl), arguments)
        try #require(result.status == 0, "openssl \(arguments.first ?? ""): \(result.standardError)")
    }

    static let script = """
        import base64, hashlib, http.server, json, ssl, sys

        mode, certfile, keyfile, store_path = sys.argv[1:5]
        username = sys.argv[5] if len(sys.argv) > 5 else ""

        def stored(field):
            # The tokens of the logins in Sesame's credential file, read at each request.
            try:
                with open(store_path) as f:
                    data = json.load(f)
            except Exception:
                return set()
            found = set()
            def walk(value):
                if isinstance(value, dict):
                    for key, item in value.items():
                        if key == field and isinstance(item, str):
                            found.add(item)
                        else:
                            walk(item)
                elif isinstance(value, list):
                    for item in value:
                        walk(item)
            walk(data)
            return found

        CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {}, "created": "2026-01-01T00:00:00Z",
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
        MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                               "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                          "size": len(CONFIG), "digest": CONFIG_DIGEST}, "layers": []}).encode()
        MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()

        KUBE = {
            "/api": {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"],
                 "shortNames": ["po"]}]},
            "/api/v1/namespaces/default/pods": {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                "items": [{"metadata": {"name": "sesame-test-pod", "namespace": "default", "uid": "1",
                                        "creationTimestamp": "2026-01-01T00:00:00Z"},
                           "spec": {"containers": [{"name": "main", "image": "example"}]},
                           "status": {"phase": "Running"}}]},
        }

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                pass

            def send(self, status, body, headers=()):
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def authorized(self):
                header = self.headers.get("Authorization", "")
                if mode == "kube":
                    return header.startswith("Bearer ") and header[7:] in stored("idToken")
                if not header.startswith("Basic "):
                    return False
                try:
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                except Exception:
                    return False
                return user == username and password in stored("tokenString")

            def do_HEAD(self):
                self.do_GET()

            def do_GET(self):
                path = self.path.split("?")[0]
                ok = self.authorized()
                sys.stderr.write("%s %s %s\\n" % ("accepted" if ok else "refused", self.command, path))
                sys.stderr.flush()
                if mode == "kube":
                    if not ok:
                        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                           "message": "Unauthorized", "reason": "Unauthorized", "code": 401}).encode()
                        return self.send(401, body, [("Content-Type", "application/json")])
                    if path not in KUBE:
                        return self.send(404, b'{"kind":"Status","code":404}', [("Content-Type", "application/json")])
                    return self.send(200, json.dumps(KUBE[path]).encode(), [("Content-Type", "application/json")])
                common = [("Docker-Distribution-API-Version", "registry/2.0")]
                if not ok:
                    body = b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'
                    return self.send(401, body, common + [("Content-Type", "application/json"),
                                                          ("WWW-Authenticate", 'Basic realm="sesame-test"')])
                if path == "/v2/":
                    return self.send(200, b"{}", common + [("Content-Type", "application/json")])
                if path == "/v2/sesame/test/manifests/v1" or path == "/v2/sesame/test/manifests/" + MANIFEST_DIGEST:
                    return self.send(200, MANIFEST, common + [
                        ("Content-Type", "application/vnd.docker.distribution.manifest.v2+json"),
                        ("Docker-Content-Digest", MANIFEST_DIGEST)])
                if path == "/v2/sesame/test/blobs/" + CONFIG_DIGEST:
                    return self.send(200, CONFIG, common + [("Content-Type", "application/octet-stream"),
                                                            ("Docker-Content-Digest", CONFIG_DIGEST)])
                if path == "/v2/sesame/test/tags/list":
                    return self.send(200, b'{"name":"sesame/test","tags":["v1"]}', common + [("Content-Type", "application/json")])
                return self.send(404, b'{"errors":[{"code":"NOT_FOUND"}]}', common + [("Content-Type", "application/json")])

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        sys.stderr.write("listening on %d\\n" % server.server_address[1])
        sys.stderr.flush()
        server.serve_forever()
        """
}

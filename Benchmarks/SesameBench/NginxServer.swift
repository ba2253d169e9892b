import Foundation
import Sesame

/// An nginx serving one small JSON file on 127.0.0.1, configured in a temporary directory that
/// is removed when it stops. Needs Debian's `nginx-light` (or any nginx ≥ 1.19.5 on the PATH).
struct NginxServer {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let process: ChildProcess
    let directory: URL
    let url: URL
    let bodySize: Int
    let version: String

    /// A body shaped like a Graph API `/me` answer.
    static let body = Data(
        #"{"id":"10158279543812345","name":"Ada Lovelace","email":"ada@example.com","picture":{"data":{"height":50,"is_silhouette":false,"url":"https://example.com/p.jpg","width":50}},"permissions":{"data":[{"permission":"public_profile","status":"granted"},{"permission":"email","status":"granted"}]}}"#
            .utf8)

    static func executable() throws -> String {
        var candidates = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx"]
        if let path = ProcessInfo.processInfo.environment["PATH"] {
            candidates += path.split(separator: ":").map { "\($0)/nginx" }
        }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(
                description: "nginx is not installed, and this benchmark serves its file with it. Install it "
                    + "with: sudo apt-get install nginx-light (Debian/Ubuntu). The benchmark runs it as a child "
                    + "on 127.0.0.1 with a configuration in a temporary directory and touches nothing else.")
        }
        return found
    }

    /// Starts nginx serving `body` as `/me.json` with `workers` worker processes (`1`, or `auto`
    /// for one per core).
    static func start(body: Data = NginxServer.body, workers: String = "1") throws -> NginxServer {
        let nginx = try executable()
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sesame-bench-nginx-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.removeItem(at: directory)
        let root = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // Readable by nginx's workers, which drop to `nobody` when started as root.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
        try body.write(to: root.appendingPathComponent("me.json"))
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644], ofItemAtPath: root.appendingPathComponent("me.json").path)

        var lastError = ""
        for _ in 0..<5 {
            let port = try freePort()
            let configuration = """
                worker_processes \(workers);
                daemon off;
                pid \(directory.path)/nginx.pid;
                error_log \(directory.path)/error.log warn;
                events { worker_connections 1024; }
                http {
                    access_log off;
                    default_type application/json;
                    keepalive_requests 10000000;
                    keepalive_timeout 120s;
                    client_body_temp_path \(directory.path)/body;
                    proxy_temp_path \(directory.path)/proxy;
                    fastcgi_temp_path \(directory.path)/fastcgi;
                    uwsgi_temp_path \(directory.path)/uwsgi;
                    scgi_temp_path \(directory.path)/scgi;
                    server {
                        listen 127.0.0.1:\(port) backlog=1024;
                        root \(root.path);
                    }
                }

                """
            let configurationFile = directory.appendingPathComponent("nginx.conf")
            try Data(configuration.utf8).write(to: configurationFile)

            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: nginx),
                arguments: ["-p", directory.path, "-c", configurationFile.path, "-e", directory.path + "/error.log"],
                standardInput: .null, standardOutput: .null, standardError: .null)
            try process.run()
            if waitUntilListening(port: port, process: process) {
                return NginxServer(
                    process: process, directory: directory,
                    url: URL(string: "http://127.0.0.1:\(port)/me.json")!, bodySize: body.count,
                    version: versionString(nginx))
            }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            lastError = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }
        try? FileManager.default.removeItem(at: directory)
        throw Failure(description: "nginx did not start on 127.0.0.1; its error log said:\n\(lastError)")
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A port the kernel just handed out for 127.0.0.1 (closed again, for nginx to take).
    private static func freePort() throws -> UInt16 { try CLIBenchmark.closedPort() }

    /// Connects until nginx answers, it exits, or 5 s pass.
    private static func waitUntilListening(port: UInt16, process: ChildProcess) -> Bool {
        for _ in 0..<500 {
            guard process.isRunning else { return false }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = port.bigEndian
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(fd)
            if connected { return true }
            usleep(10_000)
        }
        return false
    }

    private static func versionString(_ nginx: String) -> String {
        let pipe = Pipe()
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: nginx), arguments: ["-v"], standardInput: .null,
            standardOutput: .pipe(pipe), standardError: .pipe(pipe))
        guard (try? process.run()) != nil else { return "nginx" }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: output, as: UTF8.self)
        return text.split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { $0.replacingOccurrences(of: "/", with: " ") } ?? "nginx"
    }
}
